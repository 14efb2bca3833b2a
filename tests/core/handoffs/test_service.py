"""HandoffService on every store: legal transitions only, one event each, a rebuildable table."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from core.clock import FakeClock
from core.errors import HandoffError, SessionError, StoreError
from core.handoffs import EVENT_TYPES, HandoffService, repository
from core.sessions import SessionLog, SessionTree
from core.sessions.payloads import event_kind
from core.store import Database
from tests.fixtures.stores import StoreFactory

KEY = "agent:main:s1"


@pytest.fixture
def service(database: Database, log: SessionLog, clock: FakeClock) -> HandoffService:
    return HandoffService(database, log, clock=clock)


@pytest.fixture
async def tree(log: SessionLog) -> SessionTree:
    return await log.load(KEY)


def handoff_events(tree: SessionTree) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.payload) for e in tree.events if e.type.startswith("handoff.")]


async def offer(service: HandoffService, tree: SessionTree, to_agent: str = "writer") -> str:
    record = await service.offer(
        tree, from_agent="planner", to_agent=to_agent, artifact_id="brief-1", actor="user:1"
    )
    return record.id


def test_event_types_are_registered_as_system() -> None:
    """Each status has its own system event type."""
    assert {s: event_kind(t) for s, t in EVENT_TYPES.items()} == {
        "offered": "system",
        "accepted": "system",
        "completed": "system",
        "rejected": "system",
    }


class TestLegalTransitions:
    async def test_offer_accept_complete(
        self, service: HandoffService, tree: SessionTree, clock: FakeClock
    ) -> None:
        """offered -> accepted -> completed; each step is a row and its timestamps."""
        offered = await service.offer(
            tree, from_agent="planner", to_agent="writer", artifact_id="brief-1", actor="user:1"
        )
        assert (offered.status, offered.session_key, offered.artifact_id) == (
            "offered",
            KEY,
            "brief-1",
        )
        assert offered.created_at == offered.updated_at == clock.now()
        await clock.advance(60)
        accepted = await service.accept(tree, offered.id, actor="user:1")
        assert (accepted.status, accepted.created_at) == ("accepted", offered.created_at)
        assert accepted.updated_at == clock.now() != offered.created_at
        completed = await service.complete(tree, offered.id, actor="agent:writer")
        assert completed.status == "completed"
        assert await service.list(KEY) == [completed]

    async def test_offer_reject(self, service: HandoffService, tree: SessionTree) -> None:
        """offered -> rejected; an offer without an artifact keeps None."""
        offered = await service.offer(tree, from_agent="planner", to_agent="writer", actor="u")
        rejected = await service.reject(tree, offered.id, actor="u")
        assert (rejected.status, rejected.artifact_id) == ("rejected", None)
        assert await service.list(KEY) == [rejected]

    async def test_sessions_are_separate(self, service: HandoffService, log: SessionLog) -> None:
        """list() shows one session's handoffs only; ids of another session are unknown."""
        one, two = await log.load("s:one"), await log.load("s:two")
        first = await offer(service, one)
        await offer(service, two, to_agent="reviewer")
        assert [r.id for r in await service.list("s:one")] == [first]
        with pytest.raises(HandoffError, match="does not exist"):
            await service.accept(two, first, actor="u")


ILLEGAL = [
    (["reject"], "accept", "rejected", "accepted"),
    (["reject"], "complete", "rejected", "completed"),
    (["reject"], "reject", "rejected", "rejected"),
    ([], "complete", "offered", "completed"),
    (["accept"], "accept", "accepted", "accepted"),
    (["accept"], "reject", "accepted", "rejected"),
    (["accept", "complete"], "complete", "completed", "completed"),
    (["accept", "complete"], "reject", "completed", "rejected"),
    (["accept", "complete"], "accept", "completed", "accepted"),
]


class TestIllegalTransitions:
    @pytest.mark.parametrize(("before", "attempt", "from_status", "to_status"), ILLEGAL)
    async def test_refused_with_both_statuses(
        self,
        service: HandoffService,
        tree: SessionTree,
        before: list[str],
        attempt: str,
        from_status: str,
        to_status: str,
    ) -> None:
        """An illegal transition raises HandoffError naming both statuses; nothing is written."""
        handoff_id = await offer(service, tree)
        for step in before:
            await getattr(service, step)(tree, handoff_id, actor="u")
        events, rows = len(tree.events), await service.list(KEY)
        with pytest.raises(HandoffError) as err:
            await getattr(service, attempt)(tree, handoff_id, actor="u")
        assert (err.value.from_status, err.value.to_status) == (from_status, to_status)
        assert f"is {from_status} and cannot become {to_status}" in str(err.value)
        assert len(tree.events) == events
        assert await service.list(KEY) == rows

    async def test_unknown_handoff(self, service: HandoffService, tree: SessionTree) -> None:
        """A handoff id the session never saw is refused and appends nothing."""
        with pytest.raises(HandoffError, match="'nope' does not exist") as err:
            await service.accept(tree, "nope", actor="u")
        assert err.value.from_status is None
        assert tree.events == ()

    async def test_bad_offer_fields(self, service: HandoffService, tree: SessionTree) -> None:
        """An empty agent name fails validation before anything is appended."""
        with pytest.raises(SessionError, match="to_agent"):
            await service.offer(tree, from_agent="planner", to_agent="", actor="u")
        assert tree.events == ()


class TestEvents:
    async def test_each_transition_appends_exactly_one_event(
        self, service: HandoffService, tree: SessionTree
    ) -> None:
        """One handoff.<status> event per transition, with the full payload."""
        handoff_id = await offer(service, tree)
        assert len(tree.events) == 1
        await service.accept(tree, handoff_id, actor="user:2")
        assert len(tree.events) == 2
        await service.complete(tree, handoff_id, actor="agent:writer")
        assert len(tree.events) == 3
        base = {"handoff_id": handoff_id, "from_agent": "planner", "to_agent": "writer"}
        assert handoff_events(tree) == [
            ("handoff.offered", {**base, "artifact_id": "brief-1", "actor": "user:1"}),
            ("handoff.accepted", {**base, "artifact_id": "brief-1", "actor": "user:2"}),
            ("handoff.completed", {**base, "artifact_id": "brief-1", "actor": "agent:writer"}),
        ]
        assert all(e.kind == "system" for e in tree.events)

    async def test_reject_appends_one_event(
        self, service: HandoffService, tree: SessionTree
    ) -> None:
        handoff_id = await offer(service, tree)
        await service.reject(tree, handoff_id, actor="user:1")
        assert [t for t, _ in handoff_events(tree)] == ["handoff.offered", "handoff.rejected"]


class TestRebuild:
    async def test_rebuilt_table_equals_the_table(
        self, service: HandoffService, tree: SessionTree, clock: FakeClock
    ) -> None:
        """Rows rebuilt from the events are the rows the transitions wrote."""
        ids = []
        for agent in ("writer", "reviewer", "editor", "critic"):
            ids.append(await offer(service, tree, to_agent=agent))
            await clock.advance(1)
        await service.accept(tree, ids[0], actor="u")
        await service.reject(tree, ids[1], actor="u")
        await service.accept(tree, ids[2], actor="u")
        await clock.advance(5)
        await service.complete(tree, ids[2], actor="u")
        table = await service.list(KEY)
        assert [r.status for r in table] == ["accepted", "rejected", "completed", "offered"]
        rebuilt = await service.rebuild_from_events(tree)
        assert rebuilt == table
        assert await service.list(KEY) == table

    async def test_rebuild_repairs_a_failed_table_write(
        self,
        service: HandoffService,
        tree: SessionTree,
        log: SessionLog,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The event is the commit point: a failed row write is repaired from the log."""
        handoff_id = await offer(service, tree)

        def broken(*_: object) -> None:
            raise OperationalError("UPDATE handoffs", {}, Exception("disk full"))

        with monkeypatch.context() as patch:
            patch.setattr(repository, "upsert", broken)
            with pytest.raises(StoreError, match="rebuild_from_events repairs it"):
                await service.accept(tree, handoff_id, actor="u")
        assert [r.status for r in await service.list(KEY)] == ["offered"]
        assert handoff_events(tree)[-1][0] == "handoff.accepted"

        reloaded = await log.load(KEY)
        repaired = await service.rebuild_from_events(reloaded)
        assert [r.status for r in repaired] == ["accepted"]
        assert await service.list(KEY) == repaired
        await service.complete(reloaded, handoff_id, actor="u")  # the log said accepted

    async def test_rebuild_of_a_session_without_handoffs_clears_it(
        self, service: HandoffService, tree: SessionTree, log: SessionLog
    ) -> None:
        """A session with no handoff events ends with no rows."""
        await offer(service, await log.load("other"))
        assert await service.rebuild_from_events(tree) == []
        assert await service.list(KEY) == []
        assert len(await service.list("other")) == 1


async def test_persistence_across_reopening(open_store: StoreFactory, clock: FakeClock) -> None:
    """After a restart the table and the log agree and transitions continue from the log."""
    database = await open_store()
    log = SessionLog(database, clock=clock)
    service = HandoffService(database, log, clock=clock)
    tree = await log.load(KEY)
    first = await offer(service, tree)
    await clock.advance(1)
    second = await offer(service, tree, to_agent="reviewer")
    await service.accept(tree, first, actor="u")
    before = await service.list(KEY)
    await log.close()

    reopened = await open_store()
    log2 = SessionLog(reopened, clock=clock)
    service2 = HandoffService(reopened, log2)
    tree2 = await log2.load(KEY)
    assert await service2.list(KEY) == before
    assert handoff_events(tree2) == handoff_events(tree)
    with pytest.raises(HandoffError, match="is accepted and cannot become accepted"):
        await service2.accept(tree2, first, actor="u")
    await service2.complete(tree2, first, actor="u")
    await service2.reject(tree2, second, actor="u")
    assert [r.status for r in await service2.list(KEY)] == ["completed", "rejected"]
    assert await service2.rebuild_from_events(tree2) == await service2.list(KEY)
    await log2.close()
