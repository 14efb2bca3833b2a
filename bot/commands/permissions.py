"""Who may change a session: one of its owners, or a server administrator.

Every command that changes a session (``/cancel``, ``/steer``, ``/followup``,
``/rewind``, ``/bookmark``, ``/focus``, ``/unfocus``, ``/session ...``, and the
handoff buttons) asks
:func:`may_change`, so the rule lives in one place. Reading stays open: a bound
thread is a conversation, and whoever is in it sees it anyway.

The owners of a session, from what the store keeps:

* who started it: the subagent record's ``requested_by`` (a user's
  ``/agents spawn``; a child spawned by a model inherits its parent's), kept
  after every thread of the session is let go, so the owner can ``/focus`` it
  again;
* who bound one of its live threads: a binding's ``bound_by``. Only an owner
  or an administrator may bind (``/focus`` asks :func:`may_change` too), so
  this does not hand a session to anyone new; it covers sessions that are not
  subagents.

A session with neither is for administrators only.
"""

from __future__ import annotations

from typing import Final

import discord

from bot.wiring import Services

__all__ = ["NOT_OWNER", "is_admin", "may_change"]

NOT_OWNER: Final = (
    "Only the person who started this session, or a server administrator, can do that."
)
"""The one refusal every owner-only command answers with (ephemerally)."""


def is_admin(interaction: discord.Interaction) -> bool:
    """The bot-side check: the invoking member has Administrator in this server.

    Discord's default permission only hides a command, and a server owner can
    change it, so every admin-only handler checks this again at run time.
    """
    user = interaction.user
    return isinstance(user, discord.Member) and user.guild_permissions.administrator


async def may_change(
    interaction: discord.Interaction, services: Services, session_key: str
) -> bool:
    """Whether the invoking user may change ``session_key``: an owner, or an administrator.

    Memory first (admin, then the live bindings); the store is read only for a
    user who is neither, so the interaction is still answered well in time.
    """
    user = str(interaction.user.id)
    if is_admin(interaction):
        return True
    if any(r.bound_by == user for r in services.bindings.list_by_session(session_key)):
        return True
    started = await services.subagents.get(session_key)
    return started is not None and started.requested_by == user
