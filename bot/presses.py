"""Button presses that change state: recorded before they act, never failing silently.

Every such button is a :class:`PressButton`: a :class:`discord.ui.DynamicItem`
whose ``custom_id`` carries what it acts on, parsed by the subclass's
``template`` alone (registered once with ``client.add_dynamic_items``), so a
press is understood after a restart too. A press on a brief, approval or
handoff button is recorded in the inbox (keyed by its interaction id) before
anything that can fail: a press Discord delivers twice acts once. Its work
runs as a task of the account, so a clean stop waits for it while the client
can still answer; anything it raises is logged and answered with a visible,
specific line. A press that a killed process was acting on is still
``pending`` at the next start: :func:`recover_presses` closes each visibly, by
what it was for (its button offered again, or its decision applied).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import CHANNEL, conversation_for
from bot.commands.bound import uses_of
from core.errors import ThreadboundError
from core.inbox import InboxPress
from core.logging import get_logger, redact_text

__all__ = [
    "NOT_SAVED",
    "ButtonId",
    "IdButton",
    "PressButton",
    "Recover",
    "account_of",
    "handle_press",
    "recover_presses",
]

_log = get_logger("bot.presses")

NOT_SAVED: Final = (
    "⚠️ This press could not be saved (the bot's store did not answer), so nothing was "
    "done; press the button again."
)

Recover = Callable[[AccountRuntime, InboxPress], Awaitable[None]]
"""Closes one press a killed process left unfinished (by the part of ``action`` before ':')."""


def account_of(interaction: discord.Interaction) -> AccountRuntime:
    """The account whose client the interaction came to."""
    account = getattr(interaction.client, "account", None)
    if not isinstance(account, AccountRuntime):
        raise RuntimeError("the bot's buttons need a ThreadboundClient (with .account)")
    return account


@dataclass(frozen=True, slots=True)
class ButtonId:
    """A button's ``custom_id``, ``tb:<kind>:<field>:…``, written once: the template a
    :class:`PressButton` parses with and the id a view sends both come from it.

    ``fields``: each field's name and the regular expression its value matches.
    """

    kind: str
    fields: tuple[tuple[str, str], ...]

    @property
    def template(self) -> str:
        return ":".join(["tb", re.escape(self.kind), *(f"(?P<{n}>{p})" for n, p in self.fields)])

    def format(self, **values: str) -> str:
        """The id of the button acting on ``values`` (one per field).

        Raises:
            ValueError: a value does not match its field (the press could not be understood).
        """
        made = ":".join(["tb", self.kind, *(values[name] for name, _ in self.fields)])
        if re.fullmatch(self.template, made) is None:
            raise ValueError(f"{made!r} is not a {self.kind} button's id")
        return made


class IdButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=r"(?!)"):
    """A persistent button understood from its ``custom_id`` alone, restart or not: the
    subclass's ``template`` names groups that are its ``__init__``'s keywords. This base
    matches no id and is never registered."""

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> Self:
        if not isinstance(item, discord.ui.Button):
            raise TypeError(f"{cls.__name__} is a button, not {type(item).__name__}")
        # a subclass's __init__ takes the template's groups as keywords
        return cls(item, **match.groupdict())  # type: ignore[arg-type]


class PressButton(IdButton, template=r"(?!)"):
    """A persistent button whose press is recorded before it acts.

    A subclass names its ``template`` (a regular expression whose named groups are
    what a press acts on: its ``__init__`` takes them as keywords) and its
    :meth:`work`; the custom id is parsed there and nowhere else. This base
    matches no id and is never registered.
    """

    def __init__(self, item: discord.ui.Button[Any], /, *, action: str, target: str) -> None:
        super().__init__(item)
        self.press_action = action
        """The inbox's name of the press (``approval:allow``, ``brief`` …)."""
        self.press_target = target
        """The id it acts on (a request's event, a binding, a handoff)."""

    async def callback(self, interaction: discord.Interaction) -> None:
        account = account_of(interaction)
        await handle_press(
            account,
            interaction,
            action=self.press_action,
            target=self.press_target,
            work=lambda: self.work(account, interaction),
        )

    async def work(self, account: AccountRuntime, interaction: discord.Interaction) -> None:
        """What a recorded press does (answering the presser)."""
        raise NotImplementedError


async def handle_press(
    account: AccountRuntime,
    interaction: discord.Interaction,
    *,
    action: str,
    target: str,
    work: Callable[[], Awaitable[None]],
) -> None:
    """Record the press, then run ``work``; nothing raises from here."""
    inbox = uses_of(account).inbox
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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ThreadboundError):
        return " ".join(redact_text(str(exc)).split())[:300]
    if isinstance(exc, discord.HTTPException):
        return f"Discord answered {exc.status}"
    return "something went wrong inside the bot (the details are in its logs)"


async def recover_presses(account: AccountRuntime, recoverers: Mapping[str, Recover]) -> int:
    """At start-up: close every press a previous process died acting on; returns how many."""
    uses = uses_of(account)
    inbox = uses.inbox
    closed = 0
    for press in await inbox.pending_presses(CHANNEL, account.account_id):
        if not uses.answers_for(press.conversation):
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
