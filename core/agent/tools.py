"""Tools the model may call: async callables with validated arguments.

Failures stay in-band: a bad argument, an unknown tool, a timeout or an
exception becomes an error result the model reads, never a crash of the loop.
Only cancellation propagates, because cancelling is how ``Agent.cancel()``
stops a running tool at its next await point. A failure people should hear
about (a tool server down or hanging) also carries a short ``notice`` for the
thread. Results longer than the registry's cap are cut, with a marker, before
the model reads them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from core.agent.usage import estimate_tools
from core.errors import ThreadboundError
from core.providers.types import ToolCall, ToolSpec

__all__ = [
    "Tool",
    "ToolContext",
    "ToolFailed",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSource",
    "cut_result",
]

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RESULT_MAX_CHARS = 20_000


class ToolFailed(ThreadboundError):
    """A tool's own failure, told to the model; ``notice`` is for the thread as well."""

    def __init__(self, message: str, *, notice: str | None = None) -> None:
        super().__init__(message)
        self.notice = notice


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
    """One tool: its name and schema for the model, its arguments, its function.

    A built-in tool validates its arguments with ``args_model``; a tool whose
    schema comes from elsewhere (an MCP server) has no model, gives the schema
    as ``parameters`` and receives the arguments as a dict, checked by its server.
    ``requires_approval``: the loop asks a person before every call.
    """

    name: str
    description: str
    args_model: type[BaseModel] | None
    fn: ToolFn
    timeout_s: float = DEFAULT_TIMEOUT_S
    parameters: Mapping[str, Any] = field(default_factory=dict)
    requires_approval: bool = False

    def spec(self) -> ToolSpec:
        schema = (
            self.args_model.model_json_schema()
            if self.args_model is not None
            else dict(self.parameters) or {"type": "object", "properties": {}}
        )
        return ToolSpec(name=self.name, description=self.description, parameters=schema)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    notice: str | None = None
    """A short line for the thread when the failure is one people should know about."""


def cut_result(content: str, limit: int) -> str:
    """``content`` with everything past ``limit`` characters replaced by a marker that
    says how much there was, so the model knows it read only the start."""
    if len(content) <= limit:
        return content
    return (
        content[:limit]
        + f"\n… [cut: the result had {len(content):,} characters; the first {limit:,} are shown]"
    )


class ToolSource(Protocol):
    """Tools that come and go while the bot runs (an MCP server's): asked before each
    model call. Returning the same tuple object again means nothing changed."""

    async def tools(self) -> tuple[Tool, ...]: ...


class ToolRegistry:
    """The tools one agent may use. Names are unique.

    Fixed tools are registered once; ``sources`` add theirs at :meth:`refresh`, which
    the loop awaits before every model call, so a server's new tool is offered at the
    next step and a schema is rebuilt only when a source's list changed.
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        sources: Iterable[ToolSource] = (),
        result_max_chars: int = DEFAULT_RESULT_MAX_CHARS,
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self._fixed: dict[str, Tool] = {}
        self._specs: list[ToolSpec] | None = None
        self._spec_tokens: int | None = None
        self._sources = list(sources)
        self._seen: list[tuple[Tool, ...]] = [() for _ in self._sources]
        self.result_max_chars = result_max_chars
        for tool in tools:
            self.register(tool)

    async def refresh(self) -> None:
        """Take in the sources' current tools (a fixed tool wins a name clash)."""
        if not self._sources:
            return
        current = [await source.tools() for source in self._sources]
        if all(now is seen for now, seen in zip(current, self._seen, strict=True)):
            return
        self._seen = current
        tools = dict(self._fixed)
        for batch in current:
            for tool in batch:
                tools.setdefault(tool.name, tool)
        self._tools = tools
        self._specs = self._spec_tokens = None

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ThreadboundError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._fixed[tool.name] = tool
        self._specs = self._spec_tokens = None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """The registry restricted to ``names`` (an agent profile's allowed tools)."""
        wanted = list(names)
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise ThreadboundError(
                f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(self._tools)}"
            )
        return ToolRegistry(
            (self._tools[n] for n in wanted), result_max_chars=self.result_max_chars
        )

    def specs(self) -> list[ToolSpec]:
        """The schemas sent with every model call; built once (JSON schema generation is slow)."""
        if self._specs is None:
            self._specs = [tool.spec() for tool in self._tools.values()]
        return self._specs

    def spec_tokens(self) -> int:
        """The estimated tokens :meth:`specs` add to every model call, computed once per
        change of the tools: serialising every schema at every step would cost more than
        the rest of the step's bookkeeping."""
        if self._spec_tokens is None:
            self._spec_tokens = estimate_tools(self.specs())
        return self._spec_tokens

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
        if tool.args_model is None:
            if not isinstance(raw, dict):
                return ToolOutcome(f"error: arguments for {tool.name} must be a JSON object", True)
            args: Any = raw
        else:
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
            return ToolOutcome(
                f"error: {tool.name} timed out after {tool.timeout_s:g}s",
                True,
                notice=f"⏱️ `{tool.name}` did not finish within {tool.timeout_s:g} s.",
            )
        except ToolFailed as exc:
            return ToolOutcome(cut_result(f"error: {exc}", self.result_max_chars), True, exc.notice)
        except ThreadboundError as exc:
            return ToolOutcome(f"error: {exc}", True)
        except Exception as exc:  # a tool bug must not end the turn; the model reads it
            return ToolOutcome(f"error: {tool.name} failed: {type(exc).__name__}: {exc}", True)
        return ToolOutcome(cut_result(content, self.result_max_chars))
