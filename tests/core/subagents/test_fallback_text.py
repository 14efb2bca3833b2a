"""What a fallback announcement says about a session's thread follows the binding's real state.

A session whose thread was locked or deleted under it loses its binding; the
announcement then lands in the requester's channel and must not claim that the
session "stays active in its thread".
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from core.bindings.records import SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.errors import DeliveryError
from core.providers.scripted import Step
from core.routing import DeliveryResolution
from core.store import Database
from core.subagents import Posted, render_completion
from tests.core.subagents.harness import RecordingSink, harness

STAYS = "stays active"


def session_fallback(*, session_bound: bool) -> str:
    return render_completion(
        name="Scout",
        outcome="completed",
        result="the answer",
        mode="session",
        bound=False,
        session_bound=session_bound,
    )


class TestRender:
    def test_a_session_still_bound_elsewhere_stays_active(self) -> None:
        """Fallback while the binding lives (another account asked): the thread is still there."""
        assert STAYS in session_fallback(session_bound=True)

    def test_a_session_whose_binding_ended_does_not_claim_its_thread(self) -> None:
        """Fallback after the binding ended: say so, and carry the result."""
        text = session_fallback(session_bound=False)
        assert STAYS not in text
        assert "binding has ended" in text
        assert text.endswith("the answer")

    def test_a_session_whose_binding_ended_is_given_no_cause(self) -> None:
        """The binding may have ended by /unfocus or expiry, its thread still there: the text
        must not say the thread is gone or unreachable."""
        text = session_fallback(session_bound=False).lower()
        assert not [word for word in ("reach", "deleted", "locked", "gone") if word in text]

    def test_the_bound_announcement_is_unchanged(self) -> None:
        text = render_completion(
            name="Scout", outcome="completed", result="x", mode="session", bound=True
        )
        assert text.splitlines() == [
            "✅ **Scout** completed its task.",
            "The session stays active: write in this thread to continue it.",
        ]


@pytest.mark.parametrize(
    ("reason", "bound"),
    [
        ("missing-target-session", False),
        ("no-active-binding", False),
        ("ambiguous-without-requester", True),
        ("invalid-requester", True),
        ("no-requester-match", True),
    ],
)
def test_a_fallback_knows_whether_the_session_is_still_bound(reason: str, bound: bool) -> None:
    """Only "no live binding at all" reasons mean the session has lost its thread."""
    assert DeliveryResolution(None, "fallback", reason).session_bound is bound  # type: ignore[arg-type]


@dataclass
class LockedThreadSink(RecordingSink):
    """The thread refuses the post and its binding ends, as the Discord sink does when locked."""

    bindings: SessionBindingService | None = None

    async def post_bound(self, binding: SessionBindingRecord, content: str) -> Posted:
        assert self.bindings is not None
        await self.bindings.unbind(binding.binding_id, reason="thread-archived")
        raise DeliveryError(f"thread {binding.conversation.conversation_id} is locked")


async def test_a_locked_session_thread_falls_back_without_claiming_it_stays_active(
    database: Database, clock: FakeClock
) -> None:
    """The bound post fails and ends the binding: the requester reads the result, and the truth."""
    sink = LockedThreadSink()
    h = await harness(database, clock, [Step(text="the answer")], sink=sink)
    sink.bindings = h.bindings
    try:
        spawned = await h.service.spawn(h.request(mode="session", thread=True))
        await h.settle()
        ((_where, content),) = h.sink.fallback
        assert STAYS not in content
        assert "binding has ended" in content
        assert content.endswith("the answer")
        assert h.bindings.list_by_session(spawned.record.session_key) == ()
    finally:
        await h.close()
