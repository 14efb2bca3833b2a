"""A steer sent as a turn ends: every interleaving of its write with the turn's close.

The log below holds chosen writes until the test lets them through, so each
case fixes one order of "the steer is recorded" against "the turn is closed"
and "the loop looks for what to run next". Whatever the order, the steer must
reach the model (in the same turn or as the next one) and the agent must end
idle with both queues empty.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from core.agent import Agent, AgentSettings, ToolRegistry, TurnEnded
from core.providers.scripted import ScriptedProvider, Step
from core.sessions.events import DeliveryMode, SessionEvent
from core.sessions.log import AppendItem, SessionLog
from core.sessions.payloads import event_type_of
from core.sessions.tree import SessionTree
from core.store import Database

TIMEOUT = 5


class HeldLog(SessionLog):
    """A real session log whose writes of chosen event types wait for the test."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.reached: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.written: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._release: dict[str, asyncio.Event] = {}

    def hold(self, type_: str) -> None:
        self._release[type_] = asyncio.Event()

    def release(self, type_: str) -> None:
        self._release[type_].set()

    async def append(
        self,
        tree: SessionTree,
        event: str | BaseModel,
        payload: Any = None,
        *,
        delivery_mode: DeliveryMode | None = None,
    ) -> SessionEvent:
        type_ = event if isinstance(event, str) else event_type_of(event)
        await self._gate([type_])
        written = await super().append(tree, event, payload, delivery_mode=delivery_mode)
        self.written[type_].set()
        return written

    async def append_many(
        self, tree: SessionTree, items: Sequence[AppendItem]
    ) -> list[SessionEvent]:
        types = [item[0] for item in items]
        await self._gate(types)
        events = await super().append_many(tree, items)
        for type_ in types:
            self.written[type_].set()
        return events

    async def _gate(self, types: list[str]) -> None:
        for type_ in types:
            self.reached[type_].set()
            if type_ in self._release:
                await self._release[type_].wait()


async def wait(event: asyncio.Event) -> None:
    async with asyncio.timeout(TIMEOUT):
        await event.wait()


async def agent_on(log: HeldLog, steps: list[Step]) -> Agent:
    tree = await log.load("agent:race")
    return Agent(tree, log, ScriptedProvider(steps), ToolRegistry(), AgentSettings())


def user_messages(agent: Agent) -> list[tuple[str, str | None]]:
    return [
        (e.payload["text"], e.delivery_mode) for e in agent.tree.events if e.type == "user_message"
    ]


# The steer's write and the turn's close are both held; each order lets them through
# in its own sequence.
ORDERS = [
    "steer recorded before the turn closes",
    "steer and turn close written together",
    "steer recorded after the turn closed, before the loop looks again",
    "steer recorded while the loop waits for the entry lock",
]


@pytest.mark.parametrize("order", ORDERS)
async def test_a_steer_sent_as_the_turn_ends_always_runs(db: Database, order: str) -> None:
    """The last two orders stranded the steer in an idle agent's queue before the fix."""
    log = HeldLog(db)
    gate = asyncio.Event()
    agent = await agent_on(log, [Step(text="first answer", gate=gate), Step(text="steer answered")])
    ended = asyncio.Event()
    agent.subscribe(lambda e: ended.set() if isinstance(e, TurnEnded) else None)

    log.hold("message_queued")
    log.hold("turn_ended")
    await agent.send("start")
    steer = asyncio.ensure_future(agent.steer("one more thing"))
    await wait(log.reached["message_queued"])  # the steer's write is on its way
    gate.set()  # the model finishes its only step
    await wait(log.reached["turn_ended"])

    if order == ORDERS[0]:
        log.release("message_queued")
        await wait(log.written["message_queued"])
        log.release("turn_ended")
    elif order == ORDERS[1]:
        log.release("message_queued")
        log.release("turn_ended")
    elif order == ORDERS[2]:
        log.release("turn_ended")
        await wait(log.written["turn_ended"])
        log.release("message_queued")
    else:
        log.release("turn_ended")
        await wait(ended)  # the loop is now blocked on the lock the steer holds
        log.release("message_queued")

    async with asyncio.timeout(TIMEOUT):
        submission = await steer
        await agent.wait_idle()
    assert submission.queued
    (steered,) = [m for m in user_messages(agent) if m[0] == "one more thing"]
    assert steered[1] in ("steer", "follow_up")  # in this turn, or as the next one
    assert agent.snapshot().steering_queue == ()
    assert agent.snapshot().follow_up_queue == ()
    assert agent.running is False
    answers = [e.payload["text"] for e in agent.tree.events if e.type == "assistant_message"]
    assert answers[-1] == "steer answered"


async def test_resume_runs_a_steer_a_stopped_turn_never_took(db: Database) -> None:
    """After a restart, a steer left in the queue by the stopped process runs as a follow-up."""
    log = HeldLog(db)
    gate = asyncio.Event()
    agent = await agent_on(log, [Step(text="cut short", gate=gate)])
    await agent.send("start")
    await agent.steer("and this")
    await agent.cancel(keep_queues=True)  # the turn stops; its steer stays queued

    again = Agent(
        await log.load("agent:race"),
        log,
        ScriptedProvider([Step(text="took the steer")]),
        ToolRegistry(),
        AgentSettings(),
    )
    assert [m.text for m in again.snapshot().steering_queue] == ["and this"]
    assert await again.resume() is True
    async with asyncio.timeout(TIMEOUT):
        await again.wait_idle()
    assert ("and this", "follow_up") in user_messages(again)
    assert again.snapshot().steering_queue == ()
