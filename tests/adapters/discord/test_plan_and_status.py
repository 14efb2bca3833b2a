"""The plan line and the status line when a turn ended other than by completing."""

from __future__ import annotations

from adapters.discord.presenter import plan_text, status_text
from core.sessions import SessionTree

PLAN = (("read the code", "completed"), ("write the fix", "in_progress"), ("test", "pending"))


def test_a_stopped_plan_shows_no_step_under_way() -> None:
    """Steps not done when a person cancelled show as stopped, and the line says by whom."""
    assert plan_text(PLAN, stopped="⏹️ cancelled by @alice") == (
        "📋 **Plan** (1/3 done; ⏹️ cancelled by @alice): ✅ read the code · ⏹️ write the fix · ⏹️ test"
    )


def test_a_moving_plan_is_unchanged() -> None:
    assert plan_text(PLAN) == (
        "📋 **Plan** (1/3 done): ✅ read the code · 🔄 write the fix · ⬜ test"
    )


def test_the_status_line_names_who_stopped_the_last_turn() -> None:
    snapshot = SessionTree("s").snapshot()
    text = status_text(snapshot, stopped="⛔ Rejected by @alice: Reject")
    assert text == "Status: ⛔ Rejected by @alice: Reject; send a message to carry on"
    assert status_text(snapshot).startswith("Status: ✅ idle")
