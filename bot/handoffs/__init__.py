"""Handoffs in Discord: the brief button, Accept / Reject, and what a press does.

:mod:`bot.handoffs.ui` holds what the buttons share (custom ids, labels, the
ephemeral answer), :mod:`bot.handoffs.brief` the "Ready — produce the brief"
button and its consolidation turn, :mod:`bot.handoffs.views` the persistent
buttons registered with the client.
"""

from __future__ import annotations

from bot.handoffs.brief import offer_missed_briefs, watch_turns
from bot.handoffs.views import setup_handoffs, subagent_finished

__all__ = ["offer_missed_briefs", "setup_handoffs", "subagent_finished", "watch_turns"]
