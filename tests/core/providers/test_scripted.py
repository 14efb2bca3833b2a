"""ScriptedProvider: the deterministic model the agent-loop tests drive."""

from __future__ import annotations

import asyncio

import pytest

from core.errors import ProviderError, ProviderUnavailable
from core.providers import (
    ChatMessage,
    Provider,
    ProviderEvent,
    ScriptedProvider,
    Step,
    StreamDone,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    Usage,
    split_text,
)
from tests.fixtures.providers import HELLO, WAIT, collect, drain

CALL = ToolCall(id="c1", name="search", arguments='{"q": "x"}')


class TestScriptedProvider:
    async def test_steps_play_in_order_and_calls_are_recorded(self) -> None:
        """Each call plays the next step; messages, tools and model of each call are kept."""
        provider = ScriptedProvider([Step(text="one"), Step(text="two")])
        tool = ToolSpec(name="t", description="A tool.", parameters={"type": "object"})
        async with asyncio.timeout(WAIT):
            first = [e async for e in provider.stream(HELLO, tools=[tool], model="m1")]
        second = await collect(provider)
        assert first == [TextDelta(text="one"), StreamDone(finish_reason="stop")]
        assert second[0] == TextDelta(text="two")
        assert provider.calls == [HELLO, HELLO]
        assert provider.tools_seen == [(tool,), ()]
        assert provider.models_seen == ["m1", None]
        assert provider.remaining == 0

    async def test_text_is_split_into_chunks_then_tool_calls_then_done(self) -> None:
        """chunks=3 gives three pieces; tool calls follow; finish_reason says tool_calls."""
        usage = Usage(prompt_tokens=5, completion_tokens=4)
        provider = ScriptedProvider(
            [Step(text="abcdefgh", chunks=3, tool_calls=(CALL,), usage=usage)]
        )
        assert await collect(provider) == [
            TextDelta(text="abc"),
            TextDelta(text="def"),
            TextDelta(text="gh"),
            ToolCallReady(call=CALL),
            StreamDone(finish_reason="tool_calls", usage=usage),
        ]

    def test_split_text_never_yields_empty_pieces(self) -> None:
        """More chunks than characters gives one piece per character; no text, no pieces."""
        assert split_text("ab", 5) == ["a", "b"]
        assert split_text("", 3) == []
        assert "".join(split_text("hello world", 4)) == "hello world"

    async def test_gate_holds_the_stream_after_the_first_chunk(self) -> None:
        """A test can act while the model streams: the rest waits for the gate."""
        gate = asyncio.Event()
        provider = ScriptedProvider([Step(text="abcd", chunks=2, gate=gate)])
        seen: list[ProviderEvent] = []
        first = asyncio.Event()

        async def consume() -> None:
            async for event in provider.stream(HELLO):
                seen.append(event)
                first.set()

        async with asyncio.timeout(WAIT), asyncio.TaskGroup() as group:
            group.create_task(consume())
            await first.wait()
            for _ in range(5):  # give the consumer every chance to run ahead (it must not)
                await asyncio.sleep(0)
            assert seen == [TextDelta(text="ab")]
            gate.set()
        assert seen[1:] == [TextDelta(text="cd"), StreamDone(finish_reason="stop")]

    async def test_gate_without_text_holds_before_anything(self) -> None:
        """With only tool calls, the gate is waited for before the first event."""
        gate = asyncio.Event()
        provider = ScriptedProvider([Step(tool_calls=(CALL,), gate=gate)])
        stream = provider.stream(HELLO)
        pending = asyncio.ensure_future(anext(stream))
        async with asyncio.timeout(WAIT):
            await provider.wait_calls(1)
            assert not pending.done()
            gate.set()
            assert await pending == ToolCallReady(call=CALL)
        await stream.aclose()

    async def test_wait_calls_returns_once_enough_calls_started(self) -> None:
        """wait_calls(n) wakes on the n-th call, without polling."""
        provider = ScriptedProvider([Step(text="a"), Step(text="b")])
        waiter = asyncio.ensure_future(provider.wait_calls(2))
        await collect(provider)
        await asyncio.sleep(0)
        assert not waiter.done()
        await collect(provider)
        async with asyncio.timeout(WAIT):
            await waiter
        await provider.wait_calls(1)  # already satisfied: returns at once

    async def test_an_exhausted_script_fails_loudly(self) -> None:
        """One call too many is a test bug, and the message says so."""
        provider = ScriptedProvider([Step(text="only")])
        await collect(provider)
        with pytest.raises(ProviderError, match="script is exhausted"):
            await collect(provider)
        assert len(provider.calls) == 2

    async def test_an_error_step_raises_after_its_text(self) -> None:
        """error without text fails before any event; with text, after the text."""
        boom = ProviderUnavailable(1, 503, provider="scripted")
        provider = ScriptedProvider([Step(error=boom), Step(text="par", error=boom)])
        with pytest.raises(ProviderUnavailable):
            await collect(provider)
        seen: list[ProviderEvent] = []
        with pytest.raises(ProviderUnavailable):
            await drain(provider, seen)
        assert seen == [TextDelta(text="par")]

    async def test_a_function_script_sees_the_messages(self) -> None:
        """A callable script answers from the messages and never runs out."""
        provider = ScriptedProvider(lambda messages: Step(text=f"{len(messages)} messages"))
        assert (await collect(provider))[0] == TextDelta(text="1 messages")
        assert (await collect(provider, HELLO * 3))[0] == TextDelta(text="3 messages")

    async def test_an_unanswered_tool_call_is_refused_like_a_real_provider(self) -> None:
        """A history where a tool call has no result fails, naming the call."""
        history = (
            *HELLO,
            ChatMessage(role="assistant", tool_calls=(CALL,)),
            ChatMessage(role="user", content="steer"),
        )
        provider = ScriptedProvider([Step(text="x")])
        with pytest.raises(ProviderError, match="c1"):
            await collect(provider, history)

    async def test_answered_tool_calls_pass_the_history_check(self) -> None:
        """Every call answered (a skipped one included) is a valid history."""
        other = ToolCall(id="c2", name="search", arguments="{}")
        history = (
            *HELLO,
            ChatMessage(role="assistant", tool_calls=(CALL, other)),
            ChatMessage(role="tool", tool_call_id="c1", content="found"),
            ChatMessage(role="tool", tool_call_id="c2", content="skipped: superseded"),
            ChatMessage(role="user", content="steer"),
        )
        provider = ScriptedProvider([Step(text="ok")])
        assert (await collect(provider, history))[0] == TextDelta(text="ok")

    def test_it_satisfies_the_provider_protocol(self) -> None:
        """Typed as a Provider, with its name."""
        provider: Provider = ScriptedProvider([], name="demo")
        assert provider.name == "demo"

    def test_chunks_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match="at least 1"):
            Step(text="x", chunks=0)
