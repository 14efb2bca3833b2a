"""core.inbox.shown: the marks and replies an outcome shows its author, on every channel."""

from __future__ import annotations

from core.attachments import Refused
from core.inbox import Outcome
from core.inbox.shown import FAILED_MARK, MODE_MARKS, mark_of, replies_of


class TestMarks:
    def test_each_outcome_has_its_mark(self) -> None:
        """Started, steered, queued, busy and failed show apart; the rest show nothing."""
        assert mark_of(Outcome("delivered", mode="steer", started=True)) == MODE_MARKS["started"]
        assert mark_of(Outcome("delivered", mode="steer")) == "🧭"
        assert mark_of(Outcome("delivered", mode="follow_up")) == "📥"
        assert mark_of(Outcome("busy")) == "📥"
        assert mark_of(Outcome("failed", reason="x")) == FAILED_MARK
        assert mark_of(Outcome("duplicate")) is None
        assert mark_of(Outcome("held")) is None


class TestReplies:
    def test_a_failure_is_told_once_naming_whom_it_was_for(self) -> None:
        """Only the failure marked ``tell`` gets a reply, naming the persona and the reason."""
        (told,) = replies_of(Outcome("failed", reason="the model is away", tell=True), "Scout")
        assert "**Scout**: the model is away" in told
        assert replies_of(Outcome("failed", reason="the model is away"), "Scout") == []

    def test_refused_files_are_listed_when_the_words_went_through(self) -> None:
        """A delivered message with a refused file gets one reply about the file."""
        refused = (Refused("big.bin", "it is larger than the limit"),)
        (reply,) = replies_of(Outcome("delivered", mode="steer", refused=refused), "Scout")
        assert "big.bin" in reply
