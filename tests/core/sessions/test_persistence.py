"""SessionLog and the store: rehydration, projections, group commit, one writer per seq."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Connection, Text, cast, select
from sqlalchemy.exc import IntegrityError
from structlog.testing import capture_logs

from core.clock import FakeClock
from core.errors import SessionError
from core.sessions import (
    DeliveryMode,
    EventKind,
    SessionEvent,
    SessionLog,
    SessionTree,
    export_html,
)
from core.sessions import repository as session_repository
from core.sessions.payloads import AssistantMessagePayload, UnknownPayload, UserMessagePayload
from core.store import Database
from core.store.tables import SessionBranchRow, SessionEventRow, SessionHeadRow
from tests.fixtures.sessions import T0, build_branched, reply, say, system
from tests.fixtures.stores import StoreFactory

_HEADS = SessionHeadRow.__table__
_BRANCHES = SessionBranchRow.__table__
_EVENTS = SessionEventRow.__table__


async def _conversation(log: SessionLog, tree: SessionTree) -> None:
    """A session with a fork, a bookmark, queues, usage and an interrupted turn."""
    first = await say(log, tree, "hello <b>world</b>", author_id="u1")
    await reply(log, tree, "hi")
    await log.continue_from(tree, first.node_id)
    await say(log, tree, "hello again", mode="follow_up")
    await log.bookmark(tree, first.node_id, "start")
    await system(log, tree, "turn_started", turn_id="t1", trigger="follow_up")
    await system(log, tree, "message_queued", item_id="s1", mode="steer", text="stop")
    await system(log, tree, "message_queued", item_id="f1", mode="follow_up", text="then")
    await system(
        log,
        tree,
        "steer_interruption",
        turn_id="t1",
        step=1,
        skipped_tool_call_ids=["c2"],
        steering_item_ids=["s1"],
    )
    await system(log, tree, "usage", turn_id="t1", prompt_tokens=3, completion_tokens=4)


def _projection(key: str) -> Any:
    def read(conn: Connection) -> tuple[Any, dict[str, str | None]]:
        head = conn.execute(
            select(_HEADS.c.active_branch_id, _HEADS.c.head_node_id, _HEADS.c.last_seq).where(
                _HEADS.c.session_key == key
            )
        ).one()
        branches = conn.execute(
            select(_BRANCHES.c.branch_id, _BRANCHES.c.head_node_id).where(
                _BRANCHES.c.session_key == key
            )
        ).all()
        return tuple(head), dict(branches)

    return read


def _as_loaded(head: Any, rows: dict[str, str | None]) -> dict[str, str | None]:
    """The branch -> head map a load reads: the active branch's row is not kept up to
    date at each append; its head is the head row's."""
    return {**rows, head[0]: head[1]}


class TestRehydrate:
    async def test_reopened_store_gives_the_same_tree(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        """After close and reopen, the loaded tree equals the one in memory."""
        db = await open_store()
        log = SessionLog(db, clock=clock)
        tree = await log.load("s")
        await _conversation(log, tree)
        await log.close()
        await db.close()

        reopened = SessionLog(await open_store(), clock=clock)
        loaded = await reopened.load("s")
        assert loaded.snapshot() == tree.snapshot()
        assert loaded.path() == tree.path()
        assert loaded == tree
        assert loaded.total_usage == tree.total_usage
        assert all(e.created_at.tzinfo is not None for e in loaded.events)

    async def test_projection_tables_agree_with_the_replay(
        self, database: Database, clock: FakeClock
    ) -> None:
        """session_heads and session_branches hold what the replay computes."""
        log = SessionLog(database, clock=clock)
        tree = await log.load("s")
        await _conversation(log, tree)
        head, branches = await database.run(_projection("s"))
        assert head == (tree.active_branch_id, tree.head_id, tree.last_seq)
        assert _as_loaded(head, branches) == tree.branches
        inactive = {b: h for b, h in tree.branches.items() if b != tree.active_branch_id}
        assert {b: h for b, h in branches.items() if b in inactive} == inactive

    async def test_branch_rows_follow_switches_between_branches(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        """Appends leave the active branch's row alone; a branch left behind has its
        head recorded, and a reopened store loads every branch's head and the active
        branch as the replay does, however often the session moved between them."""
        db = await open_store()
        log = SessionLog(db, clock=clock)
        tree = await log.load("s")
        first = await say(log, tree, "first")
        main_head = await reply(log, tree, "one")
        await log.continue_from(tree, first.node_id)  # edits the first message: branch-1
        await say(log, tree, "first, edited")
        side_head = await reply(log, tree, "another answer")
        await log.continue_from(tree, main_head.node_id)  # back to main
        await say(log, tree, "main goes on")
        await log.continue_from(tree, side_head.node_id)  # and to branch-1 again
        await say(log, tree, "the side goes on")
        assert sorted(tree.branches) == ["branch-1", "main"]
        head, rows = await db.run(_projection("s"))
        assert head[0] == "branch-1"
        assert rows["main"] == tree.branches["main"]  # left behind: recorded
        await log.close()
        await db.close()

        reopened = SessionLog(await open_store(), clock=clock)
        with capture_logs() as logs:
            loaded = await reopened.load("s")
        assert logs == []  # no projection mismatch
        assert loaded == tree
        assert loaded.branches == tree.branches
        assert (loaded.active_branch_id, loaded.head_id) == ("branch-1", tree.head_id)
        await reply(reopened, loaded, "after the reload")
        assert (await reopened.load("s")).path() == loaded.path()

    async def test_a_wrong_projection_is_logged_and_repaired(
        self, database: Database, clock: FakeClock
    ) -> None:
        """When the projection disagrees, the events win and the projection is rewritten."""
        log = SessionLog(database, clock=clock)
        tree = await log.load("s")
        await _conversation(log, tree)
        await database.run(
            lambda conn: conn.execute(
                _HEADS.update().values(head_node_id=None, last_seq=1, active_branch_id="main")
            )
        )
        with capture_logs() as logs:
            loaded = await log.load("s")
        assert loaded == tree
        assert [e["event"] for e in logs] == ["session.projection_mismatch"]
        assert logs[0]["session_key"] == "s"
        head, branches = await database.run(_projection("s"))
        assert head == (tree.active_branch_id, tree.head_id, tree.last_seq)
        assert _as_loaded(head, branches) == tree.branches

    async def test_strings_that_need_quoting_survive_a_load(self, database: Database) -> None:
        """Keys, node ids and texts with quotes, backslashes, newlines and non-ASCII
        characters (an imported export may carry any) load back exactly."""
        key = 'odd "key" \\ ünï\ncode'
        tree = SessionTree(key)
        parent: str | None = None
        for seq, (node_id, text) in enumerate(
            [('a"b', 'say "hi"\n\tthen \\ go'), ("c\\d", "✓ ünïcode"), ("e\nf", "")], start=1
        ):
            event = SessionEvent(
                session_key=key,
                node_id=node_id,
                parent_id=parent,
                seq=seq,
                kind="user",
                type="user_message",
                payload={"text": text, "requested_mode": "normal"},
                delivery_mode="normal",
                created_at=T0 + timedelta(microseconds=seq),
            )
            tree.apply(event)
            parent = node_id
        log = SessionLog(database)
        await log.import_tree(tree)
        loaded = await log.load(key)
        assert loaded == tree
        assert [e.created_at for e in loaded.events] == [e.created_at for e in tree.events]

    async def test_every_stored_event_keeps_its_envelope(self, database: Database) -> None:
        """Appends and imports write each row's JSON text up to its payload, so a load
        reads it instead of building it; with the payload and "}" it is the event."""
        log = SessionLog(database)
        tree = await log.load("s")
        await _conversation(log, tree)
        copy = build_branched("copy", path_nodes=6, side_every=3, side_nodes=2)
        await log.import_tree(copy)

        def read(conn: Connection) -> list[tuple[str, str | None, str]]:
            query = select(_EVENTS.c.session_key, _EVENTS.c.envelope, cast(_EVENTS.c.payload, Text))
            return [tuple(row) for row in conn.execute(query.order_by(_EVENTS.c.seq))]

        rows = await database.run(read)
        assert len(rows) == len(tree) + len(copy)
        by_key = {"s": tree, "copy": copy}
        for key, envelope, payload in rows:
            assert envelope is not None
            event = SessionEvent.model_validate_json(envelope + payload + "}")
            assert event == by_key[key].events[event.seq - 1]

    async def test_rows_without_an_envelope_load_as_before(self, database: Database) -> None:
        """Rows written before schema version 9, or by a process of an earlier version
        during an upgrade, have none: the load builds their text, mixed with the others."""
        log = SessionLog(database)
        tree = await log.load("s")
        await _conversation(log, tree)
        await database.run(
            lambda conn: conn.execute(
                _EVENTS.update().where(_EVENTS.c.seq % 2 == 1).values(envelope=None)
            )
        )
        loaded = await SessionLog(database).load("s")
        assert loaded == tree
        assert loaded.branches == tree.branches
        assert (loaded.active_branch_id, loaded.head_id) == (tree.active_branch_id, tree.head_id)
        assert [e.created_at for e in loaded.events] == [e.created_at for e in tree.events]

    async def test_unknown_key_is_an_empty_tree(self, database: Database) -> None:
        """Loading a session that never had events gives an empty tree, and stores nothing."""
        log = SessionLog(database)
        tree = await log.load("new")
        assert (len(tree), tree.head_id, tree.last_seq) == (0, None, 0)
        assert await log.session_keys() == []

    async def test_session_keys(self, database: Database) -> None:
        """Every session with an event is listed, sorted."""
        log = SessionLog(database)
        for key in ("b", "a"):
            await say(log, await log.load(key), "hi")
        assert await log.session_keys() == ["a", "b"]


_OTHER_VERSIONS: list[tuple[str, EventKind, dict[str, Any], DeliveryMode | None]] = [
    # a key an earlier version wrote and this one dropped
    ("user_message", "user", {"text": "hi", "requested_mode": "normal", "n": [1]}, "normal"),
    # a plugin's type, the plugin not loaded in this process
    ("plugin.note", "system", {"note": "kept as written"}, None),
    # a payload that no longer fits its model (no text)
    ("user_message", "user", {"requested_mode": "normal"}, "normal"),
    # written before the optional fields' defaults were stored
    ("assistant_message", "assistant", {"turn_id": "t1", "text": "hello"}, None),
]


class TestRowsOfOtherVersions:
    async def test_they_load_and_read_as_far_as_they_can(self, database: Database) -> None:
        """Rows a plugin that is gone, or an earlier version, wrote: the session loads with
        no payload parsed; each event's data is its model where one reads it, else an
        UnknownPayload, and the readers of the session carry on past it."""
        tree = SessionTree("old")
        for seq, (type_, kind, payload, mode) in enumerate(_OTHER_VERSIONS, start=1):
            tree.apply(
                SessionEvent(
                    session_key="old",
                    node_id=f"n{seq}",
                    parent_id=tree.head_id,
                    seq=seq,
                    kind=kind,
                    type=type_,
                    payload=payload,
                    delivery_mode=mode,
                    created_at=T0,
                )
            )
        await SessionLog(database).import_tree(tree)
        loaded = await SessionLog(database).load("old")
        assert loaded == tree
        # Lazily: a load parses no payload (the models are built by the first read).
        assert not any("_typed_payload" in event.__dict__ for event in loaded.events)
        first, plugin, broken, reply_ = loaded.events
        assert first.data == UserMessagePayload(text="hi")
        assert plugin.data == UnknownPayload(
            type="plugin.note", reason="no payload model is registered for 'plugin.note'"
        )
        assert plugin.payload == {"note": "kept as written"}
        assert isinstance(broken.data, UnknownPayload)
        assert reply_.data == AssistantMessagePayload(turn_id="t1", text="hello")
        assert loaded.last_answer() == "hello"
        page = export_html(loaded)
        assert "plugin.note" in page
        assert "kept as written" in page


def append_runner(database: Database) -> str:
    """The Database method a SessionLog's appends go through (the sqlite:// store has its own)."""
    return "run_sqlite" if database.direct_sqlite else "run"


class TestConcurrency:
    async def test_fifty_sessions_append_concurrently(self, database: Database) -> None:
        """All appends succeed, each session's seq is contiguous, and commits were shared."""
        log = SessionLog(database)
        trees = [await log.load(f"s{i:02d}") for i in range(50)]
        transactions = 0
        name = append_runner(database)
        run = getattr(database, name)

        async def counting_run(fn: Any, /, *args: Any) -> Any:
            nonlocal transactions
            transactions += 1
            return await run(fn, *args)

        setattr(database, name, counting_run)
        try:

            async def talk(tree: SessionTree) -> None:
                for i in range(5):
                    await say(log, tree, f"q{i}")
                    await reply(log, tree, f"a{i}")

            async with asyncio.timeout(60), asyncio.TaskGroup() as group:
                for tree in trees:
                    group.create_task(talk(tree))
        finally:
            delattr(database, name)
        assert transactions < 50 * 10 / 2
        for tree in trees:
            loaded = await log.load(tree.session_key)
            assert [e.seq for e in loaded.events] == list(range(1, 11))
            assert loaded == tree
            assert len(loaded.path()) == 10

    async def test_seq_is_unique_per_session(self, database: Database) -> None:
        """A second writer with a stale tree fails; the store keeps one event at that seq."""
        first, second = SessionLog(database), SessionLog(database)
        mine, theirs = await first.load("s"), await second.load("s")
        await say(first, mine, "mine")
        with pytest.raises(SessionError, match="another writer"):
            await say(second, theirs, "theirs")
        assert len(theirs) == 0
        loaded = await first.load("s")
        assert [e.payload["text"] for e in loaded.events] == ["mine"]

    async def test_the_store_refuses_a_duplicate_seq(self, database: Database) -> None:
        """The primary key (session_key, seq) holds even for a write that skips SessionLog."""
        log = SessionLog(database)
        tree = await log.load("s")
        event = await say(log, tree, "hi")
        row = {**event.model_dump(), "node_id": "f" * 32}
        head = {
            "session_key": "s",
            "active_branch_id": "main",
            "head_node_id": None,
            "last_seq": 1,
            "updated_at": event.created_at,
        }
        with pytest.raises(IntegrityError):
            await database.run(session_repository.write_events, [row], [head], [])

    async def test_appended_rows_are_stored_as_core_stores_them(self, database: Database) -> None:
        """Appends (straight to the driver on SQLite) store the very values a Core
        insert of the same rows stores: payload JSON, UTC stamps, NULLs."""
        stamp = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=2)))
        whole = stamp.replace(microsecond=0)  # no fraction: still written with one

        def rows(key: str, at: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
            event = {
                "session_key": key,
                "seq": 1,
                "node_id": f"{key:0>32}",
                "parent_id": None,
                "kind": "user",
                "type": "user_message",
                "payload": {"text": 'héllo "x"', "n": [1, None], "requested_mode": "normal"},
                "delivery_mode": "normal",
                "created_at": at,
            }
            head = {
                "session_key": key,
                "active_branch_id": "main",
                "head_node_id": event["node_id"],
                "last_seq": 1,
                "updated_at": at,
            }
            return event, head

        def store(conn: Connection) -> None:
            for key, at in (("a", stamp), ("c", whole)):
                event, head = rows(key, at)
                session_repository.write_events(conn, [event], [head], [])
            for key, at in (("b", stamp), ("d", whole)):
                event, head = rows(key, at)
                conn.execute(_EVENTS.insert(), [event])
                conn.execute(_HEADS.insert(), [head])

        def read(conn: Connection) -> dict[str, tuple[Any, ...]]:
            texts = conn.execute(
                select(
                    _EVENTS.c.session_key,
                    cast(_EVENTS.c.payload, Text),
                    cast(_EVENTS.c.created_at, Text),
                    cast(_HEADS.c.updated_at, Text),
                    _EVENTS.c.delivery_mode,
                    _EVENTS.c.parent_id,
                ).join(_HEADS, _HEADS.c.session_key == _EVENTS.c.session_key)
            ).all()
            return {row[0]: tuple(row[1:]) for row in texts}

        await database.run(store)
        stored = await database.run(read)
        assert stored["a"] == stored["b"]
        assert stored["c"] == stored["d"]
        loaded = await SessionLog(database).load("a")
        assert loaded.events[0].created_at == stamp
        assert loaded.events[0].payload["text"] == 'héllo "x"'

    async def test_one_conflict_does_not_fail_the_batch(self, database: Database) -> None:
        """A stale writer sharing a transaction with others fails alone."""
        log, other = SessionLog(database), SessionLog(database)
        stale = await other.load("contested")
        await say(log, await log.load("contested"), "first")
        trees = [await log.load(f"ok{i}") for i in range(5)]
        results = await asyncio.gather(
            say(other, stale, "late"),
            *(say(log, tree, "fine") for tree in trees),
            return_exceptions=True,
        )
        assert isinstance(results[0], SessionError)
        assert all(not isinstance(r, BaseException) for r in results[1:])
        assert all(tree.last_seq == 1 for tree in trees)

    async def test_a_cancelled_caller_still_gets_its_event_applied(
        self, database: Database
    ) -> None:
        """Cancelling an append mid-commit leaves the tree in step with the store."""
        log = SessionLog(database)
        tree = await log.load("s")
        task = asyncio.get_running_loop().create_task(say(log, tree, "hello"))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await log.close()
        stored = await log.load("s")
        assert len(stored) == 1
        assert stored == tree
        nxt = await say(log, tree, "again")
        assert nxt.seq == len(stored) + 1

    async def test_settled_waits_for_the_write_of_a_cancelled_caller(
        self, database: Database
    ) -> None:
        """A caller cancelled while its commit is under way leaves the write running;
        ``settled`` returns once it has landed in the tree."""
        log = SessionLog(database)
        tree = await log.load("s")
        entered, gate = asyncio.Event(), asyncio.Event()
        name = append_runner(database)
        run = getattr(database, name)

        async def held(fn: Any, /, *args: Any) -> Any:
            entered.set()
            await gate.wait()
            return await run(fn, *args)

        setattr(database, name, held)
        try:
            task = asyncio.get_running_loop().create_task(say(log, tree, "hello"))
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert len(tree) == 0  # not committed yet
            waiter = asyncio.get_running_loop().create_task(log.settled("s"))
            asyncio.get_running_loop().call_soon(gate.set)  # after the waiter has started
            await waiter
            assert [e.payload["text"] for e in tree.events] == ["hello"]
        finally:
            delattr(database, name)
        assert await log.load("s") == tree
        await log.settled("never-written")  # nothing pending: returns at once
