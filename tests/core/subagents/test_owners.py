"""Owners on every store: who may change a session."""

from __future__ import annotations

from core.subagents.owners import Owners
from tests.core.subagents.harness import Harness
from tests.fixtures.bindings import conv


class TestMayChange:
    async def test_who_started_the_subagent_may(self, h: Harness) -> None:
        """The spawn's requester owns it, after its thread is let go too; others do not."""
        spawned = await h.service.spawn(h.request(requested_by="u1"))
        await h.settle()
        owners = Owners(h.bindings, h.service)
        key = spawned.record.session_key
        assert await owners.may_change(key, "u1", admin=False)
        assert not await owners.may_change(key, "u2", admin=False)

    async def test_who_bound_a_live_conversation_may(self, h: Harness) -> None:
        """A session that is no subagent belongs to whoever bound one of its conversations."""
        await h.bindings.bind("agent:main:plain", "session", conv("200"), bound_by="u3")
        owners = Owners(h.bindings, h.service)
        assert await owners.may_change("agent:main:plain", "u3", admin=False)
        assert not await owners.may_change("agent:main:plain", "u1", admin=False)

    async def test_an_administrator_may_change_any_session(self, h: Harness) -> None:
        """Even a session with no owner at all."""
        owners = Owners(h.bindings, h.service)
        assert await owners.may_change("agent:main:nobody", "u9", admin=True)
        assert not await owners.may_change("agent:main:nobody", "u9", admin=False)
