"""A deterministic provider for tests and demos: each call plays the next scripted step.

It exists so the agent loop can be tested the way Pi tests its loop (a scripted
``streamFn``): no network, no timing, and every call recorded. A test that needs
to act *while the model streams* (steer, cancel) gives a step a ``gate``; the
stream stops after its first text chunk until the test sets it, and
:meth:`ScriptedProvider.wait_calls` tells the test when a call has started,
without polling.

It is strict where real providers are: a history in which an assistant's tool
calls are not each answered by a tool result (before anything else), or a tool
result answers no call, fails the call the way OpenAI's HTTP 400 would, unless
``check_history=False``. Running out of steps fails loudly: that is a test bug.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from core.errors import ProviderError
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

__all__ = ["ScriptedProvider", "Step", "split_text"]


@dataclass(frozen=True)
class Step:
    """What one model call answers.

    Attributes:
        text: the answer's text, streamed as ``chunks`` ``TextDelta`` pieces.
        tool_calls: emitted as ``ToolCallReady`` after the text.
        chunks: how many pieces to split ``text`` into (fewer if it is shorter).
        usage: reported in ``StreamDone``.
        gate: the stream waits for this event after its first text chunk (before
            anything when there is no text), so a test can act mid-stream.
        error: raised after the text (if any) instead of finishing the answer;
            with no text, the call fails before yielding anything.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    chunks: int = 1
    usage: Usage | None = None
    gate: asyncio.Event | None = None
    error: Exception | None = None

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise ValueError(f"Step.chunks must be at least 1, not {self.chunks}")


def split_text(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` near-equal non-empty parts (fewer if it is shorter)."""
    if not text:
        return []
    pieces = min(pieces, len(text))
    size, extra = divmod(len(text), pieces)
    parts: list[str] = []
    start = 0
    for index in range(pieces):
        end = start + size + (1 if index < extra else 0)
        parts.append(text[start:end])
        start = end
    return parts


class ScriptedProvider:
    """Answers each call with the next :class:`Step`, or with ``script(messages)``.

    Attributes:
        calls: the messages of every call, in call order (recorded when a stream starts).
        tools_seen: the tools offered in every call.
        models_seen: the ``model`` argument of every call.
    """

    def __init__(
        self,
        steps: Iterable[Step] | Callable[[Sequence[ChatMessage]], Step],
        *,
        name: str = "scripted",
        check_history: bool = True,
    ) -> None:
        self._name = name
        self._script = steps if callable(steps) else None
        self._steps: deque[Step] = deque() if callable(steps) else deque(steps)
        self._scripted = len(self._steps)
        self._check_history = check_history
        self._waiters: list[tuple[int, asyncio.Event]] = []
        self.calls: list[tuple[ChatMessage, ...]] = []
        self.tools_seen: list[tuple[ToolSpec, ...]] = []
        self.models_seen: list[str | None] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def remaining(self) -> int:
        """Steps not yet played (0 for a function script)."""
        return len(self._steps)

    async def wait_calls(self, n: int) -> None:
        """Return once at least ``n`` calls have started; bound it with ``asyncio.timeout``."""
        if len(self.calls) >= n:
            return
        event = asyncio.Event()
        self._waiters.append((n, event))
        try:
            await event.wait()
        finally:
            self._waiters.remove((n, event))

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Play the next step. Yields to the event loop between events, as a network would."""
        self._record(messages, tools, model)
        if self._check_history:
            _check_history(messages, self._name)
        step = self._next_step(messages)
        parts = split_text(step.text, step.chunks)
        if not parts and step.gate is not None:
            await step.gate.wait()
        for index, part in enumerate(parts):
            yield TextDelta(text=part)
            if index == 0 and step.gate is not None:
                await step.gate.wait()
            else:
                await asyncio.sleep(0)
        if step.error is not None:
            raise step.error
        for call in step.tool_calls:
            yield ToolCallReady(call=call)
            await asyncio.sleep(0)
        reason = "tool_calls" if step.tool_calls else "stop"
        yield StreamDone(finish_reason=reason, usage=step.usage)

    def _record(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], model: str | None
    ) -> None:
        self.calls.append(tuple(messages))
        self.tools_seen.append(tuple(tools))
        self.models_seen.append(model)
        for wanted, event in self._waiters:
            if len(self.calls) >= wanted:
                event.set()

    def _next_step(self, messages: Sequence[ChatMessage]) -> Step:
        if self._script is not None:
            return self._script(messages)
        if not self._steps:
            raise ProviderError(
                f"scripted provider {self._name!r} got call {len(self.calls)} but its script "
                f"has only {self._scripted} steps (the script is exhausted); "
                "add a Step to the test for this call."
            )
        return self._steps.popleft()


def _check_history(messages: Sequence[ChatMessage], provider: str) -> None:
    """Refuse a history OpenAI would refuse: every tool call answered, no orphan results."""
    pending: list[str] = []
    for position, message in enumerate(messages):
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            if call_id not in pending:
                _bad_history(
                    provider,
                    f"message {position} is a tool result for {call_id!r}, which no "
                    "preceding assistant message called (or which was answered already)",
                )
            pending.remove(call_id)
            continue
        if pending:
            _bad_history(
                provider,
                f"message {position} ({message.role}) comes before the tool calls "
                f"{', '.join(pending)} have results; answer every call, "
                "e.g. with a 'skipped' result",
            )
        pending = [call.id for call in message.tool_calls]
    if pending:
        _bad_history(provider, f"the tool calls {', '.join(pending)} have no results")


def _bad_history(provider: str, problem: str) -> NoReturn:
    raise ProviderError(
        f"scripted provider {provider!r} received a message history a real provider would "
        f"reject: {problem}."
    )
