"""Counting tokens when the server reports none, and pricing them."""

from __future__ import annotations

from pathlib import Path

from core.agent import Agent, AgentSettings, ToolRegistry
from core.agent.compaction import SUMMARY_SYSTEM, Compacted, CompactionSettings
from core.agent.usage import (
    ContextSize,
    ModelInfo,
    context_size,
    counted,
    estimate_prompt,
    estimate_text,
    priced,
)
from core.config import ProviderConfig
from core.providers.scripted import ScriptedProvider, Step
from core.providers.types import ChatMessage, ToolCall, ToolSpec, Usage
from core.sessions.log import SessionLog
from tests.fixtures.agents import sqlite_database


def test_four_characters_a_token_rounded_up() -> None:
    assert [estimate_text(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]


def test_a_prompt_counts_messages_calls_and_tool_schemas() -> None:
    call = ToolCall(id="c1", name="look", arguments='{"q": "x"}')  # 4 + 10 chars
    messages = [
        ChatMessage(role="user", content="a" * 40),  # 4 + 10
        ChatMessage(role="assistant", content="", tool_calls=(call,)),  # 4 + 1 + 3
    ]
    assert estimate_prompt(messages) == 14 + 8
    tool = ToolSpec(name="look", description="Look.", parameters={"type": "object"})
    assert estimate_prompt(messages, [tool]) == 22 + 1 + 2 + 5  # name, description, schema


def test_cost_is_the_providers_else_from_the_prices() -> None:
    usage = Usage(prompt_tokens=2_000_000, completion_tokens=500_000)
    priced_info = ModelInfo(input_usd_per_mtok=0.15, output_usd_per_mtok=0.6)
    assert priced(usage, priced_info) == 0.3 + 0.3
    assert priced(usage, ModelInfo()) is None
    reported = usage.model_copy(update={"cost_usd": 0.01})
    assert priced(reported, priced_info) == 0.01


def test_model_info_from_the_provider_table() -> None:
    config = ProviderConfig(
        base_url="http://127.0.0.1:1/v1",
        model="m",
        context_window=8192,
        input_usd_per_mtok=1.0,
        output_usd_per_mtok=2.0,
        vision=True,
    )
    assert ModelInfo.of(config) == ModelInfo(8192, 1.0, 2.0, True)
    assert ModelInfo().context_window == 32_768


def test_counts_the_server_left_out_are_estimated() -> None:
    """A count reported as zero for an answer with words is estimated, and says so."""
    assert counted(None, prompt=40, answer=5) == (
        Usage(prompt_tokens=40, completion_tokens=5),
        True,
    )
    reported = Usage(prompt_tokens=100, completion_tokens=7, cost_usd=0.1)
    assert counted(reported, prompt=40, answer=5) == (reported, False)
    partial = Usage(prompt_tokens=100)
    assert counted(partial, prompt=40, answer=5) == (
        Usage(prompt_tokens=100, completion_tokens=5),
        True,
    )
    assert counted(partial, prompt=40, answer=0) == (partial, False)  # nothing was said


async def test_a_server_that_counts_only_the_prompt_gets_the_answer_estimated(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([Step(text="a" * 40, usage=Usage(prompt_tokens=321))])
    database = await sqlite_database(tmp_path)
    try:
        log = SessionLog(database)
        agent = Agent(await log.load("agent:u"), log, provider, ToolRegistry([]), AgentSettings())
        await agent.send("hello")
        await agent.wait_idle()
        (usage,) = [e.payload for e in agent.tree.events if e.type == "usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (321, 10)
        assert usage["estimated"] is True
    finally:
        await database.close()


async def test_the_context_after_a_compaction_is_the_compactions_figure(tmp_path: Path) -> None:
    """Right after /compact the context is the compaction's "after"; the next call's own
    count then replaces it; rewound to before the compaction, the last call's count again."""

    def model(messages: list[ChatMessage]) -> Step:
        if messages[0].content == SUMMARY_SYSTEM:
            return Step(text="short summary")
        return Step(text="noted", usage=Usage(prompt_tokens=700 + len(messages)))

    database = await sqlite_database(tmp_path)
    try:
        log = SessionLog(database)
        settings = AgentSettings(compaction=CompactionSettings(keep_recent_tokens=1))
        agent = Agent(
            await log.load("agent:c"), log, ScriptedProvider(model), ToolRegistry([]), settings
        )
        for number in range(3):
            await agent.send(f"note {number}: " + "a detail worth keeping, " * 10)
            await agent.wait_idle()
        last_call = agent.tree.total_usage.last_prompt_tokens
        assert context_size(agent.tree) == ContextSize(last_call)
        first_reply = next(e for e in agent.tree.events if e.type == "assistant_message")

        done = await agent.compact()

        assert isinstance(done, Compacted)
        assert context_size(agent.tree) == ContextSize(done.tokens_after, compacted=True)
        await agent.send("one more")
        await agent.wait_idle()
        assert context_size(agent.tree) == ContextSize(agent.tree.total_usage.last_prompt_tokens)
        again = await agent.compact()
        assert isinstance(again, Compacted)
        assert context_size(agent.tree).compacted
        await log.continue_from(agent.tree, first_reply.node_id)  # before the compaction
        assert context_size(agent.tree) == ContextSize(agent.tree.total_usage.last_prompt_tokens)
    finally:
        await database.close()
