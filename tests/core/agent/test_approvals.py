"""Tool calls that wait for a person: allow, deny, timeout, withdrawal, and a restart.

The agent runs over a real SQLite log with the scripted model; the approval
timeout runs on a fake clock, so the tests decide when it passes.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from core.agent import Agent, AgentSettings, ToolRegistry
from core.agent.events import ApprovalRequested, ApprovalResolved, ToolFinished
from core.clock import FakeClock
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.store import Database
from tests.fixtures.agents import GatedTools, call

TIMEOUT = 5
KEY = "agent:approvals"


@pytest.fixture
def database(db: Database) -> Database:
    """These tests run on SQLite only (the core conftest's ``db``), not on every backend."""
    return db


class Rig:
    """One agent whose ``work`` tool needs approval, and what the test watches."""

    def __init__(self, agent: Agent, provider: ScriptedProvider, gated: GatedTools) -> None:
        self.agent = agent
        self.provider = provider
        self.gated = gated
        self.events: list[object] = []
        self.requested = asyncio.Event()
        agent.subscribe(self._on_event)

    def _on_event(self, event: object) -> None:
        self.events.append(event)
        if isinstance(event, ApprovalRequested):
            self.requested.set()

    async def wait_requested(self) -> ApprovalRequested:
        async with asyncio.timeout(TIMEOUT):
            await self.requested.wait()
        self.requested.clear()
        return [e for e in self.events if isinstance(e, ApprovalRequested)][-1]

    async def idle(self) -> None:
        async with asyncio.timeout(TIMEOUT):
            await self.agent.wait_idle()

    def types(self) -> list[str]:
        return [e.type for e in self.agent.tree.events]

    def decisions(self) -> list[dict]:
        return [e.payload for e in self.agent.tree.events if e.type == "approval.decided"]

    def last_tool_message(self) -> str:
        """What the model read for the call, in the request after it."""
        messages = self.provider.calls[-1]
        return [m for m in messages if m.role == "tool"][-1].content or ""


def approval_tools(gated: GatedTools) -> ToolRegistry:
    gated.auto_release = True
    return ToolRegistry([dataclasses.replace(gated.tool(), requires_approval=True)])


async def make_rig(
    database: Database, steps: list[Step], clock: FakeClock, *, timeout_s: float = 600
) -> Rig:
    log = SessionLog(database, clock=clock)  # event times and the timeout on one clock
    tree = await log.load(KEY)
    provider = ScriptedProvider(steps)
    gated = GatedTools()
    settings = AgentSettings(approval_timeout_s=timeout_s)
    agent = Agent(tree, log, provider, approval_tools(gated), settings, clock=clock)
    return Rig(agent, provider, gated)


def one_call(call_id: str = "c1") -> list[Step]:
    return [Step(tool_calls=(call(call_id, label="x"),)), Step(text="done")]


async def test_allow_runs_the_call_and_the_model_reads_its_result(database: Database):
    rig = await make_rig(database, one_call(), FakeClock())
    await rig.agent.send("go")
    request = await rig.wait_requested()
    assert request.call.id == "c1"
    assert rig.gated.started == []

    outcome = await rig.agent.decide("c1", "allow", by_user_id="42", by_name="Alice")
    await rig.idle()

    assert outcome.recorded
    assert outcome.record is not None
    assert outcome.record.allowed
    assert rig.gated.started == ["c1"]
    assert rig.last_tool_message() == "worked on x"
    assert rig.decisions() == [
        {
            "turn_id": request.turn_id,
            "tool_call_id": "c1",
            "name": "work",
            "decision": "allow",
            "by_user_id": "42",
            "by_name": "Alice",
            "reason": None,
            "option_id": None,
        }
    ]
    resolved = [e for e in rig.events if isinstance(e, ApprovalResolved)]
    assert [(e.decision, e.by_name, e.request_id) for e in resolved] == [
        ("allow", "Alice", request.request_id)
    ]


async def test_deny_tells_the_model_who_denied_and_runs_nothing(database: Database):
    rig = await make_rig(database, one_call(), FakeClock())
    await rig.agent.send("go")
    await rig.wait_requested()

    await rig.agent.decide("c1", "deny", by_user_id="42", by_name="Alice")
    await rig.idle()

    assert rig.gated.started == []
    assert rig.last_tool_message().startswith("denied by Alice")
    finished = [e for e in rig.events if isinstance(e, ToolFinished)]
    assert finished[-1].denied
    assert finished[-1].is_error


async def test_no_answer_within_the_timeout_is_a_denial(database: Database):
    clock = FakeClock()
    rig = await make_rig(database, one_call(), clock, timeout_s=600)
    await rig.agent.send("go")
    await rig.wait_requested()
    await clock.wait_for_sleepers(1)

    await clock.advance(599)
    assert rig.decisions() == []
    await clock.advance(1)
    await rig.idle()

    assert [d["decision"] for d in rig.decisions()] == ["timeout"]
    assert rig.gated.started == []
    assert "nobody approved" in rig.last_tool_message()


async def test_a_call_decided_once_is_never_decided_again(database: Database):
    rig = await make_rig(database, one_call(), FakeClock())
    await rig.agent.send("go")
    await rig.wait_requested()

    first = await rig.agent.decide("c1", "allow", by_user_id="1", by_name="Alice")
    second = await rig.agent.decide("c1", "deny", by_user_id="2", by_name="Bob")
    await rig.idle()

    assert first.recorded
    assert not second.recorded
    assert second.record is not None
    assert second.record.by_name == "Alice"
    assert rig.gated.started == ["c1"]
    assert len(rig.decisions()) == 1


async def test_allow_for_the_session_covers_later_calls_of_that_tool(database: Database):
    steps = [*one_call("c1"), *one_call("c2")]
    rig = await make_rig(database, steps, FakeClock())
    await rig.agent.send("go")
    await rig.wait_requested()
    await rig.agent.decide("c1", "allow_session", by_user_id="1", by_name="Alice")
    await rig.idle()

    await rig.agent.send("again")
    await rig.idle()

    assert rig.gated.started == ["c1", "c2"]
    assert rig.types().count("approval.requested") == 1


async def test_a_steer_withdraws_the_request_and_reaches_the_model(database: Database):
    steps = [
        Step(tool_calls=(call("c1", label="x"), call("c2", label="y"))),
        Step(text="redirected"),
    ]
    rig = await make_rig(database, steps, FakeClock())
    await rig.agent.send("go")
    await rig.wait_requested()

    await rig.agent.steer("stop, do something else")
    await rig.idle()

    assert rig.gated.started == []
    assert [(d["decision"], d["reason"]) for d in rig.decisions()] == [("withdrawn", "steer")]
    messages = rig.provider.calls[-1]
    tool_texts = [m.content for m in messages if m.role == "tool"]
    assert "withdrawn" in (tool_texts[0] or "")
    assert "superseded" in (tool_texts[1] or "")
    assert "stop, do something else" in (messages[-1].content or "")


async def test_cancel_withdraws_the_request(database: Database):
    rig = await make_rig(database, one_call(), FakeClock())
    await rig.agent.send("go")
    request = await rig.wait_requested()

    await rig.agent.cancel()

    assert [(d["decision"], d["reason"]) for d in rig.decisions()] == [("withdrawn", "cancel")]
    assert rig.types()[-1] == "turn_cancelled"
    assert rig.agent.tree.pending_approvals == ()
    resolved = [e for e in rig.events if isinstance(e, ApprovalResolved)]
    assert [(e.request_id, e.decision) for e in resolved] == [(request.request_id, "withdrawn")]
    late = await rig.agent.decide("c1", "allow", by_user_id="1", by_name="Alice")
    assert not late.recorded
    assert rig.gated.started == []


class Factory:
    """Builds agents the way the bot does, over a provider shared across 'processes'."""

    def __init__(self, provider: ScriptedProvider, gated: GatedTools, clock: FakeClock) -> None:
        self.provider = provider
        self.gated = gated
        self.clock = clock
        self.built: list[Agent] = []

    def __call__(self, tree, log, on_crash) -> Agent:
        agent = Agent(
            tree,
            log,
            self.provider,
            approval_tools(self.gated),
            AgentSettings(approval_timeout_s=600),
            on_crash=on_crash,
            clock=self.clock,
        )
        self.built.append(agent)
        return agent


async def test_a_restart_while_pending_keeps_the_request_and_its_decision_runs_once(
    database: Database,
):
    clock = FakeClock()
    provider = ScriptedProvider(one_call())
    gated = GatedTools()
    first = SessionRuntime(
        SessionLog(database, clock=clock), Factory(provider, gated, clock), clock=clock
    )
    agent = await first.get(KEY)
    requested = asyncio.Event()
    agent.subscribe(lambda e: requested.set() if isinstance(e, ApprovalRequested) else None)
    await agent.send("go")
    async with asyncio.timeout(TIMEOUT):
        await requested.wait()
    # The process dies: its task ends without writing anything.
    agent._task.cancel()
    await asyncio.gather(agent._task, return_exceptions=True)

    log = SessionLog(database, clock=clock)
    second = SessionRuntime(log, Factory(provider, gated, clock), clock=clock)
    assert await log.awaiting_approval() == [KEY]
    assert await second.resume_waiting() == 1
    revived = second.peek(KEY)
    assert revived is not None
    assert revived.running
    pending = revived.tree.pending_approvals
    assert [p.tool_call_id for p in pending] == ["c1"]
    assert await log.session_of(pending[0].node_id) == KEY

    await clock.wait_for_sleepers(1)
    outcome = await revived.decide("c1", "allow", by_user_id="1", by_name="Alice")
    async with asyncio.timeout(TIMEOUT):
        await revived.wait_idle()

    assert outcome.recorded
    assert gated.started == ["c1"]
    types = [e.type for e in revived.tree.events]
    assert "turn_interrupted" not in types
    assert types[-1] == "turn_ended"
    assert await log.awaiting_approval() == []


async def test_the_timeout_counts_from_the_request_across_a_restart(database: Database):
    clock = FakeClock()
    provider = ScriptedProvider(one_call())
    gated = GatedTools()
    first = SessionRuntime(
        SessionLog(database, clock=clock), Factory(provider, gated, clock), clock=clock
    )
    agent = await first.get(KEY)
    await agent.send("go")
    await clock.wait_for_sleepers(1)
    agent._task.cancel()
    await asyncio.gather(agent._task, return_exceptions=True)

    await clock.advance(500)  # down for 500 of the 600 seconds
    second = SessionRuntime(
        SessionLog(database, clock=clock), Factory(provider, gated, clock), clock=clock
    )
    await second.resume_waiting()
    revived = second.peek(KEY)
    assert revived is not None
    await clock.wait_for_sleepers(1)
    await clock.advance(100)
    async with asyncio.timeout(TIMEOUT):
        await revived.wait_idle()

    decided = [e.payload for e in revived.tree.events if e.type == "approval.decided"]
    assert [d["decision"] for d in decided] == ["timeout"]
    assert gated.started == []
