"""Messages people write in a bound conversation, turned into agent input.

A message in a bound thread needs no mention: the binding says which session
it is for. While that session's agent runs, a plain message steers it and a
message starting with ``>>`` is queued as a follow-up (a binding can make
follow-up the default (``/session mode``: its metadata's ``default_mode``); an idle agent
simply starts a turn. Each message also counts as activity on the binding.
The result says which mode was applied, so the channel can show it (a
reaction, the status line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.agent.agent import Agent, Submission
from core.attachments import AttachmentRecord
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.sessions.payloads import SteerOrFollowUp as Mode

__all__ = ["FOLLOW_UP_PREFIX", "InboundResult", "InboundRouter", "Route", "parse_mode"]

FOLLOW_UP_PREFIX = ">>"


class AgentSource(Protocol):
    async def get(self, session_key: str, /) -> Agent: ...


@dataclass(frozen=True, slots=True)
class Route:
    """Where a conversation's messages go now: its binding and the session's agent."""

    binding: SessionBindingRecord
    agent: Agent


@dataclass(frozen=True, slots=True)
class InboundResult:
    binding: SessionBindingRecord
    mode: Mode
    submission: Submission


def parse_mode(text: str, default: Mode = "steer") -> tuple[Mode, str]:
    """``(mode, text)``: a ``>>`` prefix asks for a follow-up and is removed."""
    stripped = text.lstrip()
    if stripped.startswith(FOLLOW_UP_PREFIX):
        return "follow_up", stripped[len(FOLLOW_UP_PREFIX) :].lstrip()
    return default, text


class InboundRouter:
    """Routes a message in a conversation to the session bound there, if any."""

    def __init__(self, bindings: SessionBindingService, agents: AgentSource) -> None:
        self._bindings = bindings
        self._agents = agents

    async def handle(
        self,
        conversation: ConversationRef,
        text: str,
        *,
        author_id: str | None = None,
        author_name: str | None = None,
        mode: Mode | None = None,
        attachments: Sequence[AttachmentRecord] = (),
        inbound_id: str | None = None,
    ) -> InboundResult | None:
        """Deliver ``text``; None when the conversation is not bound (not ours to answer).

        ``mode`` is what an explicit command asks for (``/steer``, ``/followup``);
        without it the text says (a ``>>`` prefix) or the binding's default does.
        Whoever shows the agent in the conversation is attached by the runtime
        when the agent starts, not here.
        """
        route = await self.route(conversation)
        if route is None:
            return None
        return await self.submit(
            route,
            text,
            author_id=author_id,
            author_name=author_name,
            mode=mode,
            attachments=attachments,
            inbound_id=inbound_id,
        )

    async def route(self, conversation: ConversationRef) -> Route | None:
        """The conversation's binding (its activity noted) and its session's agent, started
        if need be; None when it is not bound.

        Raises:
            SessionBusy: another live bot process runs the session.
        """
        binding = self._bindings.active_for_conversation(conversation)
        if binding is None:
            return None
        self._bindings.touch(binding.binding_id)
        return Route(binding, await self._agents.get(binding.target_session_key))

    async def submit(
        self,
        route: Route,
        text: str,
        *,
        author_id: str | None = None,
        author_name: str | None = None,
        mode: Mode | None = None,
        attachments: Sequence[AttachmentRecord] = (),
        inbound_id: str | None = None,
    ) -> InboundResult:
        """Give ``text`` to the routed agent: steer or follow-up, as asked or as it says."""
        if mode is None:
            default: Mode = route.binding.meta.default_mode or "steer"
            mode, text = parse_mode(text, default)
        entry = route.agent.follow_up if mode == "follow_up" else route.agent.steer
        submission = await entry(
            text,
            author_id=author_id,
            author_name=author_name,
            attachments=attachments,
            inbound_id=inbound_id,
        )
        return InboundResult(route.binding, mode, submission)
