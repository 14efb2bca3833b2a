"""Messages in a bound conversation: steer by default, '>>' follows up, unbound ignored."""

from __future__ import annotations

import pytest

from core.agent import Agent, ToolRegistry
from core.bindings.service import SessionBindingService
from core.clock import FakeClock
from core.inbound import InboundRouter, parse_mode
from core.providers.scripted import ScriptedProvider, Step
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.store import Database
from tests.fixtures.agents import GatedTools, tools_step
from tests.fixtures.bindings import conv


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("go left", ("steer", "go left")),
        (">> then summarise", ("follow_up", "then summarise")),
        ("  >>x", ("follow_up", "x")),
        ("a >> b", ("steer", "a >> b")),
    ],
)
def test_parse_mode(text: str, expected: tuple[str, str]) -> None:
    """Only a leading '>>' asks for a follow-up, and it is removed from the text."""
    assert parse_mode(text) == expected


async def setup(db: Database, steps: list[Step]):
    clock = FakeClock()
    bindings = SessionBindingService(db, clock=clock)
    await bindings.start()
    tools = GatedTools()
    provider = ScriptedProvider(steps)

    def build(tree, log, on_crash):
        return Agent(tree, log, provider, ToolRegistry([tools.tool()]), on_crash=on_crash)

    runtime = SessionRuntime(SessionLog(db), build, clock=clock)
    return bindings, runtime, tools, clock


async def test_running_agent_is_steered_then_followed_up(db: Database) -> None:
    """While the agent works, a plain message steers and a '>>' message queues."""
    bindings, runtime, tools, clock = await setup(
        db, [tools_step("a"), Step(text="steered"), Step(text="followed")]
    )
    record = await bindings.bind("agent:1", "session", conv("t1", "100"))
    router = InboundRouter(bindings, runtime)

    first = await router.handle(conv("t1", "100"), "start working", author_id="u1")
    assert first is not None
    assert first.submission.delivered == "normal"
    await tools.wait_started("a")
    await clock.advance(10)
    steer = await router.handle(conv("t1"), "focus on x", author_id="u1")
    follow = await router.handle(conv("t1"), ">> then write it up", author_id="u2")
    assert (steer.mode, steer.submission.queued) == ("steer", True)
    assert (follow.mode, follow.submission.queued) == ("follow_up", True)
    assert bindings.get(record.binding_id).last_activity_at == clock.now()

    tools.release("a")
    agent = await runtime.get("agent:1")
    await agent.wait_idle()
    modes = [
        (e.payload["text"], e.delivery_mode) for e in agent.tree.events if e.type == "user_message"
    ]
    assert modes == [
        ("start working", "normal"),
        ("focus on x", "steer"),
        ("then write it up", "follow_up"),
    ]


async def test_unbound_conversation_is_ignored(db: Database) -> None:
    """A message where nothing is bound is not ours: no agent is started."""
    bindings, runtime, _, _ = await setup(db, [])
    assert await InboundRouter(bindings, runtime).handle(conv("nowhere"), "hello") is None
    assert runtime.resident() == []


async def test_binding_can_default_to_follow_up(db: Database) -> None:
    """A thread configured for follow-up queues plain messages while the agent runs."""
    bindings, runtime, tools, _ = await setup(db, [tools_step("a"), Step(text="t"), Step(text="f")])
    await bindings.bind("agent:1", "session", conv("t1"), metadata={"default_mode": "follow_up"})
    router = InboundRouter(bindings, runtime)
    await router.handle(conv("t1"), "go")
    await tools.wait_started("a")
    result = await router.handle(conv("t1"), "and then this")
    assert result.mode == "follow_up"
    tools.release("a")
    await (await runtime.get("agent:1")).wait_idle()


async def test_an_explicit_mode_wins_and_the_text_is_kept(db: Database) -> None:
    """/steer and /followup name the mode: no '>>' parsing, no binding default."""
    bindings, runtime, tools, _ = await setup(db, [tools_step("a"), Step(text="t"), Step(text="f")])
    await bindings.bind("agent:1", "session", conv("t1"), metadata={"default_mode": "follow_up"})
    router = InboundRouter(bindings, runtime)
    await router.handle(conv("t1"), "go")
    await tools.wait_started("a")
    steer = await router.handle(conv("t1"), ">> literally this", mode="steer")
    assert (steer.mode, steer.submission.queued) == ("steer", True)
    tools.release("a")
    agent = await runtime.get("agent:1")
    await agent.wait_idle()
    steered = [e.payload["text"] for e in agent.tree.events if e.delivery_mode == "steer"]
    assert steered == [">> literally this"]
