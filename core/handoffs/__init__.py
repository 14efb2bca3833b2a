"""Handoffs between the agents of a session, and who may be activated.

- :mod:`~core.handoffs.activation`: :class:`HandoffRecord` and the pure
  activation rule :func:`may_activate`.
- :mod:`~core.handoffs.service`: :class:`HandoffService`, the legal
  transitions, each one a ``handoff.<status>`` session event (the history)
  and a ``handoffs`` table row (the current state).
- :mod:`~core.handoffs.attempts`: a brief asked for (``brief.requested``) and
  how its consolidation turn ended, read from the log.
- :mod:`~core.handoffs.prompts`: :class:`BriefPrompts`, when the "produce the
  brief" button is due in a conversation.
- :mod:`~core.handoffs.accept`: :class:`~core.handoffs.accept.Handoffs`, the use
  case behind Accept and Reject (who speaks where once a handoff is decided).
"""

from __future__ import annotations

from core.errors import HandoffError
from core.handoffs.activation import TRANSITIONS, HandoffRecord, HandoffStatus, may_activate
from core.handoffs.attempts import BRIEF_REQUESTED, BriefAttempt, attempts
from core.handoffs.prompts import BriefPrompts, DueBrief, brief_due
from core.handoffs.service import EVENT_TYPES, HandoffEventPayload, HandoffService, replay

__all__ = [
    "BRIEF_REQUESTED",
    "EVENT_TYPES",
    "TRANSITIONS",
    "BriefAttempt",
    "BriefPrompts",
    "DueBrief",
    "HandoffError",
    "HandoffEventPayload",
    "HandoffRecord",
    "HandoffService",
    "HandoffStatus",
    "attempts",
    "brief_due",
    "may_activate",
    "replay",
]
