"""The built-in tools, and the hooks later features plug their handlers into.

``sleep`` exists for demos and tests (a tool that takes a while, so steering
and follow-ups can be tried); ``http_get`` fetches only from an allow-list;
``spawn_subagent``, ``schedule_wakeup`` and ``emit_artifact`` are hooks: their argument schemas
are fixed here, their behaviour is the handler the subagent and artifact
features pass in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, ConfigDict, Field

from core.agent.tools import Tool, ToolContext
from core.clock import Clock, SystemClock
from core.errors import ThreadboundError

__all__ = [
    "EmitArtifactArgs",
    "HttpGetArgs",
    "ScheduleWakeupArgs",
    "SleepArgs",
    "SpawnSubagentArgs",
    "emit_artifact_tool",
    "http_get_tool",
    "schedule_wakeup_tool",
    "sleep_tool",
    "spawn_subagent_tool",
]

HTTP_MAX_BYTES = 64_000


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SleepArgs(_Args):
    seconds: float = Field(gt=0, le=300, description="how long to wait, in seconds")


def sleep_tool(clock: Clock | None = None, *, timeout_s: float = 310.0) -> Tool:
    """A tool that waits; on a fake clock, a test decides when it finishes."""
    waiter = clock or SystemClock()

    async def run(args: SleepArgs, _context: ToolContext) -> str:
        await waiter.sleep(args.seconds)
        return f"slept {args.seconds:g}s"

    return Tool(
        name="sleep",
        description="Wait for a number of seconds, then report that the wait is over.",
        args_model=SleepArgs,
        fn=run,
        timeout_s=timeout_s,
    )


class HttpGetArgs(_Args):
    url: str = Field(description="an http(s) URL on an allowed host")


def _host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Exact host names, or ``*.example.org`` for the domain's subdomains."""
    host = host.lower().rstrip(".")
    for entry in allowed:
        entry = entry.lower()
        if entry.startswith("*.") and host.endswith(entry[1:]):
            return True
        if host == entry:
            return True
    return False


def http_get_tool(
    allowed_hosts: Iterable[str],
    *,
    session_factory: Callable[[], aiohttp.ClientSession] = aiohttp.ClientSession,
    timeout_s: float = 20.0,
) -> Tool:
    """GET a URL whose host is on the allow-list; returns status and the start of the body."""
    allowed = tuple(allowed_hosts)

    async def run(args: HttpGetArgs, _context: ToolContext) -> str:
        parts = urlsplit(args.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ThreadboundError(f"{args.url!r} is not an http(s) URL")
        if not _host_allowed(parts.hostname, allowed):
            listed = ", ".join(allowed) or "no hosts"
            raise ThreadboundError(
                f"host {parts.hostname!r} is not on the http_get allow-list ({listed})"
            )
        async with (
            session_factory() as session,
            session.get(args.url, allow_redirects=False) as response,
        ):
            body = await response.content.read(HTTP_MAX_BYTES + 1)
        text = body[:HTTP_MAX_BYTES].decode(response.charset or "utf-8", errors="replace")
        more = "\n… [truncated]" if len(body) > HTTP_MAX_BYTES else ""
        return f"HTTP {response.status}\n{text}{more}"

    return Tool(
        name="http_get",
        description="Fetch a web page or API response by URL (allowed hosts only).",
        args_model=HttpGetArgs,
        fn=run,
        timeout_s=timeout_s,
    )


class SpawnSubagentArgs(_Args):
    task: str = Field(min_length=1, description="what the subagent should do")
    agent: str | None = Field(default=None, description="agent profile id")
    mode: Literal["run", "session"] = "run"
    thread: bool = False


SpawnHandler = Callable[[SpawnSubagentArgs, ToolContext], Awaitable[str]]


def spawn_subagent_tool(handler: SpawnHandler) -> Tool:
    """The parent agent's way to start a subagent; ``handler`` does the spawning."""
    return Tool(
        name="spawn_subagent",
        description=(
            "Start a subagent on a task. mode 'run' does one task and reports back; "
            "'session' keeps it available in its own thread (needs thread=true)."
        ),
        args_model=SpawnSubagentArgs,
        fn=handler,
        timeout_s=120.0,
    )


class ScheduleWakeupArgs(_Args):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    after: str = Field(
        alias="in", min_length=1, description='how long from now, e.g. "20m", "2h" or "1d"'
    )
    note: str = Field(min_length=1, description="what to do then; the later turn carries it")


WakeupHandler = Callable[[ScheduleWakeupArgs, ToolContext], Awaitable[str]]


def schedule_wakeup_tool(handler: WakeupHandler) -> Tool:
    """An agent's way to come back to its own session later ("check again in 20
    minutes"); ``handler`` schedules the turn, as its session owner's job."""
    return Tool(
        name="schedule_wakeup",
        description=(
            "Schedule one later turn in this same session: after the delay, you get the "
            "note as a new message here. Use it to check back on something later."
        ),
        args_model=ScheduleWakeupArgs,
        fn=handler,
        timeout_s=30.0,
    )


class EmitArtifactArgs(_Args):
    type: str = Field(min_length=1, description="artifact type, as the agent profile allows")
    data: dict[str, Any]
    origin: list[str] = Field(min_length=1, description="node ids the artifact is derived from")


ArtifactHandler = Callable[[EmitArtifactArgs, ToolContext], Awaitable[str]]


def emit_artifact_tool(handler: ArtifactHandler) -> Tool:
    """The model's way to emit a typed artifact; the domain (``handler``) validates it."""
    return Tool(
        name="emit_artifact",
        description="Record a typed artifact derived from earlier messages.",
        args_model=EmitArtifactArgs,
        fn=handler,
        timeout_s=30.0,
    )
