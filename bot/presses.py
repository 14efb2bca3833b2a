"""Button presses that change state: recorded before they act, never failing silently.

A press on a brief, approval or handoff button is recorded in the inbox (keyed
by its interaction id) before anything that can fail: a press Discord delivers
twice acts once. Its work runs as a task of the account, so a clean stop waits
for it while the client can still answer; anything it raises is logged and
answered with a visible, specific line. A press that a killed process was
acting on is still ``pending`` at the next start: :func:`recover_presses`
closes each visibly, by what it was for (its button offered again, or its
decision applied).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import CHANNEL, conversation_for
from core.errors import ThreadboundError
from core.inbox import InboxPress
from core.logging import get_logger, redact_text

__all__ = ["NOT_SAVED", "Recover", "handle_press", "recover_presses"]

_log = get_logger("bot.presses")

NOT_SAVED: Final = (
    "⚠️ This press could not be saved (the bot's store did not answer), so nothing was "
    "done; press the button again."
)

Recover = Callable[[AccountRuntime, InboxPress], Awaitable[None]]
"""Closes one press a killed process left unfinished (by the part of ``action`` before ':')."""


async def handle_press(
    account: AccountRuntime,
    interaction: discord.Interaction,
    *,
    action: str,
    target: str,
    work: Callable[[], Awaitable[None]],
) -> None:
    """Record the press, then run ``work``; nothing raises from here."""
    inbox = account.services.inbox
    press = _press_of(account, interaction, action, target)
    try:
        fresh = await inbox.record_press(press)
    except Exception:
        _log.error("press.record_failed", action=action, target=target, exc_info=True)
        await _answer(interaction, NOT_SAVED)
        return
    if not fresh:
        return  # the same press delivered again: it acted the first time
    status = "done"
    try:
        await asyncio.shield(account.run_in_background(_run(work)))
    except Exception as exc:
        status = "failed"
        _log.error("press.failed", action=action, target=target, exc_info=exc)
        await _answer(interaction, f"⚠️ This press could not be carried out: {_reason(exc)}.")
    try:
        await inbox.finish_press(press, status)
    except Exception:  # still pending: the next start closes it visibly
        _log.warning("press.finish_failed", action=action, target=target, exc_info=True)


async def _run(work: Callable[[], Awaitable[None]]) -> None:
    await work()


def _press_of(
    account: AccountRuntime, interaction: discord.Interaction, action: str, target: str
) -> InboxPress:
    channel = interaction.channel
    channel_id = interaction.channel_id or 0
    parent = getattr(channel, "parent_id", None)
    message = interaction.message
    user = interaction.user
    return InboxPress(
        conversation=conversation_for(account.account_id, channel_id, parent),
        item_id=str(interaction.id),
        seq=interaction.id,
        action=action,
        target=target,
        message_id=str(message.id) if message is not None else None,
        author_id=str(user.id),
        author_name=getattr(user, "display_name", None) or user.name,
    )


async def _answer(interaction: discord.Interaction, text: str) -> None:
    """An ephemeral line to the presser, whether or not the press was acknowledged yet."""
    mentions = discord.AllowedMentions.none()
    try:
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=mentions)
        else:
            await interaction.response.send_message(text, ephemeral=True, allowed_mentions=mentions)
    except (discord.HTTPException, RuntimeError):  # RuntimeError: the client has closed
        _log.warning("press.answer_failed")


def _mine(account: AccountRuntime, press: InboxPress) -> bool:
    bindings = account.services.bindings
    binding = bindings.resolve_by_conversation(press.conversation)
    if binding is None:
        return account.services.shards.owns_scope(None)
    return bindings.mine(binding)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ThreadboundError):
        return " ".join(redact_text(str(exc)).split())[:300]
    if isinstance(exc, discord.HTTPException):
        return f"Discord answered {exc.status}"
    return "something went wrong inside the bot (the details are in its logs)"


async def recover_presses(account: AccountRuntime, recoverers: Mapping[str, Recover]) -> int:
    """At start-up: close every press a previous process died acting on; returns how many."""
    inbox = account.services.inbox
    closed = 0
    for press in await inbox.pending_presses(CHANNEL, account.account_id):
        if not _mine(account, press):
            continue  # another process's guild: that process closes it
        recover = recoverers.get(press.action.split(":", 1)[0])
        try:
            if recover is not None:
                await recover(account, press)
            await inbox.finish_press(press, "interrupted")
        except Exception:
            _log.warning(
                "press.recover_failed", action=press.action, target=press.target, exc_info=True
            )
            continue
        closed += 1
    if closed:
        _log.info("presses.closed_at_start", account=account.account_id, count=closed)
    return closed
