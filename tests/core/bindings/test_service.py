"""SessionBindingService on a real store (SQLite file and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import Connection, func, select

from core.bindings.adapter import AdapterRegistry
from core.bindings.focus import Focus, Found
from core.bindings.lifecycle import expiry_reason, run_maintenance, sweep
from core.bindings.records import (
    BindingMetadata,
    BindingPersona,
    BindingUpdated,
    SessionBindingRecord,
)
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.errors import BindingError, ConversationAlreadyBound
from core.leases import Leases, take
from core.store import Database
from core.store.tables import BindingRow
from core.stream import EventStream
from tests.fixtures.adapters import RecordingAdapter
from tests.fixtures.bindings import conv
from tests.fixtures.stores import StoreFactory

HOUR_MS = 3_600_000


class Windows:
    """Every new binding's (idle timeout, max age) in ms, wherever it is."""

    def __init__(self, idle_ms: int, max_age_ms: int) -> None:
        self._windows = (idle_ms, max_age_ms)

    def binding_windows(self, scope: str | None, account_id: str, channel: str) -> tuple[int, int]:
        return self._windows


async def service_on(
    db: Database, clock: FakeClock, *adapters: RecordingAdapter, **kwargs
) -> SessionBindingService:
    registry = AdapterRegistry()
    stream: EventStream[object] = EventStream()
    for adapter in adapters:
        registry.register(adapter)
        adapter.watch(stream)
    kwargs.setdefault("publish", stream.publish)
    service = SessionBindingService(db, adapters=registry, clock=clock, **kwargs)
    await service.start()
    return service


async def stored_rows(db: Database) -> list[dict]:
    rows = await db.run(lambda conn: conn.execute(select(BindingRow.__table__)).all())
    return [dict(row._mapping) for row in rows]


class TestBindAndRestart:
    async def test_bind_survives_restart(self, open_store: StoreFactory, clock: FakeClock) -> None:
        """A binding made before a restart resolves after it, from the same store."""
        service = await service_on(await open_store(), clock)
        record = await service.bind(
            "agent:1", "subagent", conv("t1", "100"), scope="42", bound_by="u1"
        )
        await service.close()

        restarted = await service_on(await open_store(), clock)
        assert restarted.resolve_by_conversation(conv("t1")) == record
        assert restarted.list_by_session("agent:1") == (record,)
        assert restarted.get(record.binding_id).bound_at.tzinfo is not None

    async def test_bind_creates_conversation_through_adapter(
        self, database: Database, clock: FakeClock
    ) -> None:
        """An empty conversation id asks the adapter to open one, then binds it."""
        adapter = RecordingAdapter()
        service = await service_on(database, clock, adapter)
        record = await service.bind("agent:1", "subagent", conv("", "100"))
        assert record.conversation == adapter.created[0]
        assert record.conversation.parent_conversation_id == "100"
        assert adapter.intros == [record.binding_id]

    async def test_bind_without_adapter_cannot_create(
        self, database: Database, clock: FakeClock
    ) -> None:
        """Without an adapter, an empty conversation id is a clear error and nothing is stored."""
        service = await service_on(database, clock)
        with pytest.raises(BindingError, match="no adapter is registered for discord/main"):
            await service.bind("agent:1", "subagent", conv(""))
        assert await stored_rows(database) == []

    async def test_the_callers_rows_commit_with_the_binding_or_not_at_all(
        self, database: Database, clock: FakeClock
    ) -> None:
        """Bound in the caller's transaction, the binding commits with the caller's own
        writes (a spawn moves its subagent's row to running there): failing, neither stays."""
        service = await service_on(database, clock)
        owner = Leases(database, owner="p", clock=clock)
        now = clock.now()

        def lease_it(conn: Connection, record: SessionBindingRecord) -> None:
            take(conn, "session", record.binding_id, owner="p", now=now, until=now + owner.ttl)

        async with database.transaction() as tx:
            record = await service.bind("agent:1", "subagent", conv("t1"), tx=tx)
            tx.add(lease_it, record)
        assert await owner.holders("session") == {record.binding_id: "p"}

        def fail(conn: Connection, record: SessionBindingRecord) -> None:
            lease_it(conn, record)
            raise RuntimeError("the caller's write failed")

        async def bind_and_fail() -> None:
            async with database.transaction() as tx:
                second = await service.bind("agent:2", "subagent", conv("t2"), tx=tx)
                tx.add(fail, second)

        with pytest.raises(RuntimeError):
            await bind_and_fail()
        assert [row["target_session_key"] for row in await stored_rows(database)] == ["agent:1"]
        assert service.resolve_by_conversation(conv("t2")) is None
        assert len(await owner.holders("session")) == 1
        assert (await service.bind("agent:2", "subagent", conv("t2"))).conversation == conv("t2")

    async def test_unbind_commits_the_callers_write_once(
        self, database: Database, clock: FakeClock
    ) -> None:
        """With the bindings' ends, or alone when nothing is live to end."""
        service = await service_on(database, clock)
        owner = Leases(database, owner="p", clock=clock)
        now = clock.now()
        runs: list[str] = []

        def lease(key: str) -> Callable[[Connection], None]:
            def write(conn: Connection) -> None:
                runs.append(key)
                take(conn, "session", key, owner="p", now=now, until=now + owner.ttl)

            return write

        await service.bind("agent:1", "subagent", conv("t1"))
        await service.bind("agent:1", "subagent", conv("t2"))
        async with database.transaction() as tx:
            ended = await service.unbind(target_session_key="agent:1", reason="done", tx=tx)
            tx.add(lease("a"))
        assert len(ended) == 2
        async with database.transaction() as tx:
            again = await service.unbind(target_session_key="agent:1", reason="done", tx=tx)
            tx.add(lease("b"))
        assert again == []
        assert runs == ["a", "b"]
        assert await owner.holders("session") == {"a": "p", "b": "p"}

    async def test_failed_intro_keeps_binding(self, database: Database, clock: FakeClock) -> None:
        """The intro is a side effect; its failure does not undo a committed bind."""
        adapter = RecordingAdapter()
        adapter.fail_intro = True
        service = await service_on(database, clock, adapter)
        record = await service.bind("agent:1", "subagent", conv("t1"))
        assert service.get(record.binding_id) == record

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"target_session_key": " "}, "non-empty target session key"),
            ({"target_kind": "cli"}, "target kind must be"),
            ({"ttl_ms": 0}, "ttl_ms must be positive"),
        ],
    )
    async def test_bad_arguments(
        self, database: Database, clock: FakeClock, kwargs: dict, message: str
    ) -> None:
        """Bad bind arguments fail with a sentence naming the problem."""
        service = await service_on(database, clock)
        args = {"target_session_key": "s", "target_kind": "subagent", "conversation": conv("t")}
        with pytest.raises(BindingError, match=message):
            await service.bind(**(args | kwargs))

    async def test_lifecycle_defaults_and_ttl(self, database: Database, clock: FakeClock) -> None:
        """Idle and max age come from the defaults; a ttl replaces the max age."""
        service = await service_on(database, clock, windows=Windows(HOUR_MS, 0))
        plain = await service.bind("s1", "session", conv("t1"))
        with_ttl = await service.bind("s2", "session", conv("t2"), ttl_ms=60_000)
        assert (plain.idle_timeout_ms, plain.max_age_ms, plain.expires_at) == (HOUR_MS, 0, None)
        assert with_ttl.max_age_ms == 60_000
        assert with_ttl.expires_at == clock.now() + timedelta(minutes=1)


class TestConcurrentBinds:
    async def test_same_conversation_one_wins(self, database: Database, clock: FakeClock) -> None:
        """Two binds of one conversation at once: one record, one clear error."""
        service = await service_on(database, clock)
        results = await asyncio.gather(
            service.bind("agent:1", "subagent", conv("t1")),
            service.bind("agent:2", "subagent", conv("t1")),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, Exception)]
        assert len(errors) == 1
        assert isinstance(errors[0], ConversationAlreadyBound)
        assert "discord/main/t1 is already bound" in str(errors[0])
        assert len(await stored_rows(database)) == 1

    async def test_two_services_on_one_store(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        """Two processes: the store's unique index refuses the second live binding."""
        first = await service_on(await open_store(), clock)
        second = await service_on(await open_store(), clock)
        await first.bind("agent:1", "subagent", conv("t1"))
        with pytest.raises(ConversationAlreadyBound):
            await second.bind("agent:2", "subagent", conv("t1"))

    async def test_rebind_after_unbind(self, database: Database, clock: FakeClock) -> None:
        """An ended binding frees its conversation and stays in the store as history."""
        service = await service_on(database, clock)
        old = await service.bind("agent:1", "subagent", conv("t1"))
        await service.unbind(old.binding_id, reason="done")
        new = await service.bind("agent:2", "subagent", conv("t1"))
        rows = {r["binding_id"]: r for r in await stored_rows(database)}
        assert rows[old.binding_id]["status"] == "ended"
        assert rows[new.binding_id]["status"] == "active"


class TestUnbind:
    async def test_unbind_is_persisted(self, open_store: StoreFactory, clock: FakeClock) -> None:
        """An unbind is committed: a restarted service no longer sees the binding."""
        adapter = RecordingAdapter()
        service = await service_on(await open_store(), clock, adapter)
        record = await service.bind("agent:1", "subagent", conv("t1"))
        ended = await service.unbind(record.binding_id, reason="user-unfocus")
        assert [e.status for e in ended] == ["ended"]
        assert adapter.farewells == [(record.binding_id, "user-unfocus")]
        assert service.resolve_by_conversation(conv("t1")) is None

        restarted = await service_on(await open_store(), clock)
        assert restarted.list_by_session("agent:1") == ()
        row = (await stored_rows(restarted._db))[0]
        assert (row["status"], row["end_reason"]) == ("ended", "user-unfocus")
        assert row["ended_at"] is not None

    async def test_unbind_by_session_ends_all(self, database: Database, clock: FakeClock) -> None:
        """Unbinding by session key ends every binding of that session only."""
        service = await service_on(database, clock)
        await service.bind("agent:1", "subagent", conv("t1"))
        await service.bind("agent:1", "subagent", conv("t2"))
        other = await service.bind("agent:2", "subagent", conv("t3"))
        ended = await service.unbind(target_session_key="agent:1", reason="run-complete")
        assert len(ended) == 2
        assert service.list_by_session("agent:1") == ()
        assert service.list_by_session("agent:2") == (other,)

    async def test_unbind_nothing_live_is_empty(self, database: Database, clock: FakeClock) -> None:
        """A retried unbind ends nothing and raises nothing."""
        service = await service_on(database, clock)
        assert await service.unbind("missing", reason="x") == []
        assert await service.unbind(target_session_key="missing", reason="x") == []

    async def test_unbind_needs_target_and_reason(
        self, database: Database, clock: FakeClock
    ) -> None:
        """Unbind without a target or a reason is refused."""
        service = await service_on(database, clock)
        with pytest.raises(BindingError, match="binding_id or a target_session_key"):
            await service.unbind(reason="x")
        with pytest.raises(BindingError, match="needs a reason"):
            await service.unbind("b", reason="")


class TestTouch:
    async def test_touches_coalesce(self, database: Database, clock: FakeClock) -> None:
        """A thousand touches of two bindings are written as two row updates."""
        service = await service_on(database, clock)
        a = await service.bind("s1", "session", conv("t1"))
        b = await service.bind("s2", "session", conv("t2"))
        for _ in range(500):
            await clock.advance(1)
            assert service.touch(a.binding_id)
            assert service.touch(b.binding_id, at=clock.now())
        assert service.pending_touches == 2
        assert await service.flush_touches() == 2
        assert await service.flush_touches() == 0
        rows = {r["binding_id"]: r for r in await stored_rows(database)}
        assert rows[a.binding_id]["last_activity_at"] == clock.now()
        assert service.get(a.binding_id).last_activity_at == clock.now()

    async def test_touch_never_goes_back(self, database: Database, clock: FakeClock) -> None:
        """An older activity time does not overwrite a newer one."""
        service = await service_on(database, clock)
        a = await service.bind("s1", "session", conv("t1"))
        service.touch(a.binding_id, at=clock.now() + timedelta(minutes=5))
        service.touch(a.binding_id, at=clock.now() + timedelta(minutes=1))
        assert service.get(a.binding_id).last_activity_at == clock.now() + timedelta(minutes=5)

    async def test_touch_unknown_binding(self, database: Database, clock: FakeClock) -> None:
        """Touching a binding that is not live reports False and queues nothing."""
        service = await service_on(database, clock)
        assert service.touch("nope") is False
        assert service.pending_touches == 0

    async def test_clean_shutdown_flushes(self, open_store: StoreFactory, clock: FakeClock) -> None:
        """Touches queued before close() are in the store after a restart."""
        service = await service_on(await open_store(), clock)
        a = await service.bind("s1", "session", conv("t1"))
        await clock.advance(30)
        service.touch(a.binding_id)
        await service.close()
        restarted = await service_on(await open_store(), clock)
        assert restarted.get(a.binding_id).last_activity_at == clock.now()

    async def test_maintenance_task_flushes_on_its_clock(
        self, database: Database, clock: FakeClock
    ) -> None:
        """The maintenance loop writes touches each flush interval, driven by the fake clock."""
        service = await service_on(database, clock)
        a = await service.bind("s1", "session", conv("t1"))
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(run_maintenance(service, touch_flush_seconds=5, sweep_seconds=60))
            await clock.wait_for_sleepers()
            service.touch(a.binding_id, at=clock.now() + timedelta(seconds=1))
            assert service.pending_touches == 1
            await clock.advance(5)
            await clock.wait_for_sleepers()
            assert service.pending_touches == 0
            task.cancel()


class TestSetLifetime:
    async def test_windows_change_and_survive_restart(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        """New idle and max-age windows apply at once, recompute expires_at, and persist."""
        service = await service_on(await open_store(), clock)
        record = await service.bind("s1", "session", conv("t1"), max_age_ms=HOUR_MS)
        await clock.advance(60)
        updated = await service.set_lifetime(
            record.binding_id, idle_timeout_ms=2 * HOUR_MS, max_age_ms=3 * HOUR_MS
        )
        assert (updated.idle_timeout_ms, updated.max_age_ms) == (2 * HOUR_MS, 3 * HOUR_MS)
        assert updated.expires_at == record.bound_at + timedelta(hours=3)
        assert service.get(record.binding_id) == updated
        assert service.list_by_session("s1") == (updated,)
        await service.close()

        restarted = await service_on(await open_store(), clock)
        assert restarted.get(record.binding_id) == updated

    async def test_zero_max_age_means_never_and_none_keeps(
        self, database: Database, clock: FakeClock
    ) -> None:
        """max_age 0 clears the hard deadline; an omitted window keeps its value."""
        service = await service_on(database, clock, windows=Windows(HOUR_MS, HOUR_MS))
        record = await service.bind("s1", "session", conv("t1"))
        updated = await service.set_lifetime(record.binding_id, max_age_ms=0)
        assert (updated.idle_timeout_ms, updated.max_age_ms, updated.expires_at) == (
            HOUR_MS,
            0,
            None,
        )
        (row,) = await stored_rows(database)
        assert (row["idle_timeout_ms"], row["max_age_ms"], row["expires_at"]) == (HOUR_MS, 0, None)

    async def test_pending_touch_is_kept(self, database: Database, clock: FakeClock) -> None:
        """Changing windows does not lose activity queued by touch."""
        service = await service_on(database, clock)
        record = await service.bind("s1", "session", conv("t1"))
        await clock.advance(30)
        service.touch(record.binding_id)
        updated = await service.set_lifetime(record.binding_id, idle_timeout_ms=HOUR_MS)
        assert updated.last_activity_at == clock.now()
        assert service.pending_touches == 1

    async def test_refused_for_unknown_binding_or_negative_window(
        self, database: Database, clock: FakeClock
    ) -> None:
        """A binding that is not live, or a negative window, is an error and nothing changes."""
        service = await service_on(database, clock)
        record = await service.bind("s1", "session", conv("t1"))
        with pytest.raises(BindingError, match="not live"):
            await service.set_lifetime("nope", idle_timeout_ms=1)
        with pytest.raises(BindingError, match="idle_timeout_ms"):
            await service.set_lifetime(record.binding_id, idle_timeout_ms=-1)
        await service.unbind(record.binding_id, reason="done")
        with pytest.raises(BindingError, match="not live"):
            await service.set_lifetime(record.binding_id, max_age_ms=1)
        (row,) = await stored_rows(database)
        assert row["idle_timeout_ms"] == 0


async def test_maintenance_task_sweeps(database: Database, clock: FakeClock) -> None:
    """The maintenance loop ends an idle binding once a sweep interval has passed."""
    service = await service_on(database, clock)
    b = await service.bind("s1", "session", conv("t1"), idle_timeout_ms=30_000)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(run_maintenance(service, touch_flush_seconds=5, sweep_seconds=60))
        for _ in range(11):  # 55 s: past the idle timeout, before the first sweep
            await clock.wait_for_sleepers()
            await clock.advance(5)
        assert service.get(b.binding_id) is not None
        await clock.wait_for_sleepers()
        await clock.advance(5)  # 60 s: the sweep runs
        await clock.wait_for_sleepers()
        assert service.get(b.binding_id) is None
        task.cancel()


class TestSweeper:
    async def test_idle_expiry(self, database: Database, clock: FakeClock) -> None:
        """A binding idle past its timeout ends with reason idle-expired; an active one stays."""
        adapter = RecordingAdapter()
        service = await service_on(database, clock, adapter)
        idle = await service.bind("s1", "session", conv("t1"), idle_timeout_ms=HOUR_MS)
        busy = await service.bind("s2", "session", conv("t2"), idle_timeout_ms=HOUR_MS)
        await clock.advance(3000)
        service.touch(busy.binding_id)
        await clock.advance(700)  # idle: 3700 s without activity; busy: 700 s
        expired = await sweep(service)
        assert [(e.binding_id, e.status) for e in expired] == [(idle.binding_id, "ended")]
        assert adapter.farewells == [(idle.binding_id, "idle-expired")]
        assert service.get(busy.binding_id) is not None
        row = next(r for r in await stored_rows(database) if r["binding_id"] == idle.binding_id)
        assert row["end_reason"] == "idle-expired"

    async def test_max_age_expiry(self, database: Database, clock: FakeClock) -> None:
        """A binding past its max age ends with max-age-expired even if it is busy."""
        service = await service_on(database, clock)
        b = await service.bind("s1", "session", conv("t1"), max_age_ms=HOUR_MS)
        await clock.advance(3599)
        service.touch(b.binding_id)
        assert await sweep(service) == []
        await clock.advance(1)
        service.touch(b.binding_id)
        expired = await sweep(service)
        assert [e.binding_id for e in expired] == [b.binding_id]
        row = (await stored_rows(database))[0]
        assert row["end_reason"] == "max-age-expired"

    async def test_whichever_comes_first(self, database: Database, clock: FakeClock) -> None:
        """With both limits passed, the earlier deadline names the reason."""
        service = await service_on(database, clock)
        b = await service.bind(
            "s1", "session", conv("t1"), idle_timeout_ms=HOUR_MS, max_age_ms=2 * HOUR_MS
        )
        await clock.advance(3 * 3600)
        assert expiry_reason(service.get(b.binding_id), clock.now()) == "idle-expired"

    async def test_touch_during_sweep_keeps_binding(
        self, database: Database, clock: FakeClock
    ) -> None:
        """A touch that lands while the sweep is ending another binding saves this one."""
        adapter = RecordingAdapter()
        service = await service_on(database, clock, adapter)
        first = await service.bind("s1", "session", conv("t1"), idle_timeout_ms=HOUR_MS)
        second = await service.bind("s2", "session", conv("t2"), idle_timeout_ms=HOUR_MS)
        await clock.advance(2 * 3600)
        adapter.release_farewell = asyncio.Event()
        release = adapter.release_farewell
        sweeping = asyncio.create_task(sweep(service))
        await adapter.farewell_started.wait()  # the sweep is saying goodbye to `first`
        assert service.touch(second.binding_id)
        release.set()
        expired = await sweeping
        assert [e.binding_id for e in expired] == [first.binding_id]
        assert service.get(second.binding_id).status == "active"

    async def test_activity_in_store_keeps_binding(
        self, open_store: StoreFactory, clock: FakeClock
    ) -> None:
        """Activity written by another process is re-read before an idle unbind."""
        mine = await service_on(await open_store(), clock)
        theirs = await service_on(await open_store(), clock)
        b = await mine.bind("s1", "session", conv("t1"), idle_timeout_ms=HOUR_MS)
        await theirs.start()
        await clock.advance(2 * 3600)
        theirs.touch(b.binding_id)
        await theirs.flush_touches()
        assert await sweep(mine) == []
        assert mine.get(b.binding_id).last_activity_at == clock.now()

    async def test_no_limits_never_expire(self, database: Database, clock: FakeClock) -> None:
        """0 for idle and max age means the binding lives until unbound."""
        service = await service_on(database, clock)
        await service.bind("s1", "session", conv("t1"))
        await clock.advance(10 * 365 * 24 * 3600)
        assert await sweep(service) == []


async def test_history_kept(database: Database, clock: FakeClock) -> None:
    """Ended bindings stay in the store; only live ones are loaded into memory."""
    service = await service_on(database, clock)
    for i in range(3):
        b = await service.bind("s1", "session", conv(f"t{i}"))
        await service.unbind(b.binding_id, reason="done")
    count = await database.run(
        lambda conn: conn.execute(select(func.count()).select_from(BindingRow)).scalar()
    )
    assert count == 3
    assert await service.start() == 0


async def test_expiry_logged_only_when_ended(open_store: StoreFactory, clock: FakeClock) -> None:
    """binding.expired is logged for a binding that ended, never for one saved by activity."""
    from structlog.testing import capture_logs

    mine = await service_on(await open_store(), clock)
    theirs = await service_on(await open_store(), clock)
    saved = await mine.bind("s1", "session", conv("t1"), idle_timeout_ms=HOUR_MS)
    lost = await mine.bind("s2", "session", conv("t2"), idle_timeout_ms=HOUR_MS)
    await theirs.start()
    await clock.advance(2 * 3600)
    theirs.touch(saved.binding_id)
    await theirs.flush_touches()
    with capture_logs() as logs:
        await sweep(mine)
    expired = [e for e in logs if e["event"] == "binding.expired"]
    unbound = [e for e in logs if e["event"] == "binding.unbound"]
    assert [(e["binding_id"], e["reason"]) for e in expired] == [(lost.binding_id, "idle-expired")]
    assert unbound == []  # an expiry is reported as binding.expired alone


async def test_update_metadata_is_persisted(open_store: StoreFactory, clock: FakeClock) -> None:
    """Metadata changes merge into the record and survive a restart."""
    service = await service_on(await open_store(), clock)
    record = await service.bind("s1", "session", conv("t1"), metadata={"persona": {"name": "A"}})
    updated = await service.update_metadata(
        record.binding_id, BindingMetadata(default_mode="follow_up")
    )
    assert updated.metadata == {"persona": {"name": "A"}, "default_mode": "follow_up"}
    restarted = await service_on(await open_store(), clock)
    assert restarted.get(record.binding_id).metadata["default_mode"] == "follow_up"
    with pytest.raises(BindingError, match="is not live"):
        await restarted.update_metadata("missing", BindingMetadata(default_mode="steer"))


async def test_concurrent_metadata_updates_both_land(
    open_store: StoreFactory, clock: FakeClock
) -> None:
    """Two changes at once (a thread's mode and its status line) both stay, in memory and stored."""
    service = await service_on(await open_store(), clock)
    record = await service.bind("s1", "session", conv("t1"))
    await asyncio.gather(
        service.update_metadata(record.binding_id, BindingMetadata(default_mode="follow_up")),
        service.update_metadata(record.binding_id, BindingMetadata(status_message_id="42")),
    )
    assert service.get(record.binding_id).metadata == {
        "default_mode": "follow_up",
        "status_message_id": "42",
    }
    restarted = await service_on(await open_store(), clock)
    assert restarted.get(record.binding_id).metadata == service.get(record.binding_id).metadata


class TestMetadataWrites:
    async def test_a_change_is_typed_and_published_once_committed(
        self, database: Database, clock: FakeClock
    ) -> None:
        """Only the keys a change sets are written; BindingUpdated names them, after the
        commit (the record it carries is the one the indexes hold)."""
        stream: EventStream[object] = EventStream()
        told: list[tuple[dict, frozenset[str], dict | None]] = []
        service = await service_on(database, clock, publish=stream.publish)

        def seen(event: object) -> None:
            if isinstance(event, BindingUpdated):
                now = service.get(event.record.binding_id)
                told.append((event.record.metadata, event.changed, now and now.metadata))

        stream.subscribe(seen)
        record = await service.bind(
            "s1", "session", conv("t1"), metadata={"persona": {"name": "A"}}
        )
        persona = BindingPersona(name="B", avatar_url="https://example.org/b.png")
        await service.update_metadata(record.binding_id, BindingMetadata(persona=persona))
        expected = {"persona": {"name": "B", "avatar_url": "https://example.org/b.png"}}
        assert told == [(expected, frozenset({"persona"}), expected)]


class TestFocus:
    async def test_the_new_binding_speaks_under_the_sessions_persona_avatar_and_all(
        self, database: Database, clock: FakeClock
    ) -> None:
        """/focus binds the session under the persona its first binding has: its name and
        its avatar (the avatar was dropped before)."""
        service = await service_on(database, clock)
        persona = BindingPersona(name="Scout", avatar_url="https://example.org/s.png")
        await service.bind("s1", "session", conv("t1"), metadata=BindingMetadata(persona=persona))
        focus = Focus(service, database, _AnyoneMay()).focus
        focused = await focus(Found("s1"), conv("t2"), scope="g", by="u1", read_after="5")
        assert focused.meta.persona == persona
        assert focused.meta.read_after == "5"
        bare = await focus(Found("s2"), conv("t3"), scope="g", by="u1", read_after="6")
        assert bare.meta.persona.name == "Subagent"


class _AnyoneMay:
    """The owner rule, where the test is not about it."""

    async def may_change(self, session_key: str, user_id: str, /, *, admin: bool) -> bool:
        return True
