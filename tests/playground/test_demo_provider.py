"""The demo model: a labelled, deterministic script driven by the conversation alone."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from core.agent import Agent, AgentSettings, ToolRegistry
from core.agent.messages import render_steering
from core.agent.usage import usage_text
from core.providers.demo import LABEL, DemoProvider, plan_reply
from core.providers.types import (
    ChatMessage,
    ImagePart,
    StreamDone,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
)
from core.sessions.log import SessionLog
from tests.fixtures.agents import sqlite_database

SLEEP = ToolSpec(name="sleep", description="wait", parameters={"type": "object"})


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def step(number: int, text: str = "working") -> list[ChatMessage]:
    """An assistant step that called sleep, and its tool result."""
    call = ToolCall(id=f"c{number}", name="sleep", arguments='{"seconds": 1}')
    return [
        ChatMessage(role="assistant", content=text, tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id=f"c{number}", name="sleep", content="slept"),
    ]


async def play(provider: DemoProvider, messages: list[ChatMessage], tools=(SLEEP,)) -> tuple:
    events = [e async for e in provider.stream(messages, tools=tools)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert isinstance(events[-1], StreamDone)
    return text, calls, events


class TestPlan:
    def test_first_step_names_the_task_and_sleeps(self) -> None:
        plan = plan_reply([user("map the moon")], steps=3, can_sleep=True)
        assert plan.sleep
        assert plan.step == 1
        assert plan.text.startswith(LABEL)
        assert "“map the moon”" in plan.text
        assert "Step 1/3" in plan.text

    def test_a_turn_after_one_a_restart_cut_off_starts_at_step_one(self) -> None:
        """The cut-off turn has no final answer; its steps are not the next turn's."""
        cut_off = [user("write the brief"), *step(1), *step(2)]
        plan = plan_reply([*cut_off, user("hello again")], steps=3, can_sleep=True)
        assert plan.step == 1
        assert "Step 1/3" in plan.text
        assert "“hello again”" in plan.text

    def test_after_all_steps_the_final_answer_quotes_the_task(self) -> None:
        messages = [user("map the moon"), *step(1), *step(2)]
        plan = plan_reply(messages, steps=2, can_sleep=True)
        assert not plan.sleep
        assert plan.text.startswith(f"{LABEL} Final answer for “map the moon”")

    def test_a_steer_changes_course_and_shows_in_the_final_answer(self) -> None:
        messages = [user("map the moon"), *step(1), user(render_steering("map Mars instead"))]
        plan = plan_reply(messages, steps=2, can_sleep=True)
        assert plan.sleep
        assert plan.step == 2
        assert "changing course to “map Mars instead”" in plan.text
        final = plan_reply([*messages, *step(2)], steps=2, can_sleep=True)
        assert "as you steered: “map Mars instead”" in final.text
        assert "Final answer for “map the moon”" in final.text

    def test_a_follow_up_starts_a_new_turn_about_it(self) -> None:
        first = [user("map the moon"), *step(1), ChatMessage(role="assistant", content="done")]
        plan = plan_reply([*first, user("now the sun")], steps=2, can_sleep=True)
        assert plan.step == 1
        assert "“now the sun”" in plan.text

    def test_without_the_sleep_tool_it_answers_at_once(self) -> None:
        plan = plan_reply([user("x")], steps=3, can_sleep=False)
        assert not plan.sleep
        assert "Final answer" in plan.text

    def test_long_messages_are_shortened_to_one_line(self) -> None:
        plan = plan_reply([user("word\n" * 100)], steps=1, can_sleep=True)
        assert "\n" not in plan.text
        assert "…”" in plan.text


class TestStream:
    async def test_streams_small_chunks_then_calls_sleep(self) -> None:
        provider = DemoProvider(sleep_seconds=0.25, steps=2, chunk_chars=5, chunk_delay=0)
        text, calls, events = await play(provider, [user("map the moon")])
        chunks = [e for e in events if isinstance(e, TextDelta)]
        assert len(chunks) > 3
        assert all(len(c.text) <= 5 for c in chunks)
        assert text == plan_reply([user("map the moon")], steps=2, can_sleep=True).text
        (call,) = calls
        assert call.name == "sleep"
        assert json.loads(call.arguments) == {"seconds": 0.25}
        assert events[-1].finish_reason == "tool_calls"

    async def test_final_answer_stops(self) -> None:
        provider = DemoProvider(steps=1, chunk_delay=0)
        text, calls, events = await play(provider, [user("x"), *step(1)])
        assert calls == []
        assert events[-1].finish_reason == "stop"
        assert text.startswith(f"{LABEL} Final answer")

    async def test_same_conversation_same_answer(self) -> None:
        provider = DemoProvider(steps=2, chunk_delay=0)
        first, _, _ = await play(provider, [user("x"), *step(1)])
        second, _, _ = await play(provider, [user("x"), *step(1)])
        assert first == second

    @pytest.mark.parametrize("kwargs", [{"steps": 0}, {"sleep_seconds": 0}])
    def test_bad_settings_are_refused(self, kwargs: dict) -> None:
        with pytest.raises(ValueError, match="must be"):
            DemoProvider(**kwargs)


class TestDemoTools:
    """With the demo MCP server offered, the first step calls one of its tools."""

    DICE = ToolSpec(name="demo__roll_dice", description="roll", parameters={"type": "object"})
    NOTE = ToolSpec(name="demo__write_note", description="note", parameters={"type": "object"})

    async def test_the_first_step_rolls_a_die(self) -> None:
        provider = DemoProvider(steps=2, chunk_delay=0)
        text, calls, _ = await play(provider, [user("map the moon")], (SLEEP, self.DICE, self.NOTE))
        (call,) = calls
        assert (call.name, json.loads(call.arguments)) == ("demo__roll_dice", {"sides": 20})
        assert text.startswith(LABEL)

    async def test_a_task_about_a_note_writes_one_which_needs_approval(self) -> None:
        provider = DemoProvider(steps=2, chunk_delay=0)
        tools = (SLEEP, self.DICE, self.NOTE)
        _, calls, _ = await play(provider, [user("take a note: buy milk")], tools)
        (call,) = calls
        assert call.name == "demo__write_note"
        assert json.loads(call.arguments) == {"text": "take a note: buy milk"}

    async def test_later_steps_sleep_as_before(self) -> None:
        provider = DemoProvider(steps=2, chunk_delay=0)
        dice = ToolCall(id="c1", name="demo__roll_dice", arguments="{}")
        first = [
            ChatMessage(role="assistant", content="rolling", tool_calls=(dice,)),
            ChatMessage(role="tool", tool_call_id="c1", name="demo__roll_dice", content="7"),
        ]
        _, calls, _ = await play(provider, [user("x"), *first], (SLEEP, self.DICE))
        assert [c.name for c in calls] == ["sleep"]


def test_the_final_answer_names_the_files_it_was_given() -> None:
    """Attachments as the loop renders them: a text file by its lines, an image by type and size."""
    picture = ImagePart(mime="image/png", data_base64=base64.b64encode(b"p" * 70).decode())
    message = ChatMessage(
        role="user",
        content='what are these?\n\n<attachment name="a &amp; b.txt">\nx\ny\n</attachment>'
        '\n\n<attachment name="dot.png">[image 1]</attachment>',
        images=(picture,),
    )

    plan = plan_reply([message, *step(1)], steps=1, can_sleep=True)

    assert "Final answer for “what are these?”" in plan.text  # files are not the task
    assert "Files I was given: `a & b.txt` (2 lines of text), `dot.png` (an image, " in plan.text
    assert "image/png, 70 bytes)." in plan.text
    only_files = ChatMessage(role="user", content='<attachment name="n.md">\nhi\n</attachment>')
    assert "Final answer for the task" in plan_reply([only_files], steps=1, can_sleep=False).text


def test_a_task_asking_for_code_gets_a_markdown_sample() -> None:
    plan = plan_reply([user("write code for fizzbuzz")], steps=1, can_sleep=False)
    assert "```python\ndef fizzbuzz" in plan.text
    assert "### A sample" in plan.text
    assert "```" not in plan_reply([user("plan a trip")], steps=1, can_sleep=False).text


async def test_the_demo_models_answers_are_counted_and_marked_estimated(tmp_path: Path) -> None:
    """Every demo call's output tokens are counted, estimated, and /usage marks them ≈."""
    database = await sqlite_database(tmp_path)
    try:
        log = SessionLog(database)
        provider = DemoProvider(steps=1, chunk_delay=0)
        agent = Agent(
            await log.load("agent:demo"), log, provider, ToolRegistry([]), AgentSettings()
        )
        for text in ("map the moon", "and the sun"):
            await agent.send(text)
            await agent.wait_idle()
        usages = [e.payload for e in agent.tree.events if e.type == "usage"]
        assert len(usages) == 2
        assert all(u["completion_tokens"] > 10 and u["estimated"] for u in usages)
        shown = usage_text(agent.tree.total_usage, model=None, context_window=32_768)
        out = agent.tree.total_usage.completion_tokens
        assert f"≈{out:,} out (≈: estimated by the bot" in shown
    finally:
        await database.close()


def test_the_final_answer_says_what_the_tools_did() -> None:
    """A die's roll is reported; a denied note is named as not run, not glossed over."""
    dice = ToolCall(id="d1", name="demo__roll_dice", arguments='{"sides": 20}')
    note = ToolCall(id="n1", name="demo__write_note", arguments='{"text": "buy milk"}')
    rolled = [
        ChatMessage(role="assistant", content="rolling", tool_calls=(dice,)),
        ChatMessage(
            role="tool", tool_call_id="d1", name="demo__roll_dice", content="rolled a d20: 17"
        ),
    ]
    denied = [
        ChatMessage(role="assistant", content="noting", tool_calls=(note,)),
        ChatMessage(
            role="tool",
            tool_call_id="n1",
            name="demo__write_note",
            content="denied by alice: the tool was not run",
        ),
    ]

    after_roll = plan_reply([user("plan"), *rolled, *step(1)], steps=1, can_sleep=True)
    after_denial = plan_reply([user("note it"), *denied, *step(1)], steps=1, can_sleep=True)

    assert "`demo__roll_dice` answered “rolled a d20: 17”." in after_roll.text
    assert (
        "My call to `demo__write_note` was not run (“denied by alice: the tool was not run”), "
        "so I left it out."
    ) in after_denial.text
    assert "answered" not in after_denial.text
