"""Who may be activated in a session: the activation rule, pure and separately tested.

An agent may be activated in a session only if an *accepted* handoff targets
it, or if it is an agent users may start directly. An offered handoff has not
been agreed to yet, a rejected one was refused, and a completed one has done
its work: none of those activates its target.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

__all__ = ["TRANSITIONS", "HandoffRecord", "HandoffStatus", "may_activate"]

HandoffStatus = Literal["offered", "accepted", "completed", "rejected"]
"""Where a handoff stands; see :data:`TRANSITIONS` for how it moves."""

TRANSITIONS: Final[dict[HandoffStatus, tuple[HandoffStatus, ...]]] = {
    "offered": ("accepted", "rejected"),
    "accepted": ("completed",),
    "completed": (),
    "rejected": (),
}
"""The legal transitions: each status and the statuses it may move to."""


class HandoffRecord(BaseModel):
    """The current state of one handoff from one agent of a session to another.

    ``artifact_id`` names the artifact handed over (the target agent's input),
    if there is one. ``created_at`` is when it was offered, ``updated_at`` when
    its status last changed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    session_key: str
    from_agent: str
    to_agent: str
    artifact_id: str | None
    status: HandoffStatus
    created_at: AwareDatetime
    updated_at: AwareDatetime

    def moved(self, status: HandoffStatus, at: datetime) -> HandoffRecord:
        """This handoff with another status, changed at ``at``."""
        return self.model_copy(update={"status": status, "updated_at": at})


def may_activate(agent: str, *, user_startable: bool, handoffs: Iterable[HandoffRecord]) -> bool:
    """True when ``agent`` may be activated in the session whose ``handoffs`` these are.

    Args:
        agent: the agent to activate.
        user_startable: whether users may start this agent directly.
        handoffs: the session's handoffs (any order, any status).
    """
    if user_startable:
        return True
    return any(h.to_agent == agent and h.status == "accepted" for h in handoffs)
