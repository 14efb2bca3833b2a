"""Reading a brief's attempts from the log: only a consolidation turn that ended normally."""

from __future__ import annotations

import pytest

from core.clock import FakeClock
from core.handoffs.attempts import BRIEF_REQUESTED, attempt_after, attempts
from core.sessions.log import SessionLog
from core.sessions.payloads import TurnCancelledPayload, event_kind
from core.store import Database
from tests.core.handoffs.sessions import Ending, Written

KEY = "agent:main:brief"
PARTIAL = "## Lisbon"


@pytest.fixture
async def written(db: Database) -> Written:
    log = SessionLog(db, clock=FakeClock())
    return Written(log, await log.load(KEY))


def test_the_request_is_a_system_event() -> None:
    """brief.requested is registered, as a system event (it moves no head)."""
    assert event_kind(BRIEF_REQUESTED) == "system"


class TestBriefAttempt:
    async def test_a_turn_that_ended_normally_is_the_brief(self, written: Written) -> None:
        """The first turn after the request is its consolidation turn; its answer is kept."""
        await written.turn("plan a trip", "Lisbon looks best.")
        request = await written.requested()
        end = await written.turn("Write the brief", "## Lisbon trip\nThree days.")
        attempt = attempt_after(written.tree.events, request.seq)
        assert attempt.completed
        assert attempt.end == end
        assert attempt.answer == "## Lisbon trip\nThree days."
        assert (attempt.agent, attempt.state) == ("scout", "failed")  # no offer yet
        await written.handoff("offered", "h1")
        assert attempt_after(written.tree.events, request.seq).state == "written"

    @pytest.mark.parametrize(
        ("ending", "words"),
        [
            ("cancelled", "was cancelled"),
            ("interrupted", "was cut off by a bot restart"),
            ("error", "failed (the model is away)"),
            ("max_steps", "was stopped after 1 steps"),
            ("budget", "was stopped: the session's budget is used up"),
            ("rejected", "was stopped: rejected by @alice: Reject"),
        ],
    )
    async def test_a_turn_that_did_not_end_normally_is_no_brief(
        self, written: Written, ending: Ending, words: str
    ) -> None:
        """Whatever the agent had said, a cut-off, cancelled or failed turn is not completed."""
        request = await written.requested()
        end = await written.turn("Write the brief", PARTIAL, ending=ending)
        attempt = attempt_after(written.tree.events, request.seq)
        assert attempt.answer == PARTIAL
        assert not attempt.completed
        assert (attempt.state, attempt.settled_seq) == ("failed", end.seq if end else 0)
        assert attempt.ending() == words

    async def test_a_turn_still_running_is_being_written(self, written: Written) -> None:
        """No end yet (a running turn, or one a killed process left): writing, not complete."""
        request = await written.requested()
        await written.turn("Write the brief", PARTIAL, ending="open")
        attempt = attempt_after(written.tree.events, request.seq)
        assert (attempt.state, attempt.completed) == ("writing", False)
        assert attempt.ending() == "was stopped before it ended"

    async def test_a_later_request_replaces_one_that_never_started(self, written: Written) -> None:
        """A request whose message never went out is over once the next one is made."""
        first = await written.requested()
        second = await written.requested()
        await written.turn("Write the brief", "## Lisbon")
        old, new = attempts(written.tree.events)
        assert (old.request, old.state, old.turn_id) == (first, "failed", None)
        assert (new.request, new.completed) == (second, True)

    async def test_only_the_consolidation_turns_words_count(self, written: Written) -> None:
        """Words said before the request, or in a later turn, are never the brief's."""
        await written.turn("plan a trip", "Lisbon looks best.")
        request = await written.requested()
        await written.turn("Write the brief", "", ending="cancelled")
        await written.turn("what about Porto?", "Porto is close too.")
        attempt = attempt_after(written.tree.events, request.seq)
        assert (attempt.answer, attempt.completed) == ("", False)

    async def test_a_stop_before_its_turn_started_ends_it(self, written: Written) -> None:
        """Cancelled before the consolidation turn had started: over, and no later turn
        (the person's next one) is taken for it."""
        request = await written.requested()
        stopped = await written.log.append(written.tree, TurnCancelledPayload(turn_id=None))
        await written.turn("what about Porto?", "Porto is close too.")
        attempt = attempt_after(written.tree.events, request.seq)
        assert (attempt.end, attempt.turn_id, attempt.state) == (stopped, None, "failed")
        assert attempt.answer == ""
