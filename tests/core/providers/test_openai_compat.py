"""OpenAICompatibleProvider against a real HTTP server on loopback: streams and requests."""

from __future__ import annotations

import asyncio
import json

import pytest
from structlog.testing import capture_logs

from core.errors import ProviderProtocolError
from core.providers import (
    ChatMessage,
    OpenAICompatibleProvider,
    StreamDone,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from core.providers.types import ImagePart
from tests.fixtures.fake_llm import FakeLLM, Reply, chunk, text_reply, tool_delta
from tests.fixtures.providers import HELLO, WAIT, MakeProvider, collect, texts, tool_calls

KEY = "sk-test-0123456789abcdef"


class TestStreaming:
    async def test_text_deltas_arrive_in_order_then_done_with_usage(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """Text pieces come in order; StreamDone is last and carries the final chunk's usage."""
        llm.add(
            text_reply("Hel", "lo", " world", usage={"prompt_tokens": 7, "completion_tokens": 3})
        )
        events = await collect(make_provider())
        assert texts(events) == ["Hel", "lo", " world"]
        assert events[-1] == StreamDone(
            finish_reason="stop", usage=Usage(prompt_tokens=7, completion_tokens=3)
        )

    async def test_cached_prompt_tokens_are_read_from_the_details(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """OpenAI's prompt_tokens_details.cached_tokens becomes Usage.cached_tokens."""
        usage = {
            "prompt_tokens": 900,
            "completion_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 768},
        }
        llm.add(text_reply("ok", usage=usage))
        events = await collect(make_provider())
        assert events[-1] == StreamDone(
            finish_reason="stop",
            usage=Usage(prompt_tokens=900, completion_tokens=12, cached_tokens=768),
        )
        request = llm.requests[-1]
        assert request.json["stream_options"] == {"include_usage": True}

    async def test_images_go_as_content_parts(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A user message with a picture is sent as text and image_url parts (a data URL)."""
        llm.add(text_reply("a cat"))
        message = ChatMessage(
            role="user",
            content="what is this?",
            images=(ImagePart(mime="image/png", data_base64="iVBORw0KGgo="),),
        )
        await collect(make_provider(), [message])
        sent = llm.requests[-1].json["messages"][-1]
        assert sent == {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }

    async def test_tool_calls_split_and_interleaved_are_assembled_by_index(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """Two calls whose argument pieces interleave are rebuilt per index, in index order."""
        deltas = [
            tool_delta(0, id="call_a", name="read_file", arguments=""),
            tool_delta(1, id="call_b", name="search", arguments='{"q'),
            tool_delta(0, arguments='{"pa'),
            tool_delta(1, arguments='": "cats"'),
            tool_delta(0, arguments='th": "a.txt"}'),
            tool_delta(1, arguments="}"),
        ]
        llm.add(
            Reply(
                chunks=[
                    chunk({"role": "assistant", "content": None}),
                    *(chunk({"tool_calls": [d]}) for d in deltas),
                    chunk({}, finish_reason="tool_calls"),
                ]
            )
        )
        events = await collect(make_provider())
        assert tool_calls(events) == [
            ToolCall(id="call_a", name="read_file", arguments='{"path": "a.txt"}'),
            ToolCall(id="call_b", name="search", arguments='{"q": "cats"}'),
        ]
        assert events[-1] == StreamDone(finish_reason="tool_calls")
        assert len(events) == 3  # the two calls, then done

    async def test_tool_call_quirks_missing_index_and_stop_reason(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """No index continues call 0; empty arguments become {}; "stop" becomes "tool_calls"."""
        llm.add(
            Reply(
                chunks=[
                    chunk({"tool_calls": [tool_delta(None, id="c1", name="get_time")]}),
                    chunk({"tool_calls": [tool_delta(None, arguments="  ")]}),
                    chunk({}, finish_reason="stop"),
                ],
                done=False,  # finish_reason alone marks the stream complete
            )
        )
        events = await collect(make_provider())
        assert tool_calls(events) == [ToolCall(id="c1", name="get_time", arguments="{}")]
        assert events[-1] == StreamDone(finish_reason="tool_calls")

    async def test_parallel_calls_all_numbered_zero_are_kept_apart_by_id(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """Servers that give every parallel call index 0 still yield two calls."""
        llm.add(
            Reply(
                chunks=[
                    chunk({"tool_calls": [tool_delta(0, id="c1", name="a", arguments='{"x":')]}),
                    chunk({"tool_calls": [tool_delta(0, arguments=" 1}")]}),
                    chunk({"tool_calls": [tool_delta(0, id="c2", name="b", arguments="{}")]}),
                    chunk({}, finish_reason="tool_calls"),
                ]
            )
        )
        assert tool_calls(await collect(make_provider())) == [
            ToolCall(id="c1", name="a", arguments='{"x": 1}'),
            ToolCall(id="c2", name="b", arguments="{}"),
        ]

    async def test_crlf_comments_and_a_utf8_character_split_across_writes(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """\\r\\n endings, keep-alive comments and a split multi-byte character are tolerated."""
        line = ("data: " + json.dumps(chunk({"content": "café"}), ensure_ascii=False)).encode()
        cut = line.index("é".encode()) + 1
        llm.add(
            Reply(
                chunks=[
                    ": keep-alive",
                    chunk({"content": "Bon"}),
                    line[:cut],
                    line[cut:] + b"\r\n\r\n",
                    chunk({}, finish_reason="stop"),
                ],
                line_ending="\r\n",
            )
        )
        events = await collect(make_provider())
        assert texts(events) == ["Bon", "café"]

    async def test_a_malformed_chunk_is_skipped_and_logged(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A chunk that is not JSON is logged with an excerpt; the rest of the answer arrives."""
        llm.add(
            Reply(
                chunks=[
                    chunk({"content": "one "}),
                    "data: {this is not json",
                    chunk({"content": "two"}),
                    chunk({}, finish_reason="stop"),
                ]
            )
        )
        with capture_logs() as logs:
            events = await collect(make_provider())
        assert texts(events) == ["one ", "two"]
        malformed = [log for log in logs if log["event"] == "provider.malformed_chunk"]
        assert [log["excerpt"] for log in malformed] == ["{this is not json"]

    async def test_a_json_answer_to_a_stream_request_is_read_whole(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A server that ignores stream: true still yields text, tool calls and usage."""
        completion = {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": "ok",
                        "tool_calls": [
                            {
                                "id": "c9",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "cost": 0.001},
        }
        llm.add(Reply(body=json.dumps(completion), content_type="application/json"))
        events = await collect(make_provider())
        assert events == [
            TextDelta(text="ok"),
            ToolCallReady(call=ToolCall(id="c9", name="f", arguments="{}")),
            StreamDone(
                finish_reason="tool_calls",
                usage=Usage(prompt_tokens=1, completion_tokens=2, cost_usd=0.001),
            ),
        ]

    async def test_an_html_page_is_a_protocol_error(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A 200 that is not an event stream fails at once, naming what came instead."""
        llm.add(Reply(body="<html><body>Welcome</body></html>", content_type="text/html"))
        with pytest.raises(ProviderProtocolError, match="text/html") as caught:
            await collect(make_provider())
        assert "base_url" in str(caught.value)
        assert len(llm.requests) == 1


class TestRequest:
    async def test_body_is_openai_wire_format_with_tools_and_tool_results(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """Messages, assistant tool calls, tool results and tools are sent as OpenAI expects."""
        llm.add(text_reply("ok"))
        call = ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": 2}')
        messages = [
            ChatMessage(role="system", content="be brief"),
            ChatMessage(role="user", content="1+2?"),
            ChatMessage(role="assistant", tool_calls=(call,)),
            ChatMessage(role="tool", content="3", tool_call_id="call_1", name="add"),
        ]
        schema = {"type": "object", "properties": {"a": {"type": "number"}}}
        tools = [ToolSpec(name="add", description="Add numbers.", parameters=schema)]
        await collect(make_provider(), messages, tools=tools, model="other-model")
        [request] = llm.requests
        assert request.path == "/v1/chat/completions"
        assert request.json == {
            "model": "other-model",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "1+2?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "3"},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "add",
                        "description": "Add numbers.",
                        "parameters": schema,
                    },
                }
            ],
        }

    async def test_no_authorization_header_without_a_key(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """Ollama and llama.cpp need no key: none is sent, and no tools key either."""
        llm.add(text_reply("ok"))
        await collect(make_provider())
        [request] = llm.requests
        assert "Authorization" not in request.headers
        assert "tools" not in request.json
        assert request.json["model"] == "test-model"

    async def test_bearer_key_and_extra_body(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """A key goes in a bearer header; extra_body adds keys and None removes them."""
        llm.add(text_reply("ok"))
        provider = make_provider(
            api_key=KEY, extra_body={"temperature": 0.2, "stream_options": None}
        )
        await collect(provider)
        [request] = llm.requests
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        assert request.json["temperature"] == 0.2
        assert "stream_options" not in request.json
        assert KEY not in repr(provider)

    def test_extra_body_cannot_replace_the_request_itself(self) -> None:
        """messages, model, stream and tools belong to stream(), not to extra_body."""
        with pytest.raises(ValueError, match="messages, stream"):
            OpenAICompatibleProvider(
                base_url="http://x/v1", model="m", extra_body={"stream": False, "messages": []}
            )


class TestConcurrency:
    async def test_more_than_a_hundred_streams_run_at_once(
        self, llm: FakeLLM, make_provider: MakeProvider
    ) -> None:
        """One provider serves every live agent of the bot: the 101st stream is not queued
        behind the first hundred (aiohttp's default pool holds 100 connections)."""
        streams = 120
        llm.add(
            *(Reply(chunks=[chunk({"content": "working"})], hold_after=1) for _ in range(streams))
        )
        provider = make_provider()
        started = [asyncio.Event() for _ in range(streams)]

        async def stream(first: asyncio.Event) -> None:
            async for _ in provider.stream(HELLO):
                first.set()

        tasks = [asyncio.create_task(stream(first)) for first in started]
        try:
            async with asyncio.timeout(WAIT):
                await asyncio.gather(*(first.wait() for first in started))
            assert len(llm.requests) == streams
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
