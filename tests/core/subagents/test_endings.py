"""A task a person stopped is named for what happened: its outcome, and its announcement.

A person's ``/cancel`` and a person's choice of an external agent's reject option are
outcomes of their own (``cancelled``, ``rejected``) that name the person, never a
failure; a cancel of the bot's own (the task's time ran out) names nobody.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.sessions import SessionTree
from core.subagents import render_completion
from core.subagents.outcome import task_outcome
from tests.fixtures.sessions import build, build_user


def ended_with(event_type: str, **payload: Any) -> SessionTree:
    """A session whose one turn ended with ``event_type``."""
    tree = SessionTree("subagent:x")
    build(tree, "turn_started", {"turn_id": "t1", "trigger": "normal"})
    build_user(tree, "do the thing")
    build(tree, event_type, {"turn_id": "t1", **payload})
    return tree


class TestTaskOutcome:
    def test_a_persons_cancel_is_cancelled_by_them(self) -> None:
        tree = ended_with("turn_cancelled", by_user_id="42", by_name="alice")
        assert task_outcome(tree) == ("cancelled", "Cancelled by @alice", "t1")

    def test_a_persons_reject_is_rejected_by_them_with_the_option(self) -> None:
        tree = ended_with(
            "turn_ended",
            reason="rejected",
            steps=1,
            by_user_id="42",
            by_name="alice",
            option="No, and tell Codex what to do",
        )
        assert task_outcome(tree) == (
            "rejected",
            "Rejected by @alice: No, and tell Codex what to do",
            "t1",
        )

    def test_the_bots_own_timeout_cancel_names_nobody(self) -> None:
        tree = ended_with("turn_cancelled", reason="timed_out")
        outcome, reason, _ = task_outcome(tree)
        assert (outcome, reason) == ("timed_out", "no result in time")

    def test_a_cancel_at_a_stop_is_the_bots(self) -> None:
        tree = ended_with("turn_cancelled", reason="stopping")
        outcome, reason, _ = task_outcome(tree)
        assert outcome == "failed"
        assert reason == "the bot stopped during the task"

    def test_an_older_log_cancel_still_loads_and_is_no_failure(self) -> None:
        """Logs written before cancels named anyone: a cancel, not a failure."""
        tree = ended_with("turn_cancelled", dropped_item_ids=[])
        assert task_outcome(tree)[:2] == ("cancelled", "Cancelled")

    def test_an_external_agents_own_stop_is_still_a_failure(self) -> None:
        tree = ended_with(
            "turn_ended", reason="error", steps=1, error="the external agent stopped the turn"
        )
        assert task_outcome(tree)[0] == "failed"


class TestAnnouncement:
    @pytest.mark.parametrize(
        ("outcome", "reason", "header"),
        [
            ("cancelled", "Cancelled by @alice", "⏹️ **Scout** stopped. Cancelled by @alice"),
            (
                "rejected",
                "Rejected by @alice: Reject",
                "⛔ **Scout** stopped. Rejected by @alice: Reject",
            ),
        ],
    )
    def test_a_persons_stop_names_them_and_is_no_failure(
        self, outcome: Any, reason: str, header: str
    ) -> None:
        text = render_completion(
            name="Scout", outcome=outcome, result="", mode="run", bound=True, reason=reason
        )
        assert text == header
        assert "failed" not in text
        assert "Reason:" not in text

    def test_a_cancelled_session_stays_active(self) -> None:
        """A session-mode subagent a person cancelled carries on with the next message."""
        text = render_completion(
            name="Scout",
            outcome="cancelled",
            result="",
            mode="session",
            bound=True,
            reason="Cancelled by @alice",
        )
        assert text.splitlines()[1] == (
            "The session stays active: write in this thread to continue it."
        )

    def test_a_failure_still_reads_failed(self) -> None:
        text = render_completion(
            name="Scout", outcome="failed", result="", mode="run", bound=True, reason="boom"
        )
        assert text == "❌ **Scout** failed. Reason: boom"
