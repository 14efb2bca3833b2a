"""The "Ready — produce the brief" button: posted once, and what pressing it does.

- After the first turn of an agent whose profile has ``handoff_to`` ends,
  the thread gets the button once: the binding metadata flag
  ``brief_prompted`` lists the agents it was posted for, so neither a second
  turn nor a restart posts it again.
- Pressing it (the session's owner or an admin) asks the use case,
  :class:`core.handoffs.brief.Briefs`, for the brief (a consolidation turn,
  recorded as a ``brief`` artifact confirmed by the presser) and posts the
  offered handoff's Accept / Reject under it. Here only what Discord shows.
"""

from __future__ import annotations

from typing import Final

import discord

from adapters.discord.account import AccountRuntime
from bot.commands.permissions import may_change
from bot.handoffs.ui import (
    NO_MENTIONS,
    NOT_YOURS,
    brief_view,
    display_name,
    offer_view,
    say,
)
from core.agent.agent import Agent
from core.agent.assignment import AGENT_ACTIVATED, active_agent
from core.agent.events import AgentEvent, TurnEnded
from core.bindings.records import SessionBindingRecord
from core.errors import ThreadboundError
from core.handoffs.activation import HandoffRecord
from core.handoffs.brief import BriefRefused, brief_from_answer
from core.inbox import InboxPress
from core.logging import get_logger
from core.sessions.tree import SessionTree

__all__ = [
    "BRIEF_CUT_OFF",
    "BRIEF_STOPPED",
    "PROMPTED_KEY",
    "brief_from_answer",
    "brief_pressed",
    "offer_missed_briefs",
    "recover_brief",
    "watch_for_brief",
]

_log = get_logger("bot.handoffs")

PROMPTED_KEY: Final = "brief_prompted"
"""Binding metadata: the agents whose brief button was already posted in the thread."""
BRIEF_STOPPED: Final = (
    "The brief was interrupted: the bot is stopping. Press the button again once it is back."
)
BRIEF_CUT_OFF: Final = (
    "The brief was interrupted by a bot restart before it was written; press the button "
    "to try again."
)


def _turn_ended_since_activation(tree: SessionTree) -> bool:
    for event in reversed(tree.events):
        if event.type == "turn_ended":
            return True
        if event.type == AGENT_ACTIVATED:
            return False
    return False


def watch_for_brief(account: AccountRuntime, record: SessionBindingRecord, agent: Agent) -> None:
    """Post the brief button once the current agent's first turn has ended, if it hands off."""
    current = active_agent(agent.tree)
    profile = account.services.config.agents.get(current or "")
    if current is None or profile is None or not profile.handoff_to:
        return
    if current in record.meta.brief_prompted:
        return
    if _turn_ended_since_activation(agent.tree):
        account.run_in_background(_post_brief_button(account, record.binding_id, current))
        return

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, TurnEnded):
            unsubscribe()
            account.run_in_background(_post_brief_button(account, record.binding_id, current))

    unsubscribe = agent.subscribe(on_event)


async def offer_missed_briefs(account: AccountRuntime) -> None:
    """At start-up: post the brief button where a previous process announced the task
    but stopped before the button was posted."""
    services = account.services
    for record in services.bindings.live():
        conversation = record.conversation
        if conversation.channel != "discord" or conversation.account_id != account.account_id:
            continue
        if not services.bindings.mine(record):
            continue  # another process's guild: that process offers it
        agent_id = record.meta.agent
        profile = services.config.agents.get(agent_id or "")
        if profile is None or not profile.handoff_to:
            continue
        if agent_id in record.meta.brief_prompted:
            continue
        subagent = await services.subagents.get(record.target_session_key)
        if subagent is None or subagent.state != "idle":
            continue  # still at work: the announcement will bring the button
        watch_for_brief(account, record, await services.runtime.get(record.target_session_key))


async def _post_brief_button(account: AccountRuntime, binding_id: str, agent_id: str) -> None:
    bindings = account.services.bindings
    record = bindings.active(binding_id)
    key = ("brief-button", binding_id, agent_id)  # its button is being posted
    if record is None or key in account.in_progress:
        return
    prompted = list(record.meta.brief_prompted)
    if agent_id in prompted:
        return
    account.in_progress.add(key)
    try:
        presenter = account.presenter(binding_id)
        if presenter is not None:
            await presenter.drain()  # the answer first, then the button under it
        profiles = account.services.config.agents
        name = display_name(profiles, agent_id)
        target = display_name(profiles, profiles[agent_id].handoff_to[0])
        thread = await account.manager.fetch_channel(record.conversation.conversation_id)
        await thread.send(
            f"When the conversation with **{name}** has settled what **{target}** needs, "
            f"press the button: {name} writes the brief, and the handoff is offered here.",
            view=brief_view(binding_id),
            allowed_mentions=NO_MENTIONS,
        )
        await bindings.update_metadata(binding_id, **{PROMPTED_KEY: [*prompted, agent_id]})
    except (discord.HTTPException, ThreadboundError):
        _log.warning("handoff.brief_button_failed", binding_id=binding_id, exc_info=True)
    finally:
        account.in_progress.discard(key)


# -- pressing the brief button -----------------------------------------------------------


async def brief_pressed(
    account: AccountRuntime, interaction: discord.Interaction, binding_id: str
) -> None:
    """Parse the press, ask :class:`core.handoffs.brief.Briefs` for the brief, show it."""
    services = account.services
    record = services.bindings.active(binding_id)
    if record is None:
        await say(interaction, "This session's thread is no longer bound to an agent.")
        return
    if not await may_change(interaction, services, record.target_session_key):
        await say(interaction, NOT_YOURS)
        return
    try:
        ready = await services.briefs.ready(record.target_session_key)
    except BriefRefused as exc:
        await say(interaction, str(exc))
        return
    profiles = services.config.agents
    name = display_name(profiles, ready.from_agent)
    user = str(interaction.user.id)
    await interaction.response.defer()
    try:
        await interaction.edit_original_response(
            content=f"<@{user}> asked {name} for the brief…",
            view=brief_view(binding_id, disabled=True),
            allowed_mentions=NO_MENTIONS,
        )
        brief = await services.briefs.produce(ready, by_user=user)
    except (ThreadboundError, TimeoutError) as exc:
        if services.stopping:  # the stop cut the turn off: say so, and give the button back
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
        f"to {display_name(profiles, ready.to_agent)} is offered below.",
        view=brief_view(binding_id, disabled=True),
        allowed_mentions=NO_MENTIONS,
    )
    await _post_offer(account, record, brief.handoff, brief.title)


async def recover_brief(account: AccountRuntime, press: InboxPress) -> None:
    """A killed process was writing this brief: its message, frozen at "asked for the
    brief…" with a disabled button, says so and offers the button again."""
    record = account.services.bindings.active(press.target)
    if record is None or press.message_id is None:
        return
    thread = await account.manager.fetch_channel(record.conversation.conversation_id)
    await thread.get_partial_message(int(press.message_id)).edit(
        content=BRIEF_CUT_OFF, view=brief_view(record.binding_id), allowed_mentions=NO_MENTIONS
    )


async def _post_offer(
    account: AccountRuntime, record: SessionBindingRecord, handoff: HandoffRecord, title: str
) -> None:
    profiles = account.services.config.agents
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
