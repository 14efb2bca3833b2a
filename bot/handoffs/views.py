"""Handoffs in Discord: the persistent buttons, and Accept / Reject.

The brief button (:mod:`bot.handoffs.brief`) and Accept / Reject are
:class:`discord.ui.DynamicItem` buttons whose ``custom_id`` carries what they
act on (a binding id, a handoff id), registered once with
``client.add_dynamic_items``: a press is understood from the id alone, so the
buttons keep working after a bot restart. Views are stopped before they are
sent, so every press takes that same path, restart or not.

Only the session's owner (the binding's ``bound_by``) or a server
administrator may press; anyone else gets an ephemeral refusal and nothing
changes.

Accept activates the target (:func:`core.handoffs.activate.activate`) in the
same thread: the binding's persona becomes the target's and the new agent is
presented before it gets the brief, so its answer streams under its own
name. A target whose profile says ``handoff_thread = "new"`` takes over in a
new thread beside it instead (the old thread is let go). Reject only records
the rejection: the agent carries on, and the brief button is due again once
its next turn ends (:mod:`core.handoffs.prompts`). Either way the offer's
buttons are disabled and the message says who decided.
"""

from __future__ import annotations

from typing import Any, Final

import discord

from adapters.discord.account import AccountRuntime
from bot.commands.bound import NOT_BOUND, binding_here
from bot.commands.permissions import may_change
from bot.handoffs.brief import brief_pressed, offer_brief
from bot.handoffs.ui import (
    BRIEF_LABEL,
    BRIEF_TEMPLATE,
    HANDOFF_TEMPLATE,
    NO_MENTIONS,
    NOT_YOURS,
    Action,
    account_of,
    brief_button,
    display_name,
    handoff_button,
    offer_view,
    say,
)
from bot.presses import handle_press
from core.agent.agent import Agent
from core.bindings.records import SessionBindingRecord
from core.errors import ThreadboundError
from core.handoffs.activate import activate, complete_when_done
from core.handoffs.activation import HandoffRecord
from core.inbox import InboxPress
from core.logging import get_logger
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

_log = get_logger("bot.handoffs")

PRESS_CUT_OFF: Final = "⚠️ A press on this offer was cut off by a bot restart; press again."
HANDED_OFF: Final = "handed-off"
"""Unbind reason of the thread an accepted handoff leaves (``handoff_thread = "new"``)."""


class HandoffButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=HANDOFF_TEMPLATE):
    """Accept or Reject one offered handoff."""

    def __init__(self, action: Action, handoff_id: str) -> None:
        super().__init__(handoff_button(action, handoff_id))
        self.action: Action = action
        self.handoff_id = handoff_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: Any,
        /,
    ) -> HandoffButton:
        return cls(match["action"], match["handoff_id"])

    async def callback(self, interaction: discord.Interaction) -> None:
        account = account_of(interaction)
        await handle_press(
            account,
            interaction,
            action=f"handoff:{self.action}",
            target=self.handoff_id,
            work=lambda: handoff_pressed(account, interaction, self.action, self.handoff_id),
        )


class BriefButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=BRIEF_TEMPLATE):
    """Confirm that the conversation is ready: produce the brief and offer the handoff."""

    def __init__(self, binding_id: str) -> None:
        super().__init__(brief_button(binding_id))
        self.binding_id = binding_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: Any,
        /,
    ) -> BriefButton:
        return cls(match["binding_id"])

    async def callback(self, interaction: discord.Interaction) -> None:
        account = account_of(interaction)
        await handle_press(
            account,
            interaction,
            action="brief",
            target=self.binding_id,
            work=lambda: brief_pressed(account, interaction, self.binding_id),
        )


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
    record = account.services.bindings.active_for_conversation(press.conversation)
    if record is None or press.message_id is None:
        return
    offers = await account.services.handoffs.list(record.target_session_key)
    if not any(h.id == press.target and h.status == "offered" for h in offers):
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
    services = account.services
    record = binding_here(account, interaction.channel)
    if record is None:
        await say(interaction, NOT_BOUND)
        return
    if not await may_change(interaction, services, record.target_session_key):
        await say(interaction, NOT_YOURS)
        return
    profiles = services.config.agents
    user = str(interaction.user.id)
    await interaction.response.defer()
    try:
        if action == "reject":
            agent = await services.runtime.get(record.target_session_key)
            handoff = await services.handoffs.reject(agent.tree, handoff_id, actor=user)
            outcome = (
                f"Rejected by <@{user}>; {display_name(profiles, handoff.from_agent)} carries "
                "on, and the brief button comes back after its next answer."
            )
        else:
            handoff, now = await _accept(account, record, handoff_id, user)
            place = (
                "this thread"
                if now.binding_id == record.binding_id
                else f"<#{now.conversation.conversation_id}>"
            )
            outcome = (
                f"Accepted by <@{user}>: **{display_name(profiles, handoff.to_agent)}** takes over "
                f"in {place}."
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


async def _accept(
    account: AccountRuntime, record: SessionBindingRecord, handoff_id: str, user: str
) -> tuple[HandoffRecord, SessionBindingRecord]:
    """Activate the handoff's target; returns the handoff and the binding it now speaks in."""
    services = account.services
    where: list[SessionBindingRecord] = []
    presenter = account.presenter(record.binding_id)
    if presenter is not None:
        await presenter.drain()

    async def take_over(agent: Agent, handoff: HandoffRecord) -> None:
        profile = services.config.agents[handoff.to_agent]  # activate checked it exists
        persona = {"name": profile.display_name, "avatar_url": profile.avatar_url or None}
        updated = None
        if profile.handoff_thread == "new":
            try:
                updated = await _move_to_new_thread(account, record, handoff.to_agent, persona)
            except (ThreadboundError, discord.HTTPException):
                # The handoff is accepted already: take over here rather than not at all.
                _log.warning(
                    "handoff.new_thread_failed", binding_id=record.binding_id, exc_info=True
                )
        if updated is None:
            updated = await services.bindings.update_metadata(
                record.binding_id, persona=persona, agent=handoff.to_agent
            )
        where.append(updated)
        account.present(updated, agent)

    activation = await activate(
        runtime=services.runtime,
        handoffs=services.handoffs,
        profiles=services.config.agents,
        session_key=record.target_session_key,
        handoff_id=handoff_id,
        actor=user,
        before_input=take_over,
    )
    # "completed" once the new agent has worked through the brief
    account.run_in_background(
        complete_when_done(activation, handoffs=services.handoffs, runtime=services.runtime)
    )
    return activation.handoff, where[0]


async def _move_to_new_thread(
    account: AccountRuntime,
    record: SessionBindingRecord,
    agent_id: str,
    persona: dict[str, Any],
) -> SessionBindingRecord:
    """Bind the session to a new thread beside the offer's, then let the old thread go.

    The new binding comes first: if the thread cannot be made, the session
    stays bound where it was. One live binding per session afterwards keeps
    completion routing unambiguous.
    """
    bindings = account.services.bindings
    conversation = record.conversation
    metadata = {
        **record.metadata,
        "persona": persona,
        "agent": agent_id,
        "thread_name": f"{persona['name']}: handoff"[:100],
        "handed_off_from": conversation.conversation_id,
    }
    new = await bindings.bind(
        record.target_session_key,
        record.target_kind,
        conversation.new_beside(),
        metadata=metadata,
        bound_by=record.bound_by,
        scope=record.scope,
    )
    await bindings.unbind(record.binding_id, reason=HANDED_OFF)
    return new
