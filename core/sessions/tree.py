"""SessionTree: a session's state, rebuilt by replaying its events. Pure, no I/O.

Everything a running session asks about itself (the head, the active path,
bookmarks, the queues, whether a turn is running) is answered here from
memory. The tree changes only through :meth:`SessionTree.apply`, which
:class:`~core.sessions.log.SessionLog` calls after an event is committed, and
at load, when the stored events are replayed in ``seq`` order; so the state
in memory is always exactly what the log says.

``apply`` checks that each event continues the log (next ``seq``, ``parent_id``
equal to the head, references to existing nodes) before changing anything,
so a corrupt log fails loudly at load instead of answering wrong questions.

The replay handlers read the stored payloads (``event.payload``), not their models
(``event.data``): they run for every event at load, and parsing each payload into its
model there would make a load of 10,000 events half again as slow. The payloads were
validated against those models when they were written. Every other read goes through
``event.data``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from core.errors import SessionError
from core.sessions._turn_state import TurnState
from core.sessions.events import ADVANCING_KINDS, SessionEvent
from core.sessions.payloads import AssistantMessagePayload
from core.sessions.snapshot import (
    ApprovalRecord,
    PendingApproval,
    QueuedMessage,
    SessionSnapshot,
    SteerInterruption,
    TreeNode,
    UsageTotals,
)

__all__ = [
    "MAIN_BRANCH",
    "ApprovalRecord",
    "PendingApproval",
    "QueuedMessage",
    "SessionSnapshot",
    "SessionTree",
    "SteerInterruption",
    "TreeNode",
    "UsageTotals",
]

MAIN_BRANCH: Final = "main"
"""The branch every session starts on."""


class SessionTree:
    """The projection of one session's events: head, branches, bookmarks, queues, turn state."""

    __slots__ = ("_active", "_bookmarks", "_branches", "_by_id", "_children", "_events",
                 "_head", "_key", "_turns")  # fmt: skip

    def __init__(self, session_key: str) -> None:
        self._key = session_key
        self._events: list[SessionEvent] = []
        self._by_id: dict[str, SessionEvent] = {}
        # Conversation children per parent node; ``None`` holds the roots.
        self._children: dict[str | None, list[SessionEvent]] = {}
        self._head: str | None = None
        self._active: str = MAIN_BRANCH
        self._branches: dict[str, str | None] = {MAIN_BRANCH: None}
        self._bookmarks: dict[str, str] = {}
        self._turns = TurnState()

    @classmethod
    def from_events(cls, session_key: str, events: Iterable[SessionEvent]) -> SessionTree:
        """Replay ``events`` (in ``seq`` order, from 1) into a new tree."""
        tree = cls(session_key)
        apply = tree.apply
        for event in events:
            apply(event)
        return tree

    # -- replay ---------------------------------------------------------------

    def apply(self, event: SessionEvent) -> None:
        """Add one event that continues the log; raises :class:`SessionError` if it does not.

        Nothing changes when it raises.
        """
        if event.session_key != self._key:
            raise SessionError(
                f"event {event.node_id} belongs to session {event.session_key!r}, "
                f"not {self._key!r}",
                session_key=self._key,
                ref=event.node_id,
            )
        if event.seq != len(self._events) + 1 or event.parent_id != self._head:
            raise SessionError(
                f"event seq {event.seq} (parent {event.parent_id}) does not continue session "
                f"{self._key!r} at seq {len(self._events)} with head {self._head}; "
                "reload the session",
                session_key=self._key,
                ref=event.node_id,
            )
        if event.node_id in self._by_id:
            raise SessionError(
                f"node {event.node_id} appears twice in session {self._key!r}",
                session_key=self._key,
                ref=event.node_id,
            )
        handler = _HANDLERS.get(event.type)
        if handler is not None:  # validates its references before changing anything
            handler(self, event)
        self._turns.apply(event)
        node_id = event.node_id
        self._events.append(event)
        self._by_id[node_id] = event
        if event.kind in ADVANCING_KINDS:
            siblings = self._children.get(event.parent_id)
            if siblings is None:
                self._children[event.parent_id] = [event]
            else:
                siblings.append(event)
            self._head = node_id
            self._branches[self._active] = node_id

    # -- state ----------------------------------------------------------------

    @property
    def session_key(self) -> str:
        return self._key

    @property
    def head_id(self) -> str | None:
        """The node the next conversation event will hang off; ``None`` before the first."""
        return self._head

    @property
    def active_branch_id(self) -> str:
        return self._active

    @property
    def branches(self) -> dict[str, str | None]:
        """Every branch id with its head node (a copy); old branches keep their heads."""
        return dict(self._branches)

    @property
    def bookmarks(self) -> dict[str, str]:
        """Label -> node id (a copy)."""
        return dict(self._bookmarks)

    @property
    def steering_queue(self) -> tuple[QueuedMessage, ...]:
        """Steering messages waiting for the running turn's next safe point, oldest first."""
        return tuple(self._turns.steering.values())

    @property
    def follow_up_queue(self) -> tuple[QueuedMessage, ...]:
        """Messages waiting for the running turn to end, oldest first."""
        return tuple(self._turns.follow_up.values())

    @property
    def running_turn_id(self) -> str | None:
        """The turn started and not yet ended, cancelled or interrupted, if any."""
        return self._turns.running

    def holds_inbound(self, inbound_id: str, /) -> bool:
        """Whether the log already holds the message with this channel id (queued or
        delivered): the inbox's test before it hands a message over again."""
        return inbound_id in self._turns.inbound

    @property
    def last_interruption(self) -> SteerInterruption | None:
        """The steer interruption of the latest turn; cleared when a turn starts."""
        return self._turns.interruption

    @property
    def total_usage(self) -> UsageTotals:
        return self._turns.usage

    @property
    def people(self) -> int:
        """How many people have written in this session (the bot's own messages aside)."""
        return len(self._turns.people)

    @property
    def model_choice(self) -> tuple[str, str] | None:
        """``(provider, model)`` chosen with ``/model`` (the latest), None if never."""
        return self._turns.model

    @property
    def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """Tool calls of the running turn waiting for a person's decision, oldest first."""
        return tuple(self._turns.approvals.values())

    def approval_decision(self, tool_call_id: str, /) -> ApprovalRecord | None:
        """How the approval request of ``tool_call_id`` was decided, if it was."""
        return self._turns.decisions.get(tool_call_id)

    def allowed_for_session(self, tool_name: str, /) -> bool:
        """Whether a person allowed ``tool_name`` for the rest of this session."""
        return tool_name in self._turns.allowed_tools

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest event; 0 for an empty session."""
        return len(self._events)

    @property
    def events(self) -> tuple[SessionEvent, ...]:
        """Every event, conversation and system, in ``seq`` order."""
        return tuple(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __eq__(self, other: object) -> bool:
        # The state is a function of the events, so equal events mean equal trees.
        if not isinstance(other, SessionTree):
            return NotImplemented
        return self._key == other._key and self._events == other._events

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as list; typeshed types it as a method

    def __repr__(self) -> str:
        return f"SessionTree({self._key!r}, events={len(self._events)}, head={self._head!r})"

    # -- navigation -----------------------------------------------------------

    def resolve(self, ref: str, /) -> str:
        """The node id ``ref`` names: a node id itself, or a bookmark label.

        Raises:
            SessionError: no node has that id and no bookmark that label.
        """
        if ref in self._by_id:
            return ref
        node_id = self._bookmarks.get(ref)
        if node_id is None:
            raise SessionError(
                f"session {self._key!r} has no node or bookmark {ref!r}; "
                "use a node id from the tree or one of its bookmark labels",
                session_key=self._key,
                ref=ref,
            )
        return node_id

    def get(self, ref: str, /) -> SessionEvent:
        """The event ``ref`` (node id or bookmark label) names."""
        return self._by_id[self.resolve(ref)]

    def conversation_node(self, ref: str, /) -> SessionEvent:
        """Like :meth:`get`, but refuses system events, which are not on any path."""
        event = self.get(ref)
        if event.kind not in ADVANCING_KINDS:
            raise SessionError(
                f"{ref!r} is a {event.type} event, not a conversation node of session "
                f"{self._key!r}; pick a user, assistant or tool node",
                session_key=self._key,
                ref=ref,
            )
        return event

    def path(self, head: str | None = None) -> list[SessionEvent]:
        """Conversation nodes from the root to ``head`` (default: the current head)."""
        node_id = self._head if head is None else self.conversation_node(head).node_id
        by_id = self._by_id
        path: list[SessionEvent] = []
        while node_id is not None:
            event = by_id[node_id]
            path.append(event)
            node_id = event.parent_id
        path.reverse()
        return path

    def last_answer(self, *, after: int = 0) -> str:
        """The last non-empty text the assistant said on the active path, past its first
        ``after`` nodes (a turn's answer); "" when it said nothing there.

        One rule for "the answer": a task's result, a brief, an answer posted in a channel.
        """
        for event in reversed(self.path()[after:]):
            reply = event.data_as(AssistantMessagePayload)
            if reply is not None and reply.text:
                return reply.text
        return ""

    def said(self) -> list[SessionEvent]:
        """The people's and the assistant's messages on the active path (no tool results)."""
        return [e for e in self.path() if e.type in ("user_message", "assistant_message")]

    def children(self, ref: str, /) -> list[SessionEvent]:
        """The conversation nodes continuing ``ref``, oldest first."""
        return list(self._children.get(self.resolve(ref), ()))

    def roots(self) -> list[SessionEvent]:
        """Conversation nodes without a parent (more than one after editing the first message)."""
        return list(self._children.get(None, ()))

    def tree(self) -> list[TreeNode]:
        """The conversation as nested nodes, roots first, children in ``seq`` order."""
        on_path = {event.node_id for event in self.path()}
        labels: dict[str, list[str]] = {}
        for label, node_id in self._bookmarks.items():
            labels.setdefault(node_id, []).append(label)
        built: dict[str, TreeNode] = {}
        # Children always come after their parent, so walking backwards builds
        # every child before its parent: no recursion, whatever the depth.
        for event in reversed(self._events):
            if event.kind not in ADVANCING_KINDS:
                continue
            kids = [built.pop(child.node_id) for child in self._children.get(event.node_id, ())]
            built[event.node_id] = TreeNode.model_construct(
                event=event,
                children=kids,
                on_active_path=event.node_id in on_path,
                bookmarks=labels.get(event.node_id, []),
            )
        return [built[root.node_id] for root in self._children.get(None, ())]

    def snapshot(self) -> SessionSnapshot:
        return SessionSnapshot(
            session_key=self._key,
            active_branch_id=self._active,
            head_node_id=self._head,
            bookmarks=dict(self._bookmarks),
            steering_queue=self.steering_queue,
            follow_up_queue=self.follow_up_queue,
            last_interruption=self._turns.interruption,
            running=self._turns.running is not None,
            running_turn_id=self._turns.running,
            branches=dict(self._branches),
        )

    # -- event handlers: validate first, then change ---------------------------

    def _require_node(self, node_id: str | None, event: SessionEvent) -> None:
        if node_id is not None and (
            node_id not in self._by_id or self._by_id[node_id].kind not in ADVANCING_KINDS
        ):
            raise SessionError(
                f"{event.type} event seq {event.seq} of session {self._key!r} names "
                f"{node_id!r}, which is not a conversation node of the session",
                session_key=self._key,
                ref=node_id,
            )

    def _on_branch_created(self, event: SessionEvent) -> None:
        branch_id, from_node = event.payload["branch_id"], event.payload["from_node_id"]
        if branch_id in self._branches:
            raise SessionError(
                f"branch {branch_id!r} of session {self._key!r} is created twice (seq {event.seq})",
                session_key=self._key,
                ref=branch_id,
            )
        self._require_node(from_node, event)
        self._branches[branch_id] = from_node

    def _on_head_moved(self, event: SessionEvent) -> None:
        branch_id, node_id = event.payload["branch_id"], event.payload["node_id"]
        if branch_id not in self._branches:
            raise SessionError(
                f"head_moved seq {event.seq} of session {self._key!r} names unknown branch "
                f"{branch_id!r}",
                session_key=self._key,
                ref=branch_id,
            )
        self._require_node(node_id, event)
        self._active = branch_id
        self._head = node_id
        self._branches[branch_id] = node_id

    def _on_bookmark(self, event: SessionEvent) -> None:
        node_id = event.payload["node_id"]
        self._require_node(node_id, event)
        self._bookmarks[event.payload["label"]] = node_id

    def _on_unbookmark(self, event: SessionEvent) -> None:
        label = event.payload["label"]
        if label not in self._bookmarks:
            raise SessionError(
                f"session {self._key!r} has no bookmark {label!r} to remove (seq {event.seq})",
                session_key=self._key,
                ref=label,
            )
        del self._bookmarks[label]


_HANDLERS: Final[dict[str, Callable[[SessionTree, SessionEvent], Any]]] = {
    "branch_created": SessionTree._on_branch_created,
    "head_moved": SessionTree._on_head_moved,
    "bookmark": SessionTree._on_bookmark,
    "unbookmark": SessionTree._on_unbookmark,
}
"""The structural types; turn and queue types go to :class:`TurnState`, others only add a node."""
