"""What every in-thread command shares: the use cases, and the binding it is used in.

:func:`uses_of` is the one way a command (or a button) reaches the domain: the
use cases of :mod:`core.usecases`, and the configuration they carry. A command
typed in a bound thread acts on that binding's session. :func:`binding_here`
finds the binding (or None), and :func:`binding_for` also answers the user when
there is none (:data:`NOT_BOUND`) or, for a command that changes the session,
when they may not change it (:data:`bot.commands.permissions.NOT_OWNER`).
:func:`session_for` is the same, giving the session's key.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import conversation_of
from bot.commands.permissions import NOT_OWNER, may_change
from core.bindings.records import SessionBindingRecord
from core.usecases import UseCases

__all__ = ["NOT_BOUND", "binding_for", "binding_here", "session_for", "uses_of"]

NOT_BOUND = "This channel is not bound to an agent; use the command in a subagent's thread."


_USES: WeakKeyDictionary[AccountRuntime, UseCases] = WeakKeyDictionary()


def uses_of(account: AccountRuntime) -> UseCases:
    """The use cases this account's commands and buttons call: built once per account
    (a press or a turn's end asks for them again and again)."""
    uses = _USES.get(account)
    if uses is None:
        uses = _USES[account] = UseCases.of(account.services)
    return uses


def binding_here(account: AccountRuntime, channel: object) -> SessionBindingRecord | None:
    """The channel's active binding, or None.

    An ``ending`` binding counts as none: it is being torn down, so a command
    acting on its session now would race the farewell (or touch a binding the
    store has already ended).
    """
    if not isinstance(channel, discord.Thread | discord.abc.GuildChannel):
        return None
    return uses_of(account).bindings.active_for_conversation(
        conversation_of(account.account_id, channel)
    )


async def binding_for(
    account: AccountRuntime, interaction: discord.Interaction, *, changes: bool
) -> SessionBindingRecord | None:
    """This channel's binding; otherwise an ephemeral answer saying why, and None.

    ``changes``: the command changes the session, so a user who is not one of
    its owners (nor an administrator) is refused before anything happens.
    """
    record = binding_here(account, interaction.channel)
    if record is None:
        await interaction.response.send_message(NOT_BOUND, ephemeral=True)
        return None
    if changes and not await may_change(interaction, uses_of(account), record.target_session_key):
        await interaction.response.send_message(NOT_OWNER, ephemeral=True)
        return None
    return record


async def session_for(
    account: AccountRuntime, interaction: discord.Interaction, *, changes: bool
) -> str | None:
    """The key of this channel's session; otherwise, as :func:`binding_for`, an ephemeral
    answer saying why, and None."""
    record = await binding_for(account, interaction, changes=changes)
    return record.target_session_key if record is not None else None
