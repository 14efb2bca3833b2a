"""Handoffs between the agents of a session, and who may be activated.

- :mod:`~core.handoffs.activation`: :class:`HandoffRecord` and the pure
  activation rule :func:`may_activate`.
- :mod:`~core.handoffs.service`: :class:`HandoffService`, the legal
  transitions, each one a ``handoff.<status>`` session event (the history)
  and a ``handoffs`` table row (the current state).
"""

from __future__ import annotations

from core.errors import HandoffError
from core.handoffs.activation import TRANSITIONS, HandoffRecord, HandoffStatus, may_activate
from core.handoffs.service import EVENT_TYPES, HandoffEventPayload, HandoffService, replay

__all__ = [
    "EVENT_TYPES",
    "TRANSITIONS",
    "HandoffError",
    "HandoffEventPayload",
    "HandoffRecord",
    "HandoffService",
    "HandoffStatus",
    "may_activate",
    "replay",
]
