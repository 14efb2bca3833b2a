"""SessionLog: the durable side of session trees, and the operations that move them.

Guarantees callers rely on:

- :meth:`SessionLog.append` returns only after the event is committed, and
  only then is it applied to the tree: memory never shows an event the store
  may not have. A caller cancelled while waiting does not break that; the
  write completes (or fails) and the tree follows the store
  (:meth:`SessionLog.settled` waits for such writes).
- One append in flight per session (a per-session lock, held until the commit
  settles); ``(session_key, seq)`` is the primary key, so a second process
  appending to the same session fails with :class:`SessionError` instead of
  forking the log.
- Appends of different sessions share transactions (group commit, see
  :mod:`core.sessions._group_commit`), so throughput grows with the number of
  live sessions instead of being one fsync per event.
- Nothing is updated or deleted: moving the head, branching, bookmarking are
  events too, and the ``session_heads`` / ``session_branches`` projections are
  written in the same transaction as the events that change them.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter
from sqlalchemy.exc import IntegrityError

from core._gc import bulk_allocation
from core.clock import Clock, SystemClock
from core.errors import SessionError
from core.logging import get_logger
from core.sessions import repository
from core.sessions._group_commit import GroupCommitter
from core.sessions._writes import AppendItem, as_item, event_row, prepare_write, projection_rows
from core.sessions.events import DeliveryMode, SessionEvent
from core.sessions.payloads import UserMessagePayload
from core.sessions.tree import SessionTree
from core.store.database import Database
from core.store.errors import store_errors

__all__ = ["AppendItem", "SessionLog", "as_item"]

_log = get_logger("core.sessions")

_NODE_ID = re.compile(r"[0-9a-f]{32}")
_MAX_LABEL = 100

# One pydantic-core call for a whole session instead of one __init__ per event.
_EVENTS = TypeAdapter(list[SessionEvent])


class SessionLog:
    """Loads session trees from the store and appends to them durably."""

    def __init__(self, database: Database, *, clock: Clock | None = None) -> None:
        self._db = database
        self._clock: Clock = clock or SystemClock()
        self._committer = GroupCommitter(database)
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # -- reading ----------------------------------------------------------------

    async def load(self, session_key: str) -> SessionTree:
        """Rehydrate a session by replaying its events; an empty tree for a new key.

        The head/branch projections are compared with the replay; if they
        disagree the events win, ``session.projection_mismatch`` is logged and
        the projections are rewritten.

        Raises:
            SessionError: the stored log does not replay (it was edited by hand).
            StoreError: the store could not be read.
        """
        with store_errors(f"could not load session {session_key!r}"):
            array, head, branches = await self._db.run(repository.load_session, session_key)
        with bulk_allocation(promote=True):
            events = _EVENTS.validate_json(array)
            tree = SessionTree.from_events(session_key, events)
        if len(tree) and (
            head != (tree.active_branch_id, tree.head_id, tree.last_seq)
            or branches != tree.branches
        ):
            _log.warning(
                "session.projection_mismatch",
                session_key=session_key,
                stored_head=head,
                replayed_head=(tree.active_branch_id, tree.head_id, tree.last_seq),
                stored_branches=len(branches),
                replayed_branches=len(tree.branches),
            )
            await self._write_projection(tree)
        return tree

    async def session_keys(self) -> list[str]:
        """Every session that has at least one event, sorted."""
        return await self._db.run(repository.session_keys)

    async def session_of(self, node_id: str) -> str | None:
        """The session whose log holds event ``node_id`` (a button's handle), if any."""
        return await self._db.run(lambda conn: repository.session_of_node(conn, node_id))

    async def awaiting_approval(self) -> list[str]:
        """Sessions whose running turn waits for an approval: a restart takes them up."""
        return await self._db.run(repository.sessions_awaiting_approval)

    # -- appending ----------------------------------------------------------------

    async def append(
        self,
        tree: SessionTree,
        event: str | BaseModel,
        payload: Mapping[str, Any] | BaseModel | None = None,
        *,
        delivery_mode: DeliveryMode | None = None,
    ) -> SessionEvent:
        """Append one event after the head; durable before it returns, then applied to ``tree``.

        ``event`` is the typed payload model (its class names the event type), or
        a type name with its ``payload`` for types known only by name.

        Raises:
            SessionError: unknown type, a payload that does not fit, ``delivery_mode``
                missing on a ``user_message`` or given on anything else, or another
                writer appended to this session first.
            StoreError: the store did not commit; nothing was appended.
        """
        if isinstance(event, BaseModel):
            item = as_item(event, delivery_mode)
        elif payload is None:
            raise SessionError(f"a {event!r} event needs its payload", ref=event)
        else:
            item = (event, payload, delivery_mode)
        events = await self._append(tree, lambda: [item])
        return events[0]

    async def append_many(
        self, tree: SessionTree, items: Sequence[AppendItem]
    ) -> list[SessionEvent]:
        """Append several events in order, in one transaction: all are recorded or none."""
        items = list(items)
        if not items:
            return []
        return await self._append(tree, lambda: items)

    async def discard(self, session_key: str) -> None:
        """Remove a session that never started: the one exception to "nothing is deleted".

        A spawn writes the child's first event before it binds a thread; when
        the bind fails, that provisional session must not linger as a
        half-made subagent.
        """
        async with self._lock(session_key):
            with store_errors(f"could not discard session {session_key!r}"):
                await self._db.run(repository.discard_session, session_key)

    async def continue_from(self, tree: SessionTree, ref: str) -> str | None:
        """Move the head so the next events continue from ``ref`` (node id or bookmark).

        From a user message the head moves to its parent, so the next message
        (the edited one) becomes its sibling; its old text is returned for
        editing. Otherwise the head moves to ``ref`` and ``None`` is returned.
        Leaving the active branch's head forks a new branch (``branch_created``),
        except onto the head of an existing branch, which becomes active again.
        Nothing is rewritten: every branch keeps its events and its head.
        """
        old_text: str | None = None

        def plan() -> list[AppendItem]:
            nonlocal old_text
            node = tree.conversation_node(ref)
            target: str | None = node.node_id
            if (message := node.data_as(UserMessagePayload)) is not None:
                target, old_text = node.parent_id, message.text
            head, active = tree.head_id, tree.active_branch_id
            if target == head:
                return []
            branch = next(
                (b for b, h in tree.branches.items() if h == target and b != active), None
            )
            items: list[AppendItem] = []
            if branch is None:
                branch = _new_branch_id(tree)
                items.append(
                    ("branch_created", {"branch_id": branch, "from_node_id": target}, None)
                )
            moved = {"branch_id": branch, "node_id": target, "from_node_id": head}
            items.append(("head_moved", moved, None))
            return items

        await self._append(tree, plan, internal=True)
        return old_text

    async def bookmark(self, tree: SessionTree, ref: str, label: str) -> None:
        """Label the node ``ref``; a label already in use moves. The head never moves.

        Labels are 1 to 100 characters (outer spaces stripped) and may not look
        like a node id, so :meth:`SessionTree.resolve` is never ambiguous.
        """
        label = label.strip()
        if not label or len(label) > _MAX_LABEL or _NODE_ID.fullmatch(label):
            raise SessionError(
                f"bookmark label {label!r} is not usable; use 1 to {_MAX_LABEL} characters "
                "that do not look like a node id",
                session_key=tree.session_key,
                ref=label,
            )

        def plan() -> list[AppendItem]:
            node_id = tree.conversation_node(ref).node_id
            if tree.bookmarks.get(label) == node_id:
                return []
            return [("bookmark", {"node_id": node_id, "label": label}, None)]

        await self._append(tree, plan, internal=True)

    async def unbookmark(self, tree: SessionTree, label: str) -> None:
        """Remove a bookmark; the node stays. :class:`SessionError` for an unknown label."""

        def plan() -> list[AppendItem]:
            if label not in tree.bookmarks:
                raise SessionError(
                    f"session {tree.session_key!r} has no bookmark {label!r}; "
                    f"its bookmarks are: {', '.join(sorted(tree.bookmarks)) or 'none'}",
                    session_key=tree.session_key,
                    ref=label,
                )
            return [("unbookmark", {"label": label}, None)]

        await self._append(tree, plan, internal=True)

    async def import_tree(self, tree: SessionTree) -> None:
        """Store every event of ``tree`` for a session that has none yet, in one transaction.

        Used by :func:`core.sessions.export.import_into`.

        Raises:
            SessionError: the session already has events, or its node ids are taken.
            StoreError: the store did not commit; nothing was imported.
        """
        key = tree.session_key
        head, branches = projection_rows(tree, self._clock)
        if head is None:
            return
        rows = [event_row(event) for event in tree.events]

        def store(conn: Any) -> None:
            if repository.has_events(conn, key):
                raise SessionError(
                    f"session {key!r} already has events; import it under another key",
                    session_key=key,
                )
            repository.write_events(conn, rows, [head], branches)

        async with self._lock(key):
            with store_errors(f"could not import session {key!r}", leaves="nothing was stored"):
                try:
                    await self._db.run(store)
                except IntegrityError as exc:
                    raise SessionError(
                        f"the events of session {key!r} are already in this store under another "
                        "key; import them with a new session_key, which gives them new node ids",
                        session_key=key,
                    ) from exc

    async def close(self) -> None:
        """Wait for appends in flight; call before closing the database."""
        await self._committer.wait_idle()

    # -- internals ----------------------------------------------------------------

    def _lock(self, session_key: str) -> asyncio.Lock:
        lock = self._locks.get(session_key)
        if lock is None:
            lock = self._locks[session_key] = asyncio.Lock()
        return lock

    async def _append(
        self,
        tree: SessionTree,
        plan: Callable[[], Sequence[AppendItem]],
        *,
        internal: bool = False,
    ) -> list[SessionEvent]:
        """Build the planned events under the session's lock and commit them.

        The plan runs under the lock so it sees the tree as the commit will
        find it. The lock is released only when the write settles, even if
        this caller is cancelled, so the next append never computes a ``seq``
        the store has not confirmed yet.
        """
        lock = self._lock(tree.session_key)
        await lock.acquire()
        try:
            items = plan()
            write = prepare_write(tree, items, self._clock.now(), internal=internal)
        except BaseException:
            lock.release()
            raise
        if not write.events:
            lock.release()
            return []
        write.on_settled = lock.release
        # Cancelling this caller cancels ``done`` only: the committer still applies
        # the committed events and releases the lock (no shield or task per append).
        await self._committer.submit(write)
        return write.events

    async def settled(self, session_key: str) -> None:
        """Return once every append to ``session_key`` begun before this call has been
        committed and applied, or has failed, even those whose callers were cancelled.

        ``Agent.cancel`` waits for this before it looks at the tree: a write the
        cancelled turn had started still lands.
        """
        lock = self._locks.get(session_key)
        if lock is not None and lock.locked():
            async with lock:
                pass

    async def _write_projection(self, tree: SessionTree) -> None:
        head, branches = projection_rows(tree, self._clock)
        async with self._lock(tree.session_key):
            await self._db.run(repository.replace_projection, tree.session_key, head, branches)


def _new_branch_id(tree: SessionTree) -> str:
    branches = tree.branches
    number = len(branches)
    while f"branch-{number}" in branches:
        number += 1
    return f"branch-{number}"
