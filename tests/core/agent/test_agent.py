"""Agent behaviour with the scripted provider and gated tools: events, not sleeps."""

from __future__ import annotations

import asyncio

import pytest
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from core.agent import (
    Agent,
    AgentBusy,
    AgentSettings,
    StepInfo,
    StopPolicy,
    TextDelta,
    Tool,
    ToolContext,
    ToolRegistry,
)
from core.agent.messages import SKIPPED_RESULT, render_steering
from core.errors import ProviderError
from core.logging import get_logger
from core.providers.scripted import ScriptedProvider, Step
from core.providers.types import Usage
from core.sessions.log import SessionLog
from core.store import Database
from tests.fixtures.agents import Harness, WorkArgs, make_harness, tools_step


def user_texts(h: Harness) -> list[tuple[str, str | None, str]]:
    return [
        (e.payload["text"], e.delivery_mode, e.payload["requested_mode"])
        for e in h.of_type("user_message")
    ]


class TestIdle:
    async def test_send_runs_a_turn(self, db: Database) -> None:
        """An idle send starts a turn that answers and ends, all in the log."""
        h = await make_harness(db, [Step(text="hello there")])
        submission = await h.agent.send("hi")
        await h.idle()
        assert (submission.delivered, submission.queued) == ("normal", False)
        assert h.types() == [
            "turn_started",
            "user_message",
            "assistant_message",
            "usage",
            "turn_ended",
        ]
        assert h.of_type("turn_ended")[0].payload["reason"] == "completed"
        assert h.of_type("assistant_message")[0].payload["text"] == "hello there"
        (usage,) = h.of_type("usage")  # the scripted model reports none: the bot estimates
        assert usage.payload["estimated"] is True
        assert usage.payload["completion_tokens"] == 3  # "hello there": 11 chars / 4

    @pytest.mark.parametrize("entry", ["steer", "follow_up"])
    async def test_steer_and_follow_up_fall_back_to_send(self, db: Database, entry: str) -> None:
        """Idle, steer and follow_up start a turn; the log keeps what was asked for."""
        h = await make_harness(db, [Step(text="ok")])
        submission = await getattr(h.agent, entry)("do it")
        await h.idle()
        assert (submission.requested, submission.delivered) == (entry, "normal")
        assert user_texts(h) == [("do it", "normal", entry)]

    async def test_send_while_running_names_the_fix(self, db: Database) -> None:
        """send during a turn is refused with a message pointing at steer and follow_up."""
        h = await make_harness(db, [tools_step("a"), Step(text="done")])
        await h.agent.send("go")
        await h.tools.wait_started("a")
        with pytest.raises(AgentBusy, match=r"use steer\(\).*or follow_up\(\)"):
            await h.agent.send("again")
        h.tools.release("a")
        await h.idle()


class TestSteer:
    async def test_steer_during_tool_batch_skips_unstarted_calls(self, db: Database) -> None:
        """The running call finishes; the calls not yet started are skipped with results."""
        h = await make_harness(db, [tools_step("a", "b", "c"), Step(text="new course")])
        await h.agent.send("work through a, b, c")
        await h.tools.wait_started("a")
        queued = await h.agent.steer("stop, do d instead")
        assert queued.queued
        h.tools.release("a")
        await h.idle()

        assert h.tools.started == ["a"]
        assert h.tools.finished == ["a"]
        results = {e.payload["tool_call_id"]: e.payload for e in h.of_type("tool_result")}
        assert results["a"]["skipped"] is False
        assert [results[c]["content"] for c in ("b", "c")] == [SKIPPED_RESULT] * 2
        assert all(results[c]["skipped"] for c in ("b", "c"))
        interruption = h.of_type("steer_interruption")[0].payload
        assert interruption["skipped_tool_call_ids"] == ["b", "c"]
        assert interruption["steering_item_ids"] == [queued.queued_item_id]
        assert user_texts(h)[-1] == ("stop, do d instead", "steer", "steer")

        second_call = h.provider.calls[1]
        assert second_call[-1].content == render_steering("stop, do d instead")
        assert [m.role for m in second_call[-5:]] == ["assistant", "tool", "tool", "tool", "user"]
        snapshot = h.agent.snapshot()
        assert tuple(snapshot.last_interruption.skipped_tool_call_ids) == ("b", "c")
        assert snapshot.steering_queue == ()

    async def test_steer_without_skipping_runs_every_call(self, db: Database) -> None:
        """With skipping off, the batch completes and the steer is injected after it."""
        settings = AgentSettings(steer_skips_pending_tools=False)
        h = await make_harness(db, [tools_step("a", "b"), Step(text="ok")], settings=settings)
        await h.agent.send("go")
        await h.tools.wait_started("a")
        await h.agent.steer("also consider x")
        h.tools.release("a")
        await h.tools.wait_started("b")
        h.tools.release("b")
        await h.idle()
        assert h.tools.finished == ["a", "b"]
        assert h.of_type("steer_interruption") == []
        assert user_texts(h)[-1] == ("also consider x", "steer", "steer")

    async def test_steer_during_streaming_lets_stream_finish(self, db: Database) -> None:
        """A steer while text streams waits for the stream, then the model is called again."""
        gate = asyncio.Event()
        h = await make_harness(
            db, [Step(text="abcdef", chunks=3, gate=gate), Step(text="steered answer")]
        )
        first_delta = asyncio.Event()
        h.agent.subscribe(lambda e: first_delta.set() if isinstance(e, TextDelta) else None)
        await h.agent.send("write")
        async with asyncio.timeout(5):
            await first_delta.wait()
        await h.agent.steer("shorter please")
        gate.set()
        await h.idle()
        texts = [e.payload["text"] for e in h.of_type("assistant_message")]
        assert texts == ["abcdef", "steered answer"]
        assert h.of_type("steer_interruption") == []  # nothing was skipped
        assert h.provider.calls[1][-1].content == render_steering("shorter please")
        assert len(h.of_type("turn_started")) == 1  # one turn, two steps

    async def test_leftover_steering_becomes_follow_up(self, db: Database) -> None:
        """Steering that no safe point took (the step failed) runs as the next follow-up."""
        gate = asyncio.Event()
        h = await make_harness(
            db,
            [Step(gate=gate, error=ProviderError("model went away")), Step(text="handled")],
        )
        await h.agent.send("first")
        await h.provider.wait_calls(1)
        await h.agent.steer("late steer")
        gate.set()
        await h.idle()
        ended = [e.payload["reason"] for e in h.of_type("turn_ended")]
        assert ended == ["error", "completed"]
        assert h.of_type("queue_moved")[0].payload["to_mode"] == "follow_up"
        assert user_texts(h)[-1] == ("late steer", "follow_up", "follow_up")


class TestFollowUp:
    async def test_one_at_a_time(self, db: Database) -> None:
        """Each queued follow-up gets its own turn, in order."""
        h = await make_harness(
            db, [tools_step("a"), Step(text="t1"), Step(text="f1 done"), Step(text="f2 done")]
        )
        await h.agent.send("start")
        await h.tools.wait_started("a")
        await h.agent.follow_up("f1")
        await h.agent.follow_up("f2")
        h.tools.release("a")
        await h.idle()
        assert [t for t, *_ in user_texts(h)] == ["start", "f1", "f2"]
        assert len(h.of_type("turn_started")) == 3
        assert [e.payload["trigger"] for e in h.of_type("turn_started")] == [
            "normal",
            "follow_up",
            "follow_up",
        ]
        assert h.agent.snapshot().follow_up_queue == ()

    async def test_all_mode_delivers_together(self, db: Database) -> None:
        """In "all" mode the queued follow-ups open one turn together."""
        settings = AgentSettings(follow_up_mode="all")
        h = await make_harness(
            db, [tools_step("a"), Step(text="t1"), Step(text="both done")], settings=settings
        )
        await h.agent.send("start")
        await h.tools.wait_started("a")
        await h.agent.follow_up("f1")
        await h.agent.follow_up("f2")
        h.tools.release("a")
        await h.idle()
        assert len(h.of_type("turn_started")) == 2
        assert h.provider.calls[-1][-2].content == "f1"
        assert h.provider.calls[-1][-1].content == "f2"

    async def test_next_turn_starts_after_turn_end_is_written(self, db: Database) -> None:
        """The follow-up's turn_started comes after the previous turn_ended in the log."""
        h = await make_harness(db, [tools_step("a"), Step(text="t1"), Step(text="f1 done")])
        await h.agent.send("start")
        await h.tools.wait_started("a")
        await h.agent.follow_up("f1")
        h.tools.release("a")
        await h.idle()
        kinds = [e.type for e in h.tree.events if e.type in ("turn_started", "turn_ended")]
        assert kinds == ["turn_started", "turn_ended", "turn_started", "turn_ended"]


class TestCancel:
    async def test_cancel_clears_queues_and_returns_them(self, db: Database) -> None:
        """Cancel stops the tool, closes its call, clears both queues, returns what it dropped."""
        h = await make_harness(db, [tools_step("a", "b")])
        await h.agent.send("go")
        await h.tools.wait_started("a")
        await h.agent.steer("s1")
        await h.agent.follow_up("f1")
        dropped = await h.agent.cancel()
        await h.idle()
        assert [m.text for m in dropped] == ["s1", "f1"]
        assert h.tools.cancelled == ["a"]
        snapshot = h.agent.snapshot()
        assert (snapshot.steering_queue, snapshot.follow_up_queue, snapshot.running) == (
            (),
            (),
            False,
        )
        cancelled = h.of_type("turn_cancelled")[0].payload
        assert len(cancelled["dropped_item_ids"]) == 2
        closed = {e.payload["tool_call_id"] for e in h.of_type("tool_result")}
        assert closed == {"a", "b"}  # the history stays valid for the provider
        assert len(h.provider.calls) == 1

    async def test_cancel_keep_queues_then_resume(self, db: Database) -> None:
        """keep_queues leaves the follow-up queued; resume() runs it."""
        h = await make_harness(db, [tools_step("a"), Step(text="f1 done")])
        await h.agent.send("go")
        await h.tools.wait_started("a")
        await h.agent.follow_up("f1")
        dropped = await h.agent.cancel(keep_queues=True)
        assert dropped == []
        assert [m.text for m in h.agent.snapshot().follow_up_queue] == ["f1"]
        assert await h.agent.resume() is True
        await h.idle()
        assert user_texts(h)[-1] == ("f1", "follow_up", "follow_up")

    async def test_cancel_idle_is_a_no_op(self, db: Database) -> None:
        """Cancelling an idle agent with empty queues records nothing."""
        h = await make_harness(db, [])
        assert await h.agent.cancel() == []
        assert h.types() == []


class TestPolicies:
    async def test_continuation_hook_is_replaceable(self, db: Database) -> None:
        """A hook can keep the turn going without tool calls."""
        seen: list[StepInfo] = []

        def twice(step: StepInfo) -> bool:
            seen.append(step)
            return step.step < 2

        h = await make_harness(
            db, [Step(text="one"), Step(text="two")], settings=AgentSettings(should_continue=twice)
        )
        await h.agent.send("go")
        await h.idle()
        assert [s.step for s in seen] == [1, 2]
        assert len(h.of_type("assistant_message")) == 2

    async def test_max_steps_stops_the_turn(self, db: Database) -> None:
        """The stop policy ends a turn that keeps asking for tools."""
        settings = AgentSettings(stop_policy=StopPolicy(max_steps_per_turn=2))
        h = await make_harness(db, [tools_step("a"), tools_step("b")], settings=settings)
        h.tools.auto_release = True
        await h.agent.send("loop")
        await h.idle()
        ended = h.of_type("turn_ended")[0].payload
        assert (ended["reason"], ended["steps"]) == ("max_steps", 2)

    async def test_budget_stop_is_recorded(self, db: Database) -> None:
        """Usage is metered from the provider; crossing the budget stops with an event."""
        usage = Usage(prompt_tokens=60, completion_tokens=40)
        settings = AgentSettings(stop_policy=StopPolicy(max_total_tokens=150))
        h = await make_harness(
            db, [tools_step("a", usage=usage), tools_step("b", usage=usage)], settings=settings
        )
        h.tools.auto_release = True
        await h.agent.send("spend")
        await h.idle()
        stop = h.of_type("budget_stop")[0].payload
        assert (stop["limit"], stop["used"]) == ("max_total_tokens=150", 200)
        assert h.of_type("turn_ended")[0].payload["reason"] == "budget"
        assert len(h.of_type("usage")) == 2

    async def test_provider_error_ends_turn_in_band(self, db: Database) -> None:
        """A model failure ends the turn with reason error; the agent stays usable."""
        h = await make_harness(db, [Step(error=ProviderError("rate limited")), Step(text="ok")])
        await h.agent.send("one")
        await h.idle()
        await h.agent.send("two")
        await h.idle()
        reasons = [(e.payload["reason"], e.payload["error"]) for e in h.of_type("turn_ended")]
        assert reasons == [("error", "rate limited"), ("completed", None)]


def test_settings_from_config() -> None:
    """The [agent] table becomes loop settings; 0 budgets mean no limit."""
    from core.config import parse_config

    config = parse_config(
        {"agent": {"follow_up_mode": "all", "max_steps_per_turn": 7, "max_cost_usd": 2.5}}, env={}
    )
    settings = AgentSettings.from_config(config.agent, system_prompt="hi")
    assert (settings.follow_up_mode, settings.system_prompt) == ("all", "hi")
    assert settings.stop_policy == StopPolicy(
        max_steps_per_turn=7, max_total_tokens=None, max_cost_usd=2.5
    )


async def test_lines_logged_during_a_turn_carry_the_session_key(db: Database) -> None:
    """The agent's task runs with the session key bound: a tool's log line names it."""

    async def note(_args: WorkArgs, _context: ToolContext) -> str:
        get_logger("tool").info("tool.ran")
        return "noted"

    log = SessionLog(db)
    agent = Agent(
        await log.load("agent:ctx"),
        log,
        ScriptedProvider([tools_step("a"), Step(text="done")]),
        ToolRegistry([Tool("work", "Take a note.", WorkArgs, note)]),
    )
    with capture_logs(processors=[merge_contextvars]) as logs:
        await agent.send("go")
        async with asyncio.timeout(10):
            await agent.wait_idle()
    (line,) = [e for e in logs if e["event"] == "tool.ran"]
    assert line["session_key"] == "agent:ctx"
