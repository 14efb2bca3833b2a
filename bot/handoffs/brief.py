"""The "Ready — produce the brief" button: when it is posted, and what pressing it does.

- When it is due is :class:`core.handoffs.prompts.BriefPrompts`' rule (the
  session log, and the binding's record of where it was last posted); here
  only *when to ask*: after each turn of an agent shown in a thread here ends
  (a subagent's task turn waits for its announcement, so the button comes
  under it), after that announcement, and once at start-up for what a
  previous process owed. So the thread gets the button after the agent's
  first turn, and again after the next turn that follows a Reject or a brief
  that was not written.
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
from core.agent.events import AgentEvent, TurnEnded
from core.bindings.records import SessionBindingRecord
from core.errors import ThreadboundError
from core.handoffs.activation import HandoffRecord
from core.handoffs.brief import BriefRefused, brief_from_answer
from core.handoffs.prompts import BriefPrompts, DueBrief
from core.inbox import InboxPress
from core.logging import get_logger
from core.sessions.tree import SessionTree
from core.subagents.events import COMPLETED, SPAWNED

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
_UNFINISHED_TASK: Final = ("starting", "running")
"""A subagent in these states has its announcement to come (which brings the button)."""


def watch_turns(account: AccountRuntime, agent: Agent) -> None:
    """After each turn of ``agent`` ends, offer the brief button where it is due.

    Called once per agent built (first use, a restart, after an eviction or a
    handoff), so every turn of every agent is seen, whichever thread shows it.
    An agent is built for one profile (a handoff builds the next one's): one that
    hands off to nobody is not watched at all.
    """
    profile = account.services.config.agents.get(agent.agent_name or "")
    if profile is None or not profile.handoff_to:
        return
    key = agent.session_key

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, TurnEnded) and not _task_unannounced(agent.tree):
            account.run_in_background(offer_brief(account, key))

    agent.subscribe(on_event)


def _task_unannounced(tree: SessionTree) -> bool:
    """A subagent's task not yet completed: its announcement comes first, then the button.

    Read when its turn ends, before the task's completion is recorded, so a task's
    last turn is told apart from a later turn of the conversation by the log alone.
    """
    types = {event.type for event in tree.events if event.type in (SPAWNED, COMPLETED)}
    return SPAWNED in types and COMPLETED not in types


async def offer_brief(account: AccountRuntime, session_key: str) -> None:
    """Post the brief button in this account's threads of the session, where it is due."""
    for record in account.services.bindings.active_for_session(session_key):
        conversation = record.conversation
        if conversation.channel == "discord" and conversation.account_id == account.account_id:
            await _post_if_due(account, record.binding_id)


async def offer_missed_briefs(account: AccountRuntime) -> None:
    """At start-up: post the buttons a previous process owed (it stopped between a turn's
    end and the button)."""
    services = account.services
    for record in services.bindings.live():
        conversation = record.conversation
        if conversation.channel != "discord" or conversation.account_id != account.account_id:
            continue
        if not services.bindings.mine(record):
            continue  # another process's guild: that process offers it
        profile = services.config.agents.get(record.meta.agent or "")
        if profile is None or not profile.handoff_to:
            continue
        subagent = await services.subagents.get(record.target_session_key)
        if subagent is not None and subagent.state in _UNFINISHED_TASK:
            continue  # still at work: the announcement will bring the button
        await _post_if_due(account, record.binding_id)


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
    services = account.services
    try:
        presenter = account.presenter(binding_id)
        if presenter is not None:
            await presenter.drain()  # the answer first, then the button under it
        record = services.bindings.active(binding_id)
        if record is None:
            return
        prompts = BriefPrompts(services.bindings, services.config.agents)
        due = prompts.due(record, await _tree(account, record.target_session_key))
        if due is None:
            return
        await _post_button(account, record, due)
        await prompts.mark_prompted(binding_id, due)
    except (discord.HTTPException, ThreadboundError):
        _log.warning("handoff.brief_button_failed", binding_id=binding_id, exc_info=True)


async def _tree(account: AccountRuntime, session_key: str) -> SessionTree:
    """The session as its agent holds it, or as the log has it (no agent started for it)."""
    agent = account.services.runtime.peek(session_key)
    return agent.tree if agent is not None else await account.services.sessions.load(session_key)


async def _post_button(
    account: AccountRuntime, record: SessionBindingRecord, due: DueBrief
) -> None:
    profiles = account.services.config.agents
    name = display_name(profiles, due.agent)
    target = display_name(profiles, due.to_agent)
    thread = await account.manager.fetch_channel(record.conversation.conversation_id)
    await thread.send(
        f"When the conversation with **{name}** has settled what **{target}** needs, "
        f"press the button: {name} writes the brief, and the handoff is offered here.",
        view=brief_view(record.binding_id),
        allowed_mentions=NO_MENTIONS,
    )


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
