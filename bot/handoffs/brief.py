"""The "Ready — produce the brief" button: when it is posted, and what pressing it does.

- When it is due, and for which threads to ask, is
  :class:`core.subagents.brief_offers.BriefOffers`' (which reads
  :class:`core.handoffs.prompts.BriefPrompts`' rule): after each turn of an
  agent shown in a thread here ends (a subagent's task turn waits for its
  announcement, so the button comes under it), after that announcement, and
  once at start-up for what a previous process owed. So the thread gets the
  button after the agent's first turn, and again after the next turn that
  follows a Reject or a brief that was not written. Here: one question per
  thread, the button posted, and its posting recorded.
- Pressing it (the session's owner or an admin) asks the use case,
  :class:`core.handoffs.brief.Briefs`, for the brief (a consolidation turn,
  recorded as a ``brief`` artifact confirmed by the presser, only if that turn
  ended normally) and posts the offered handoff's Accept / Reject under it.
  A brief that was not written gives its message the button back.
"""

from __future__ import annotations

from typing import Final

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import CHANNEL
from bot.commands.bound import uses_of
from bot.commands.permissions import may_change
from bot.handoffs.ui import (
    NO_MENTIONS,
    NOT_YOURS,
    brief_view,
    display_name,
    offer_view,
    say,
)
from core.bindings.records import SessionBindingRecord
from core.errors import ThreadboundError
from core.events import AgentStarted
from core.handoffs.activation import HandoffRecord
from core.handoffs.brief import BriefRefused, brief_from_answer
from core.inbox import InboxPress
from core.logging import get_logger
from core.subagents.brief_offers import DueOffer

__all__ = [
    "BRIEF_CUT_OFF",
    "BRIEF_STOPPED",
    "brief_from_answer",
    "brief_pressed",
    "offer_brief",
    "offer_missed_briefs",
    "recover_brief",
    "watch_turns",
]

_log = get_logger("bot.handoffs")

BRIEF_STOPPED: Final = (
    "The brief was interrupted: the bot is stopping. Press the button again once it is back."
)
BRIEF_CUT_OFF: Final = (
    "The brief was interrupted by a bot restart before it was written; press the button "
    "to try again."
)


def watch_turns(account: AccountRuntime, started: AgentStarted) -> None:
    """After each turn of the agent just built ends, offer the brief button where it is
    due (see :meth:`core.subagents.brief_offers.BriefOffers.watch`)."""
    uses_of(account).brief_offers.watch(
        started.agent, lambda key: account.run_in_background(offer_brief(account, key))
    )


async def offer_brief(account: AccountRuntime, session_key: str) -> None:
    """Post the brief button in this account's threads of the session, where it is due."""
    offers = uses_of(account).brief_offers
    for binding_id in offers.conversations(
        session_key, channel=CHANNEL, account_id=account.account_id
    ):
        await _post_if_due(account, binding_id)


async def offer_missed_briefs(account: AccountRuntime) -> None:
    """At start-up: post the buttons a previous process owed (it stopped between a turn's
    end and the button)."""
    offers = uses_of(account).brief_offers
    for binding_id in await offers.missed(channel=CHANNEL, account_id=account.account_id):
        await _post_if_due(account, binding_id)


async def _post_if_due(account: AccountRuntime, binding_id: str) -> None:
    """Post the button if it is due, one check per binding at a time: a check asked
    for while one runs is made again once it is done (the state may have moved on)."""
    running, again = ("brief-button", binding_id), ("brief-button-again", binding_id)
    if running in account.in_progress:
        account.in_progress.add(again)
        return
    account.in_progress.add(running)
    try:
        while True:
            account.in_progress.discard(again)
            await _post_once(account, binding_id)
            if again not in account.in_progress:
                return
    finally:
        account.in_progress.discard(running)
        account.in_progress.discard(again)


async def _post_once(account: AccountRuntime, binding_id: str) -> None:
    offers = uses_of(account).brief_offers
    try:
        presenter = account.presenter(binding_id)
        if presenter is not None:
            await presenter.drain()  # the answer first, then the button under it
        offer = await offers.due(binding_id)
        if offer is None:
            return
        await _post_button(account, offer)
        await offers.mark_prompted(offer)
    except (discord.HTTPException, ThreadboundError):
        _log.warning("handoff.brief_button_failed", binding_id=binding_id, exc_info=True)


async def _post_button(account: AccountRuntime, offer: DueOffer) -> None:
    profiles = uses_of(account).profiles
    name = display_name(profiles, offer.due.agent)
    target = display_name(profiles, offer.due.to_agent)
    thread = await account.manager.fetch_channel(offer.binding.conversation.conversation_id)
    await thread.send(
        f"When the conversation with **{name}** has settled what **{target}** needs, "
        f"press the button: {name} writes the brief, and the handoff is offered here.",
        view=brief_view(offer.binding.binding_id),
        allowed_mentions=NO_MENTIONS,
    )


# -- pressing the brief button -----------------------------------------------------------


async def brief_pressed(
    account: AccountRuntime, interaction: discord.Interaction, binding_id: str
) -> None:
    """Parse the press, ask :class:`core.handoffs.brief.Briefs` for the brief, show it."""
    uses = uses_of(account)
    record = uses.bindings.active(binding_id)
    if record is None:
        await say(interaction, "This session's thread is no longer bound to an agent.")
        return
    if not await may_change(interaction, uses, record.target_session_key):
        await say(interaction, NOT_YOURS)
        return
    try:
        ready = await uses.briefs.ready(record.target_session_key)
    except BriefRefused as exc:
        await say(interaction, str(exc))
        return
    name = display_name(uses.profiles, ready.from_agent)
    user = str(interaction.user.id)
    await interaction.response.defer()
    try:
        await interaction.edit_original_response(
            content=f"<@{user}> asked {name} for the brief…",
            view=brief_view(binding_id, disabled=True),
            allowed_mentions=NO_MENTIONS,
        )
        brief = await uses.briefs.produce(ready, by_user=user)
    except (ThreadboundError, TimeoutError) as exc:
        if account.services.stopping:  # the stop cut the turn off: say so, give the button back
            _log.info("handoff.brief_interrupted", binding_id=binding_id)
            text = BRIEF_STOPPED
        else:
            _log.warning("handoff.brief_failed", binding_id=binding_id, error=str(exc))
            await say(interaction, f"The brief was not produced: {exc}")
            text = f"The brief was not produced ({name}); press the button to try again."
        await interaction.edit_original_response(  # the button back, to press again
            content=text, view=brief_view(binding_id), allowed_mentions=NO_MENTIONS
        )
        return
    presenter = account.presenter(binding_id)
    if presenter is not None:
        await presenter.drain()  # the brief's words first, then what it led to
    await interaction.edit_original_response(
        content=f"{name} wrote the brief <@{user}> asked for: **{brief.title}**. The handoff "
        f"to {display_name(uses.profiles, ready.to_agent)} is offered below.",
        view=brief_view(binding_id, disabled=True),
        allowed_mentions=NO_MENTIONS,
    )
    await _post_offer(account, record, brief.handoff, brief.title)


async def recover_brief(account: AccountRuntime, press: InboxPress) -> None:
    """A killed process was writing this brief: its message, frozen at "asked for the
    brief…" with a disabled button, says so and offers the button again."""
    record = uses_of(account).bindings.active(press.target)
    if record is None or press.message_id is None:
        return
    thread = await account.manager.fetch_channel(record.conversation.conversation_id)
    await thread.get_partial_message(int(press.message_id)).edit(
        content=BRIEF_CUT_OFF, view=brief_view(record.binding_id), allowed_mentions=NO_MENTIONS
    )


async def _post_offer(
    account: AccountRuntime, record: SessionBindingRecord, handoff: HandoffRecord, title: str
) -> None:
    profiles = uses_of(account).profiles
    target = profiles.get(handoff.to_agent)
    where = "in a new thread" if target and target.handoff_thread == "new" else "this thread"
    thread = await account.manager.fetch_channel(record.conversation.conversation_id)
    await thread.send(
        f"**{display_name(profiles, handoff.from_agent)}** offers a handoff to "
        f"**{display_name(profiles, handoff.to_agent)}** with the brief “{title}”. Accept to let "
        f"{display_name(profiles, handoff.to_agent)} take over {where}.",
        view=offer_view(handoff.id),
        allowed_mentions=NO_MENTIONS,
    )
