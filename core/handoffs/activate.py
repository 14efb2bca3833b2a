"""Activation on Accept: the accepted handoff's target agent takes over the session.

Channel-agnostic: Discord's Accept button calls :func:`activate`, and so could
any other adapter. The order is what keeps a refusal clean:

1. refuse early what cannot work, before anything is written: an unknown
   target profile, a handoff that does not exist or is no longer offered, a
   turn still running (its agent cannot be replaced mid-turn);
2. accept the handoff (its ``handoff.accepted`` event and table row);
3. apply the activation rule (:func:`~core.handoffs.activation.may_activate`)
   to the session's handoffs as the table now has them;
4. append ``agent.activated`` through the resident agent, so its tree stays
   in step with the log, and rebuild the session's agent from the log
   (:meth:`core.runtime.SessionRuntime.reload`): the new agent runs the
   target profile's provider, prompt and tools;
5. let the caller prepare the channel (``before_input``: a new persona, a
   presenter attached to the new agent) so the new agent's first words are
   shown under its own name;
6. send the handed-over artifact to the new agent as its input.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from core.agent.agent import Agent, Submission
from core.agent.assignment import AgentActivatedPayload
from core.artifacts.registry import ArtifactPayload
from core.config import AgentProfile, agent_display_name
from core.errors import HandoffError, ThreadboundError
from core.handoffs.activation import HandoffRecord, may_activate
from core.handoffs.service import HandoffService, movable
from core.logging import get_logger
from core.runtime import SessionBusy, SessionRuntime
from core.sessions.payloads import TurnEndedPayload
from core.sessions.tree import SessionTree

__all__ = [
    "Activation",
    "ActivationRefused",
    "BeforeInput",
    "activate",
    "complete_when_done",
    "finish_accepted",
    "handoff_input",
]

_log = get_logger("core.handoffs")

BeforeInput = Callable[[Agent, HandoffRecord], Awaitable[None] | None]
"""Called with the new agent before it gets its input (attach a presenter, change persona)."""


class ActivationRefused(HandoffError):
    """The handoff exists (or may) but its target cannot be activated now; nothing changed.

    Args:
        handoff_id: the handoff concerned.
        reason: the full sentence shown to the user, saying what to do.
    """

    def __init__(self, handoff_id: str, reason: str) -> None:
        self.handoff_id = handoff_id
        self.from_status = None
        self.to_status = "accepted"
        self.allowed = ()
        self.reason = reason
        ThreadboundError.__init__(self, reason)


@dataclass(frozen=True, slots=True)
class Activation:
    """What an accepted handoff did: the handoff, the agent now running, its first input."""

    handoff: HandoffRecord
    agent: Agent
    submission: Submission
    input_text: str


def _name(profiles: Mapping[str, AgentProfile], agent: str) -> str:
    """The handed-over label names the sender as its profile does, else by its id."""
    return agent_display_name(profiles, agent, fallback=agent)


def handoff_input(
    tree: SessionTree, handoff: HandoffRecord, profiles: Mapping[str, AgentProfile]
) -> str:
    """The user message the target agent starts from: the handed-over artifact, labelled.

    A brief renders as its title and summary; any other artifact as its data.
    """
    header = f"Handoff from {_name(profiles, handoff.from_agent)}"
    artifact = None
    if handoff.artifact_id is not None:
        artifact = next(
            (
                found
                for e in tree.events
                if (found := e.data_as(ArtifactPayload)) is not None
                and found.artifact_id == handoff.artifact_id
            ),
            None,
        )
    if artifact is None:
        return f"{header} (no artifact was handed over)."
    data = artifact.data
    if "title" in data and "summary" in data:
        return f"{header} — {artifact.type}: {data['title']}\n\n{data['summary']}"
    body = json.dumps(data, ensure_ascii=False, indent=1)
    return f"{header} — {artifact.type}:\n{body}"


async def activate(
    *,
    runtime: SessionRuntime,
    handoffs: HandoffService,
    profiles: Mapping[str, AgentProfile],
    session_key: str,
    handoff_id: str,
    actor: str,
    before_input: BeforeInput | None = None,
) -> Activation:
    """Accept ``handoff_id`` in ``session_key`` and make its target agent run the session.

    Raises:
        HandoffError: no such handoff in the session, or it is not offered any more
            (nothing changed).
        ActivationRefused: the target agent has no profile, a turn is running, or
            the activation rule refuses the target (nothing changed, except in the
            last case, where the handoff stays accepted and the message says so).
    """
    agent = await runtime.get(session_key)
    current = movable(session_key, agent.tree.events, handoff_id, "accepted")
    profile = profiles.get(current.to_agent)
    if profile is None:
        raise ActivationRefused(
            handoff_id,
            f"handoff {handoff_id!r} targets agent {current.to_agent!r}, which has no "
            "[agents.<id>] profile; add it to config.toml or reject the handoff",
        )
    if agent.running:
        raise ActivationRefused(
            handoff_id,
            f"{_name(profiles, current.from_agent)} is still running a turn; wait for it "
            "to end (or cancel it), then accept the handoff again",
        )
    accepted = await handoffs.accept(agent.tree, handoff_id, actor=actor)
    if not may_activate(
        accepted.to_agent,
        user_startable=profile.user_startable,
        handoffs=await handoffs.list(session_key),
    ):
        raise ActivationRefused(
            handoff_id,
            f"handoff {handoff_id!r} is accepted, but agent {accepted.to_agent!r} may not be "
            "activated by it (the handoffs table does not show it accepted); "
            "HandoffService.rebuild_from_events repairs a lagging table",
        )
    await agent.append(
        AgentActivatedPayload(
            agent=accepted.to_agent,
            by=actor,
            handoff_id=accepted.id,
            artifact_id=accepted.artifact_id,
        )
    )
    new_agent = await runtime.reload(session_key)
    if before_input is not None:
        prepared = before_input(new_agent, accepted)
        if inspect.isawaitable(prepared):
            await prepared
    text = handoff_input(new_agent.tree, accepted, profiles)
    submission = await new_agent.follow_up(text, author_id=actor)
    _log.info(
        "handoff.activated",
        session_key=session_key,
        handoff_id=accepted.id,
        agent=accepted.to_agent,
        actor=actor,
    )
    return Activation(accepted, new_agent, submission, text)


async def complete_when_done(
    activation: Activation, *, handoffs: HandoffService, runtime: SessionRuntime
) -> HandoffRecord | None:
    """Mark the handoff ``completed`` once the new agent has worked through its input.

    Run in the background after :func:`activate`. A completed handoff activates
    nothing any more; the agent it brought in keeps running the session (the
    log names it). If the process stops first, the handoff stays ``accepted``.
    """
    await activation.agent.wait_idle()
    agent = await runtime.get(activation.agent.session_key)
    try:
        return await handoffs.complete(
            agent.tree, activation.handoff.id, actor=activation.handoff.to_agent
        )
    except ThreadboundError:
        _log.warning(
            "handoff.complete_failed",
            session_key=agent.session_key,
            handoff_id=activation.handoff.id,
            exc_info=True,
        )
        return None


def _answered_since_activation(tree: SessionTree, handoff_id: str) -> bool:
    """A turn ended after the ``agent.activated`` event this handoff wrote."""
    activated = False
    for event in tree.events:
        activation = event.data_as(AgentActivatedPayload)
        if activation is not None and activation.handoff_id == handoff_id:
            activated = True
        elif activated and event.data_as(TurnEndedPayload) is not None:
            return True
    return False


async def finish_accepted(
    *,
    handoffs: HandoffService,
    runtime: SessionRuntime,
    include: Callable[[str], Awaitable[bool]] | None = None,
) -> int:
    """At start-up: complete the accepted handoffs whose new agent has answered.

    A process that stopped after the new agent answered (or while it worked:
    its queued input resumes with the session) left them ``accepted``. One
    whose input never reached the new agent stays accepted. Returns how many
    were completed. ``include`` picks the sessions this process answers for
    (its guilds); a session another live process runs is left to that one.
    """
    completed = 0
    for handoff in await handoffs.accepted():
        if include is not None and not await include(handoff.session_key):
            continue
        try:
            agent = await runtime.get(handoff.session_key)
        except SessionBusy:
            continue
        await agent.wait_idle()
        agent = await runtime.get(handoff.session_key)
        if not _answered_since_activation(agent.tree, handoff.id):
            continue
        try:
            await handoffs.complete(agent.tree, handoff.id, actor=handoff.to_agent)
            completed += 1
        except ThreadboundError:
            _log.warning("handoff.complete_failed", handoff_id=handoff.id, exc_info=True)
    return completed
