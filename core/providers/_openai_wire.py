"""The OpenAI chat-completions wire format: requests out, streamed chunks back to events.

Kept apart from the HTTP client so the tolerant parsing rules live in one place
and read top to bottom. Quirks handled here (each seen in a real server):

- ``tool_calls`` deltas carry an ``index``; id and name arrive first, arguments in
  pieces. Later deltas may omit ``id`` (vLLM, llama.cpp). A delta without ``index``
  (some Ollama and llama.cpp builds, for a single call) continues the call it names
  by id, else the last call touched, else starts call 0. A delta whose ``index`` is
  taken by a call with a *different* id starts a new call (servers that number
  every parallel call 0).
- A repeated ``name`` is not appended (some servers resend it whole); arguments sent
  as a JSON object instead of a string are re-serialised; empty arguments become
  ``"{}"`` (what OpenAI sends for a tool without parameters).
- ``usage`` may be ``null`` in every chunk but the last (OpenAI with
  ``include_usage``), only in the last chunk (llama.cpp), or cumulative in each
  chunk (vLLM continuous stats): the last non-null one wins. OpenRouter's
  ``usage.cost`` becomes ``cost_usd``.
- ``finish_reason`` ``"stop"`` (or none) while tool calls were made is reported as
  ``"tool_calls"`` (older Ollama); ``reasoning_content`` deltas are ignored.
- A ``{"error": ...}`` chunk inside a 200 stream (OpenRouter, vLLM) becomes
  :class:`StreamErrorChunk` for the client to classify by its code.
- A plain JSON completion (a server that ignored ``stream: true``) is read whole.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from core.errors import ProviderProtocolError
from core.providers.types import (
    ChatMessage,
    ProviderEvent,
    StreamDone,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    Usage,
)

__all__ = [
    "ChunkAssembler",
    "StreamErrorChunk",
    "encode_messages",
    "encode_tools",
    "error_message",
]

DONE_SENTINEL: Final = "[DONE]"


def encode_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Messages in OpenAI's shape; a tool result carries only what OpenAI accepts."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role}
        if message.role == "assistant":
            # null content is how OpenAI itself writes an assistant turn that only calls tools.
            item["content"] = message.content if message.content or not message.tool_calls else None
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
            if item["content"] is None and not message.tool_calls:
                item["content"] = ""
        elif message.role == "tool":
            item["tool_call_id"] = message.tool_call_id
            item["content"] = message.content or ""
        elif message.images:  # OpenAI's content parts: the text, then each picture
            item["content"] = [
                {"type": "text", "text": message.content or ""},
                *(
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:{image.mime};base64,{image.data_base64}"},
                    }
                    for image in message.images
                ),
            ]
        else:
            item["content"] = message.content or ""
            if message.name:
                item["name"] = message.name
        wire.append(item)
    return wire


def encode_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tools as OpenAI function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def error_message(body: str) -> str:
    """The server's own error text from an error body: OpenAI, Ollama and FastAPI shapes."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if isinstance(data, dict):
        for key in ("error", "message", "detail"):
            value = data.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])
            if isinstance(value, str):
                return value
    return body


class StreamErrorChunk(Exception):
    """The server reported an error inside a 200 stream; ``status`` is its code if numeric."""

    def __init__(self, status: int | None, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


@dataclass
class _CallDraft:
    """A tool call being assembled from deltas."""

    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def build(self, provider: str) -> ToolCall:
        if not self.name:
            raise ProviderProtocolError(
                "a tool call ended without a function name", provider=provider
            )
        arguments = "".join(self.arguments)
        return ToolCall(
            id=self.id or f"call_{uuid.uuid4().hex[:24]}",
            name=self.name,
            arguments=arguments if arguments.strip() else "{}",
        )


class ChunkAssembler:
    """Turns decoded chunks into events; remembers what a finished stream needs.

    ``feed`` returns the events a payload produced (text at once, tool calls when a
    ``finish_reason`` arrives); ``finish`` returns what remains once the body ended.
    ``complete`` says whether the server said it was done (``[DONE]`` or a
    ``finish_reason``): a body that ends otherwise was cut off.
    """

    def __init__(self, provider: str, on_malformed: Callable[[str], None]) -> None:
        self._provider = provider
        self._on_malformed = on_malformed
        self._drafts: list[_CallDraft] = []
        self._by_index: dict[int, int] = {}
        self._last: int | None = None
        self._emitted = 0
        self._usage: Usage | None = None
        self.finish_reason: str | None = None
        self.saw_finish = False
        self.saw_done = False
        self.valid_chunks = 0
        self.malformed_chunks = 0

    @property
    def complete(self) -> bool:
        return self.saw_done or self.saw_finish

    def feed(self, payload: str) -> list[ProviderEvent]:
        """Events from one SSE data payload; malformed ones are reported and skipped."""
        if payload.strip() == DONE_SENTINEL:
            self.saw_done = True
            return []
        try:
            chunk = json.loads(payload)
        except ValueError:
            if "\n" in payload:  # a server that forgot the blank line between events
                return [event for line in payload.split("\n") for event in self.feed(line)]
            return self._malformed(payload)
        if not isinstance(chunk, dict):
            return self._malformed(payload)
        return self._chunk(chunk)

    def feed_completion(self, completion: Any) -> list[ProviderEvent]:
        """Events from a whole (non-streamed) completion object."""
        if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
            raise ProviderProtocolError(
                "a JSON answer without choices came instead of an event stream",
                provider=self._provider,
            )
        chunk = dict(completion)
        choices = []
        for choice in completion["choices"]:
            if isinstance(choice, dict):
                delta = dict(choice.get("message") or {})
                if isinstance(delta.get("tool_calls"), list):
                    delta["tool_calls"] = [
                        {**call, "index": i}
                        for i, call in enumerate(delta["tool_calls"])
                        if isinstance(call, dict)
                    ]
                choices.append({**choice, "delta": delta})
        chunk["choices"] = choices
        events = self._chunk(chunk)
        self.saw_done = True
        return events

    def finish(self) -> list[ProviderEvent]:
        """The tool calls not yet emitted, then ``StreamDone``."""
        if self.malformed_chunks and not self.valid_chunks:
            raise ProviderProtocolError(
                f"none of the {self.malformed_chunks} chunks of the stream was valid JSON",
                provider=self._provider,
            )
        events = self._flush_calls()
        reason = self.finish_reason
        if self._drafts and reason in (None, "stop"):
            reason = "tool_calls"
        events.append(StreamDone(finish_reason=reason, usage=self._usage))
        return events

    # -- one chunk -------------------------------------------------------------

    def _malformed(self, payload: str) -> list[ProviderEvent]:
        self.malformed_chunks += 1
        self._on_malformed(payload)
        return []

    def _chunk(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        if chunk.get("error") is not None:
            error = chunk["error"]
            code = error.get("code") if isinstance(error, dict) else None
            status = code if isinstance(code, int) and not isinstance(code, bool) else None
            raise StreamErrorChunk(status, error_message(json.dumps(chunk)))
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            return self._malformed(json.dumps(chunk))
        self.valid_chunks += 1
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage)
        events: list[ProviderEvent] = []
        for choice in choices[:1]:  # one choice is requested (n=1)
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str) and content:
                    events.append(TextDelta(text=content))
                calls = delta.get("tool_calls")
                for call in calls if isinstance(calls, list) else ():
                    if isinstance(call, dict):
                        self._tool_delta(call)
            reason = choice.get("finish_reason")
            if reason is not None:
                self.finish_reason = str(reason)
                self.saw_finish = True
                events.extend(self._flush_calls())
        return events

    def _tool_delta(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        call_id = delta.get("id") or None
        position: int | None
        if isinstance(index, int):
            position = self._by_index.get(index)
            taken_by = self._drafts[position].id if position is not None else None
            if call_id and taken_by is not None and taken_by != call_id:
                position = None
            if position is None:
                position = self._new_draft()
                self._by_index[index] = position
        elif call_id:
            known = [i for i, d in enumerate(self._drafts) if d.id == call_id]
            position = known[0] if known else self._new_draft()
        else:
            position = self._last if self._last is not None else self._new_draft()
        self._last = position
        draft = self._drafts[position]
        if call_id and draft.id is None:
            draft.id = str(call_id)
        function = delta.get("function") or {}
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if isinstance(name, str) and name and not draft.name:
            draft.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            draft.arguments.append(arguments)
        elif isinstance(arguments, dict):
            draft.arguments.append(json.dumps(arguments))

    def _new_draft(self) -> int:
        self._drafts.append(_CallDraft())
        return len(self._drafts) - 1

    def _flush_calls(self) -> list[ProviderEvent]:
        ready: list[ProviderEvent] = [
            ToolCallReady(call=draft.build(self._provider))
            for draft in self._drafts[self._emitted :]
        ]
        self._emitted = len(self._drafts)
        return ready


def _usage(raw: dict[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=count("prompt_tokens"),
        completion_tokens=count("completion_tokens"),
        cached_tokens=cached if isinstance(cached, int) and not isinstance(cached, bool) else 0,
        cost_usd=_cost(raw.get("cost")),
    )


def _cost(value: object) -> float | None:
    """OpenRouter's ``usage.cost`` (USD); anything but a number means no cost reported."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
