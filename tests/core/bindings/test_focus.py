"""Focus on every store: which session a name means, whether the person may, the binding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from core.bindings.focus import Focus, Found, NoSuchSession, NotOwner
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.sessions.log import SessionLog
from core.store import Database
from tests.fixtures.bindings import conv
from tests.fixtures.statements import statements


@dataclass
class Owned:
    """The owner rule as a table: the sessions each user owns (the rule is Owners' own)."""

    owns: dict[str, set[str]] = field(default_factory=dict)
    asked: list[tuple[str, str, bool]] = field(default_factory=list)

    async def may_change(self, session_key: str, user_id: str, /, *, admin: bool) -> bool:
        self.asked.append((session_key, user_id, admin))
        return admin or session_key in self.owns.get(user_id, set())


@dataclass
class World:
    bindings: SessionBindingService
    log: SessionLog
    owners: Owned
    focus: Focus


@pytest.fixture
async def world(database: Database, clock: FakeClock) -> AsyncIterator[World]:
    bindings = SessionBindingService(database, clock=clock)
    await bindings.start()
    log = SessionLog(database, clock=clock)
    owners = Owned({"u1": {"s1", "s2"}})
    yield World(bindings, log, owners, Focus(bindings, database, owners))
    await log.close()
    await bindings.close()


async def logged(world: World, key: str) -> None:
    """A session with a log (one event)."""
    tree = await world.log.load(key)
    await world.log.append(tree, "user_message", {"text": "hi"}, delivery_mode="normal")


class TestFind:
    async def test_a_session_key_with_a_log(self, world: World, database: Database) -> None:
        """A key is a session once it has a log; found by one point query, not a listing."""
        await logged(world, "s1")
        with statements(database) as sent:
            found = await world.focus.find(" s1 ", account_id="main", user_id="u1", admin=False)
        assert found == Found("s1")
        (query,) = sent
        assert " WHERE " in query  # asked of that key alone: no listing of every session

    async def test_a_persona_name_of_one_live_binding(self, world: World) -> None:
        """A persona is matched whatever its case, on this account only."""
        await world.bindings.bind("s2", "session", conv("t1"), {"persona": {"name": "Scout"}})
        found = await world.focus.find("scout", account_id="main", user_id="u1", admin=False)
        assert found == Found("s2")
        elsewhere = await world.focus.find("scout", account_id="b", user_id="u1", admin=False)
        assert elsewhere == NoSuchSession()

    async def test_a_name_two_sessions_speak_under_means_none(self, world: World) -> None:
        """Ambiguous: neither is guessed."""
        for key, thread in (("s1", "t1"), ("s2", "t2")):
            await world.bindings.bind(key, "session", conv(thread), {"persona": {"name": "Scout"}})
        assert (
            await world.focus.find("Scout", account_id="main", user_id="u1", admin=False)
            == NoSuchSession()
        )

    async def test_an_unknown_name(self, world: World) -> None:
        """Neither a session with a log nor a persona: none, and nobody's right is asked."""
        found = await world.focus.find("s9", account_id="main", user_id="u1", admin=False)
        assert found == NoSuchSession()
        assert world.owners.asked == []

    async def test_a_session_that_is_not_theirs(self, world: World) -> None:
        """Found, but the person is no owner; an administrator may."""
        await logged(world, "s3")
        assert (
            await world.focus.find("s3", account_id="main", user_id="u1", admin=False) == NotOwner()
        )
        assert await world.focus.find("s3", account_id="main", user_id="u1", admin=True) == Found(
            "s3"
        )


class TestFocus:
    async def test_bound_under_the_persona_the_session_has(self, world: World) -> None:
        """The new binding speaks as the session's first binding does, reading from the focus."""
        await world.bindings.bind("s1", "session", conv("t1"), {"persona": {"name": "Scout"}})
        record = await world.focus.focus(
            Found("s1"), conv("t2", "c1"), scope="g1", by="u1", read_after="77"
        )
        assert (record.target_session_key, record.bound_by, record.scope) == ("s1", "u1", "g1")
        assert record.meta.persona.name == "Scout"
        assert record.metadata["read_after"] == "77"
