"""The activation rule as a table of cases: user-startable by the session's handoffs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from core.handoffs import HandoffRecord, HandoffStatus, may_activate

AT = datetime(2026, 1, 1, tzinfo=UTC)


def handoff(status: HandoffStatus, to_agent: str = "writer") -> HandoffRecord:
    return HandoffRecord(
        id=f"h-{status}-{to_agent}",
        session_key="agent:main:s1",
        from_agent="planner",
        to_agent=to_agent,
        artifact_id="brief-1",
        status=status,
        created_at=AT,
        updated_at=AT,
    )


HANDOFFS: dict[str, list[HandoffRecord]] = {
    "no handoff": [],
    "offered": [handoff("offered")],
    "accepted": [handoff("accepted")],
    "rejected": [handoff("rejected")],
    "completed": [handoff("completed")],
    "accepted for another agent": [handoff("accepted", to_agent="reviewer")],
}

# (user_startable, handoffs) -> may "writer" be activated?
CASES = [
    (True, "no handoff", True),
    (True, "offered", True),
    (True, "accepted", True),
    (True, "rejected", True),
    (True, "completed", True),
    (True, "accepted for another agent", True),
    (False, "no handoff", False),
    (False, "offered", False),
    (False, "accepted", True),
    (False, "rejected", False),
    (False, "completed", False),
    (False, "accepted for another agent", False),
]


@pytest.mark.parametrize(
    ("user_startable", "situation", "expected"),
    CASES,
    ids=[f"{'startable' if s else 'not-startable'}-{h.replace(' ', '-')}" for s, h, _ in CASES],
)
def test_activation_rule(user_startable: bool, situation: str, expected: bool) -> None:
    """Only an accepted handoff to the agent, or being user-startable, allows activation."""
    allowed = may_activate(
        "writer", user_startable=user_startable, handoffs=iter(HANDOFFS[situation])
    )
    assert allowed is expected


def test_one_accepted_among_others_is_enough() -> None:
    """Other handoffs in the session do not hide the accepted one."""
    handoffs = [handoff("completed"), handoff("rejected"), handoff("accepted")]
    assert may_activate("writer", user_startable=False, handoffs=handoffs) is True


def test_record_is_frozen_and_checks_status() -> None:
    """A record cannot be changed in place, and only known statuses exist."""
    record = handoff("offered")
    with pytest.raises(ValidationError, match="frozen"):
        record.status = "accepted"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="status"):
        handoff("pending")  # type: ignore[arg-type]
