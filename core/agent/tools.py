"""Tools the model may call: async callables with validated arguments.

Failures stay in-band: a bad argument, an unknown tool, a timeout or an
exception becomes an error result the model reads, never a crash of the loop.
Only cancellation propagates, because cancelling is how ``Agent.cancel()``
stops a running tool at its next await point.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from core.errors import ThreadboundError
from core.providers.types import ToolCall, ToolSpec

__all__ = ["Tool", "ToolContext", "ToolOutcome", "ToolRegistry"]

DEFAULT_TIMEOUT_S = 60.0
MAX_RESULT_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool call comes from, for tools that act on the session (spawn, artifacts)."""

    session_key: str
    turn_id: str
    tool_call_id: str
    agent_name: str | None = None


ToolFn = Callable[[Any, ToolContext], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: its name and schema for the model, its arguments model, its function."""

    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    timeout_s: float = DEFAULT_TIMEOUT_S

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.args_model.model_json_schema(),
        )


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False


class ToolRegistry:
    """The tools one agent may use. Names are unique."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: list[ToolSpec] | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ThreadboundError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._specs = None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """The registry restricted to ``names`` (an agent profile's allowed tools)."""
        wanted = list(names)
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise ThreadboundError(
                f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(self._tools)}"
            )
        return ToolRegistry(self._tools[n] for n in wanted)

    def specs(self) -> list[ToolSpec]:
        """The schemas sent with every model call; built once (JSON schema generation is slow)."""
        if self._specs is None:
            self._specs = [tool.spec() for tool in self._tools.values()]
        return self._specs

    async def execute(self, call: ToolCall, context: ToolContext) -> ToolOutcome:
        """Run one call; every failure except cancellation becomes an error outcome."""
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return ToolOutcome(f"error: unknown tool {call.name!r} (available: {known})", True)
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolOutcome(f"error: arguments are not valid JSON ({exc.msg})", True)
        try:
            args = tool.args_model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            return ToolOutcome(f"error: invalid arguments for {tool.name}: {problems}", True)
        try:
            async with asyncio.timeout(tool.timeout_s):
                content = await tool.fn(args, context)
        except TimeoutError:
            return ToolOutcome(f"error: {tool.name} timed out after {tool.timeout_s:g}s", True)
        except ThreadboundError as exc:
            return ToolOutcome(f"error: {exc}", True)
        except Exception as exc:  # a tool bug must not end the turn; the model reads it
            return ToolOutcome(f"error: {tool.name} failed: {type(exc).__name__}: {exc}", True)
        if len(content) > MAX_RESULT_CHARS:
            content = content[:MAX_RESULT_CHARS] + f"\n… [truncated at {MAX_RESULT_CHARS} chars]"
        return ToolOutcome(content)
