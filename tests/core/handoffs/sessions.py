"""A session log written the way the agent loop, a brief and a handoff write it, step by step."""

from __future__ import annotations

import uuid
from typing import Literal

from core.agent.assignment import AgentActivatedPayload
from core.handoffs.activation import HandoffStatus
from core.handoffs.attempts import BriefRequestedPayload
from core.handoffs.service import EVENT_TYPES
from core.sessions.events import SessionEvent
from core.sessions.log import SessionLog
from core.sessions.payloads import (
    AssistantMessagePayload,
    TurnCancelledPayload,
    TurnEndedPayload,
    TurnInterruptedPayload,
    TurnStartedPayload,
    UserMessagePayload,
)
from core.sessions.tree import SessionTree

Ending = Literal[
    "completed", "error", "max_steps", "budget", "rejected", "cancelled", "interrupted", "open"
]


class Written:
    """One session's log, appended to through a real :class:`SessionLog`."""

    def __init__(self, log: SessionLog, tree: SessionTree) -> None:
        self.log = log
        self.tree = tree

    async def activated(self, agent: str) -> SessionEvent:
        return await self.log.append(self.tree, AgentActivatedPayload(agent=agent, by="alice"))

    async def turn(
        self, said: str = "hello", answer: str = "an answer", *, ending: Ending = "completed"
    ) -> SessionEvent | None:
        """A turn: the person's message, the agent's words, and how it ended (its event;
        None when it is left running)."""
        turn_id = uuid.uuid4().hex
        log, tree = self.log, self.tree
        await log.append(tree, TurnStartedPayload(turn_id=turn_id, trigger="normal"))
        await log.append(
            tree, UserMessagePayload(text=said, author_id="alice"), delivery_mode="normal"
        )
        if answer:
            await log.append(tree, AssistantMessagePayload(turn_id=turn_id, text=answer))
        if ending == "open":
            return None
        if ending == "cancelled":
            return await log.append(tree, TurnCancelledPayload(turn_id=turn_id))
        if ending == "interrupted":
            return await log.append(tree, TurnInterruptedPayload(turn_id=turn_id))
        error = "the model is away" if ending == "error" else None
        rejected = {"by_name": "alice", "option": "Reject"} if ending == "rejected" else {}
        return await log.append(
            tree,
            TurnEndedPayload(turn_id=turn_id, reason=ending, steps=1, error=error, **rejected),
        )

    async def requested(self, from_agent: str = "scout") -> SessionEvent:
        payload = BriefRequestedPayload(from_agent=from_agent, to_agent="writer", actor="alice")
        return await self.log.append(self.tree, payload)

    async def handoff(
        self, status: HandoffStatus, handoff_id: str, from_agent: str = "scout"
    ) -> None:
        payload = {
            "handoff_id": handoff_id,
            "from_agent": from_agent,
            "to_agent": "writer",
            "artifact_id": None,
            "actor": "alice",
        }
        await self.log.append(self.tree, EVENT_TYPES[status], payload)
