"""Handoffs in Discord: the persistent buttons, and Accept / Reject.

The brief button (:mod:`bot.handoffs.brief`) and Accept / Reject are
:class:`bot.presses.PressButton` buttons whose ``custom_id`` carries what they
act on (a binding id, a handoff id), registered once with
``client.add_dynamic_items``: a press is understood from the id alone, so the
buttons keep working after a bot restart. Views are stopped before they are
sent, so every press takes that same path, restart or not.

Only the session's owner (the binding's ``bound_by``) or a server
administrator may press; anyone else gets an ephemeral refusal and nothing
changes.

Accept and Reject are the use case :class:`core.handoffs.accept.Handoffs`: Accept
activates the target in the same thread (its persona, presented before it gets
the brief, so its answer streams under its own name), or in a new thread
beside it when its profile says ``handoff_thread = "new"``; Reject only records
the rejection. Either way the offer's buttons are disabled and the message says
who decided.
"""

from __future__ import annotations

from typing import Any, Final

import discord

from adapters.discord.account import AccountRuntime
from bot.commands.bound import NOT_BOUND, binding_here, uses_of
from bot.commands.permissions import may_change
from bot.handoffs.brief import brief_pressed, offer_brief
from bot.handoffs.ui import (
    BRIEF_ID,
    BRIEF_LABEL,
    HANDOFF_ID,
    NO_MENTIONS,
    NOT_YOURS,
    Action,
    display_name,
    offer_view,
    say,
)
from bot.presses import PressButton
from core.errors import ThreadboundError
from core.handoffs.accept import HANDED_OFF
from core.inbox import InboxPress
from core.subagents.records import SubagentRecord

__all__ = [
    "BRIEF_LABEL",
    "HANDED_OFF",
    "NOT_YOURS",
    "BriefButton",
    "HandoffButton",
    "setup_handoffs",
    "subagent_finished",
]

PRESS_CUT_OFF: Final = "⚠️ A press on this offer was cut off by a bot restart; press again."


class HandoffButton(PressButton, template=HANDOFF_ID.template):
    """Accept or Reject one offered handoff."""

    def __init__(self, item: discord.ui.Button[Any], /, *, action: str, handoff_id: str) -> None:
        super().__init__(item, action=f"handoff:{action}", target=handoff_id)
        self.action: Action = "accept" if action == "accept" else "reject"
        self.handoff_id = handoff_id

    async def work(self, account: AccountRuntime, interaction: discord.Interaction) -> None:
        await handoff_pressed(account, interaction, self.action, self.handoff_id)


class BriefButton(PressButton, template=BRIEF_ID.template):
    """Confirm that the conversation is ready: produce the brief and offer the handoff."""

    def __init__(self, item: discord.ui.Button[Any], /, *, binding_id: str) -> None:
        super().__init__(item, action="brief", target=binding_id)
        self.binding_id = binding_id

    async def work(self, account: AccountRuntime, interaction: discord.Interaction) -> None:
        await brief_pressed(account, interaction, self.binding_id)


def setup_handoffs(client: discord.Client) -> None:
    """Register the buttons with ``client`` (a press is understood from its id alone)."""
    client.add_dynamic_items(HandoffButton, BriefButton)


def subagent_finished(account: AccountRuntime, record: SubagentRecord) -> None:
    """After a task's announcement, the brief button comes under it (where it is due); a
    run-mode thread was let go by then and gets none."""
    account.run_in_background(offer_brief(account, record.session_key))


async def recover_handoff(account: AccountRuntime, press: InboxPress) -> None:
    """A killed process was acting on an Accept / Reject: if the offer is still open, say
    on it that the press was cut off (its buttons work as before)."""
    uses = uses_of(account)
    record = uses.bindings.active_for_conversation(press.conversation)
    if record is None or press.message_id is None:
        return
    if not await uses.handoffs.still_offered(record.target_session_key, press.target):
        return  # decided after all (start-up finishes an accepted one)
    thread = await account.manager.fetch_channel(press.conversation.conversation_id)
    message = await thread.fetch_message(int(press.message_id))
    first = message.content.split("\n", 1)[0]
    await message.edit(
        content=f"{first}\n{PRESS_CUT_OFF}",
        view=offer_view(press.target),
        allowed_mentions=NO_MENTIONS,
    )


async def handoff_pressed(
    account: AccountRuntime, interaction: discord.Interaction, action: Action, handoff_id: str
) -> None:
    uses = uses_of(account)
    record = binding_here(account, interaction.channel)
    if record is None:
        await say(interaction, NOT_BOUND)
        return
    if not await may_change(interaction, uses, record.target_session_key):
        await say(interaction, NOT_YOURS)
        return
    user = str(interaction.user.id)
    await interaction.response.defer()
    try:
        if action == "reject":
            handoff = await uses.handoffs.reject(record.target_session_key, handoff_id, by=user)
            outcome = (
                f"Rejected by <@{user}>; {display_name(uses.profiles, handoff.from_agent)} "
                "carries on, and the brief button comes back after its next answer."
            )
        else:
            presenter = account.presenter(record.binding_id)
            if presenter is not None:
                await presenter.drain()  # what the agent said goes first
            accepted = await uses.handoffs.accept(record, handoff_id, by=user, show=account.present)
            # "completed" once the new agent has worked through the brief
            account.run_in_background(uses.handoffs.completed(accepted))
            handoff = accepted.handoff
            place = (
                f"<#{accepted.binding.conversation.conversation_id}>"
                if accepted.moved
                else "this thread"
            )
            outcome = (
                f"Accepted by <@{user}>: **{display_name(uses.profiles, handoff.to_agent)}** "
                f"takes over in {place}."
            )
    except ThreadboundError as exc:
        await say(interaction, f"The handoff was not carried out: {exc}")
        return
    await interaction.edit_original_response(
        content=f"{_offer_text(interaction)}\n{outcome}",
        view=offer_view(handoff_id, disabled=True),
        allowed_mentions=NO_MENTIONS,
    )


def _offer_text(interaction: discord.Interaction) -> str:
    message = interaction.message
    return message.content.split("\n", 1)[0] if message is not None else ""
