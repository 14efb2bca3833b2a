"""Who may change a session: one of its owners, or a server administrator.

Every command that changes a session (``/cancel``, ``/steer``, ``/followup``,
``/rewind``, ``/bookmark``, ``/focus``, ``/unfocus``, ``/session ...``, and the
handoff buttons) asks :func:`may_change`, so the rule lives in one place: the
owners are core's (:class:`core.subagents.owners.Owners`: who started the
session, who bound one of its live threads); whether the person is a server
administrator is Discord's, read here. Reading stays open: a bound thread is a
conversation, and whoever is in it sees it anyway.
"""

from __future__ import annotations

import discord

from core.subagents.owners import NOT_OWNER
from core.usecases import UseCases

__all__ = ["NOT_OWNER", "is_admin", "may_change"]


def is_admin(interaction: discord.Interaction) -> bool:
    """The bot-side check: the invoking member has Administrator in this server.

    Discord's default permission only hides a command, and a server owner can
    change it, so every admin-only handler checks this again at run time.
    """
    user = interaction.user
    return isinstance(user, discord.Member) and user.guild_permissions.administrator


async def may_change(interaction: discord.Interaction, uses: UseCases, session_key: str) -> bool:
    """Whether the invoking user may change ``session_key``: an owner, or an administrator."""
    return await uses.owners.may_change(
        session_key, str(interaction.user.id), admin=is_admin(interaction)
    )
