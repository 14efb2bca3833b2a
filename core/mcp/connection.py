"""One MCP server, one connection per bot process: started on first use, kept, restarted.

The official SDK's :class:`mcp.Client` is an async context manager whose
cancel scopes belong to the task that entered it, so each connection has an
owner task that enters the client and holds it open until :meth:`close`, or
until the connection dies. Calls come from the agents' tasks and go through
the shared client; a transport that breaks cancels the owner task, never a
caller.

- **Start**: lazy, once for any number of concurrent first uses; a start lists
  the tools, so a server that cannot even do that counts as not started.
- **Tool list**: cached; listed again after the server says its list changed
  and after a restart. A 2025-era server's ``notifications/tools/list_changed``
  reaches the client's message handler; a 2026-era connection delivers it only
  to a ``subscriptions/listen`` stream, which the owner task keeps open.
- **Time**: starting and every call are bounded by ``timeout_seconds`` on the
  bot's clock (tests drive it with a fake one). A call past it is cancelled
  (the SDK tells the server); the connection stays.
- **Failures** become :class:`McpUnavailable`, with a one-line ``notice`` for
  the thread. A connection that closed (the server exited or was killed, an
  HTTP server went away) is dropped and the next call starts it again; the
  failed call itself is never repeated, since it may have acted. An error the
  server answered with leaves the connection as it is.
- **Secrets**: a stdio server gets the SDK's small default environment plus the
  variables ``env_from`` maps from the bot's; no message or log line shows a value.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import sys
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.subscriptions import Subscription
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolListChangedNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from core.clock import Clock
from core.config import McpServerConfig
from core.logging import get_logger
from core.mcp.naming import model_tool_name
from core.mcp.records import McpResult, McpTool, McpUnavailable

__all__ = ["McpConnection", "McpResult", "McpTool", "McpUnavailable", "result_text"]

_log = get_logger("core.mcp")
_T = TypeVar("_T")

PYTHON_ALIASES: Final = ("python", "python3")
"""A command's first word that means the interpreter running the bot."""
NOTICE_DETAIL: Final = 160
"""Longest detail (a server's error text) quoted in a notice."""
LIST_PAGE_CAP: Final = 100
"""Pages of ``tools/list`` followed at most: a paginator that never ends cannot hang a start."""


@dataclass(slots=True)
class _Live:
    """One started connection: the client and the task that holds it open."""

    client: Client
    owner: asyncio.Task[None]


def result_text(result: CallToolResult) -> str:
    """What the model reads of a result.

    Text blocks (and embedded text resources) as they are, joined by newlines; other
    blocks as short placeholders (``[image image/png, 1234 bytes]``,
    ``[resource file:///x]``); the structured result as JSON when there is no content.
    """
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {_decoded_size(block.data)} bytes]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[resource {resource.uri}]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource {block.uri}]")
        else:  # a content kind newer than this code
            parts.append(f"[{getattr(block, 'type', 'unknown')} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


class McpConnection:
    """The bot's connection to one configured server, shared by every session.

    Args:
        name: the server's configured name (``[mcp_servers.<name>]``).
        config: its table.
        env: the bot's environment; only the variables ``env_from`` names are read.
        clock: times starts and calls.
        mode: the protocol era to speak: ``"auto"`` (ask the server), ``"legacy"``
            (the 2025 ``initialize`` handshake) or a 2026 version string. Tests pin it.
        cwd: the directory a ``command`` server is started in, so relative paths in
            its command resolve there (the config file's directory); None: the bot's.
    """

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        env: Mapping[str, str],
        clock: Clock,
        mode: str = "auto",
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._cwd = cwd
        self._env = env
        self._clock = clock
        self._mode = mode
        self._live: _Live | None = None
        self._starting = asyncio.Lock()
        self._closed = False
        self._pending: asyncio.Task[None] | None = None
        self._exit_logged: asyncio.Task[Any] | None = None
        self._tools: tuple[McpTool, ...] = ()
        self._stale = True
        self._changed = asyncio.Event()
        self.starts = 0
        """How many times the server was started (a restart counts)."""

    @property
    def transport(self) -> str:
        """``"stdio"`` (a program the bot starts) or ``"http"`` (a URL)."""
        return "http" if self.config.url is not None else "stdio"

    @property
    def alive(self) -> bool:
        """Whether the connection is open now (a dead stdio server is seen at the next use)."""
        return self._live is not None and not self._live.owner.done()

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the open connection speaks, ``None`` when not open."""
        return self._live.client.protocol_version if self.alive and self._live else None

    def next_list_change(self) -> asyncio.Event:
        """An event set when the server next says its tool list changed.

        Take it before the action that may change the list; :meth:`tools` lists
        again after it is set.
        """
        return self._changed

    # -- use -------------------------------------------------------------------------

    async def tools(self) -> tuple[McpTool, ...]:
        """The server's tools, starting it if needed.

        The same tuple object until the list changes, so a caller can compare by
        identity to know whether to rebuild what it made of it.

        Raises:
            McpUnavailable: the server cannot be started or listed.
        """
        live = await self._connected()
        if self._stale:
            self._stale = False  # a change announced while listing marks it stale again
            try:
                listed = await self._guarded(live, self._list(live.client), "listing its tools")
            except BaseException:
                self._stale = True
                raise
            if listed != self._tools:
                self._tools = listed
        return self._tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> McpResult:
        """Call ``tool`` once; never repeated, even when the server dies meanwhile.

        Raises:
            McpUnavailable: not started, timed out (the call is cancelled), the
                connection closed (the next call restarts the server), or the
                server answered with a protocol error.
        """
        live = await self._connected()
        result = await self._guarded(
            live, live.client.call_tool(tool, arguments), f"calling {tool}", tool=tool
        )
        return McpResult(result_text(result), bool(result.is_error))

    async def close(self) -> None:
        """End the connection for good (the SDK stops a stdio server's process).

        Idempotent; a use after it raises :class:`McpUnavailable` instead of
        starting a server nobody would stop.
        """
        self._closed = True
        starting, live = self._pending, self._live
        if starting is not None:  # a start under way fails at once
            await _stop(starting)
        if live is not None:
            await self._drop(live)

    # -- starting --------------------------------------------------------------------

    async def _connected(self) -> _Live:
        live = self._live
        if live is not None and not live.owner.done():
            return live
        async with self._starting:
            if self._closed:
                raise self._shut_down()
            if self._live is not None and not self._live.owner.done():
                return self._live
            if self._live is not None:  # it ended on its own: clear what is left
                await self._drop(self._live)
            return await self._start()

    async def _start(self) -> _Live:
        """Start the owner task, wait for the client, list the tools: all within the timeout."""
        target = self._target()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        # A fresh context: the connection outlives the session whose call started it,
        # and its log lines must not carry that session's key.
        owner = asyncio.create_task(
            self._serve(target, ready), name=f"mcp:{self.name}", context=contextvars.Context()
        )
        self._pending = owner
        try:
            client, tools = await self._timed(self._handshake(ready, owner), "starting")
        except BaseException as exc:
            await _stop(owner)
            if isinstance(exc, asyncio.CancelledError | McpUnavailable):
                raise
            if self._closed:
                raise self._shut_down() from None
            detail = _describe(exc)
            _log.warning("mcp.start_failed", server=self.name, error=detail)
            raise McpUnavailable(
                self.name,
                f"MCP server {self.name!r} could not be started: {detail}",
                f"🔌 Tool server `{self.name}` could not be started: {_short(detail)}",
            ) from None
        finally:
            self._pending = None
        if self._closed:  # closed while the start finished: stop what just started
            await _stop(owner)
            raise self._shut_down()
        live = _Live(client, owner)
        self._live = live
        if tools != self._tools:
            self._tools = tools
        self.starts += 1
        _log.info(
            "mcp.server_started",
            server=self.name,
            transport=self.transport,
            protocol=client.protocol_version,
            tools=len(tools),
        )
        return live

    async def _handshake(
        self, ready: asyncio.Future[Client], owner: asyncio.Task[None]
    ) -> tuple[Client, tuple[McpTool, ...]]:
        """The client once connected, and its first tool list."""
        client = await _first_of(ready, owner)
        self._stale = False  # a change announced while listing marks it stale again
        return client, await self._list(client)

    def _shut_down(self) -> McpUnavailable:
        return McpUnavailable(
            self.name,
            f"MCP server {self.name!r} was shut down with the bot",
            f"🔌 Tool server `{self.name}` is shut down.",
        )

    def _target(self) -> StdioServerParameters | str:
        if self.config.url is not None:
            return self.config.url
        argv = list(self.config.command or ())
        if not argv:
            raise McpUnavailable(
                self.name,
                f"MCP server {self.name!r} has neither command nor url",
                f"🔌 Tool server `{self.name}` is not configured: it needs a command or a url.",
            )
        if argv[0] in PYTHON_ALIASES:
            argv[0] = sys.executable
        missing = sorted({var for var in self.config.env_from.values() if var not in self._env})
        if missing:
            names = ", ".join(missing)
            raise McpUnavailable(
                self.name,
                f"MCP server {self.name!r} needs the environment variable {names} "
                "(named by its env_from), which the bot's environment does not have; "
                "set it and restart the bot",
                f"🔌 Tool server `{self.name}` could not be started: "
                f"the bot's environment has no {names}.",
            )
        env = {name: self._env[var] for name, var in self.config.env_from.items()}
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=self._cwd)

    # -- the owner task --------------------------------------------------------------

    async def _serve(
        self, target: StdioServerParameters | str, ready: asyncio.Future[Client]
    ) -> None:
        """Enter the client, hand it over, hold it until cancelled; exit in this task.

        A failure before the client is handed over ends this task with that error
        (the starter reads it); a later one is logged, and the ended task tells the
        next use to start again.
        """
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(target, message_handler=self._on_message, mode=self._mode)
                )
                subscription = await self._subscribe(stack, client)
                ready.set_result(client)
                if subscription is not None:
                    async for _change in subscription:
                        self._list_changed()
                await asyncio.Event().wait()  # until close() cancels this task
        except Exception as exc:
            if not ready.done():
                raise
            owner = asyncio.current_task()
            if owner is not None:
                self._exited(owner, exc)

    async def _subscribe(
        self, stack: contextlib.AsyncExitStack, client: Client
    ) -> Subscription | None:
        """A 2026-era connection's ``subscriptions/listen`` stream of list changes, or None.

        Older connections get the change as a notification (:meth:`_on_message`).
        """
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        tools = client.server_capabilities.tools
        if tools is not None and not tools.list_changed:
            return None  # the server said it never changes its list
        try:
            return await stack.enter_async_context(client.listen(tools_list_changed=True))
        except Exception as exc:  # the server does not offer it: the list stays as listed
            _log.debug("mcp.listen_unavailable", server=self.name, error=_describe(exc))
            return None

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._list_changed()
        await asyncio.sleep(0)

    def _list_changed(self) -> None:
        self._stale = True
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _exited(self, owner: asyncio.Task[Any], cause: BaseException) -> None:
        """Log the end of the connection ``owner`` held, once: the owner task (a broken
        listen stream) and a failed call may both see it."""
        if self._exit_logged is not owner:
            self._exit_logged = owner
            _log.warning("mcp.server_exited", server=self.name, reason=_describe(cause))

    async def _drop(self, live: _Live) -> None:
        """Stop ``live`` if it is still the current connection; the next use starts anew."""
        if self._live is live:
            self._live = None
            self._stale = True
        await _stop(live.owner)

    # -- calls -----------------------------------------------------------------------

    async def _list(self, client: Client) -> tuple[McpTool, ...]:
        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(LIST_PAGE_CAP):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(
                McpTool(
                    server=self.name,
                    name=tool.name,
                    model_name=model_tool_name(self.name, tool.name),
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema or {}),
                )
                for tool in page.tools
            )
            cursor = page.next_cursor
            if cursor is None:
                break
        return tuple(tools)

    async def _guarded(
        self, live: _Live, work: Awaitable[_T], doing: str, *, tool: str | None = None
    ) -> _T:
        """``work`` within the timeout, its failures as :class:`McpUnavailable`."""
        try:
            return await self._timed(work, doing)
        except McpUnavailable:
            raise
        except (MCPError, ValidationError) as exc:
            if not (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED):
                detail = _describe(exc) if isinstance(exc, ValidationError) else str(exc)
                _log.warning("mcp.call_failed", server=self.name, tool=tool, error=detail)
                raise McpUnavailable(
                    self.name,
                    f"MCP server {self.name!r} answered {doing} with an error: {detail}",
                    f"🔌 Tool server `{self.name}` answered with an error: {_short(detail)}",
                ) from None
            cause: Exception = exc
        except Exception as exc:  # the transport broke: the process is gone or unreadable
            cause = exc
        if self._closed:  # close() ended it under the call
            raise self._shut_down() from None
        self._exited(live.owner, cause)
        await self._drop(live)
        if self.transport == "stdio":
            gone = "is not running (it exited); it will be restarted on the next call."
        else:
            gone = "closed the connection; it will be reconnected on the next call."
        raise McpUnavailable(
            self.name,
            f"MCP server {self.name!r} stopped while {doing} ({_describe(cause)}); "
            "it is started again on the next call",
            f"🔌 Tool server `{self.name}` {gone}",
        ) from None

    async def _timed(self, work: Awaitable[_T], doing: str) -> _T:
        """Race ``work`` against ``timeout_seconds`` on the bot's clock; cancel the loser.

        A caller cancelled meanwhile cancels ``work`` too and sees ``CancelledError``.
        """
        task: asyncio.Future[_T] = asyncio.ensure_future(work)
        timer = asyncio.ensure_future(self._clock.sleep(self.config.timeout_seconds))
        try:
            await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
            timed_out = not task.done()
        finally:
            timer.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if timed_out:
            limit = f"{self.config.timeout_seconds:g} s"
            _log.warning(
                "mcp.timed_out",
                server=self.name,
                doing=doing,
                timeout_s=self.config.timeout_seconds,
            )
            raise McpUnavailable(
                self.name,
                f"MCP server {self.name!r} did not finish {doing} within {limit}; it was cancelled",
                f"🔌 Tool server `{self.name}` did not answer within {limit}.",
            )
        if task.cancelled():  # not by us: the SDK's transport gave up under the call
            raise ConnectionError(f"the transport cancelled {doing}")
        return task.result()


async def _first_of(ready: asyncio.Future[Client], owner: asyncio.Task[None]) -> Client:
    """The client once ``ready``; the owner's own error if it ended first."""
    await asyncio.wait((ready, owner), return_when=asyncio.FIRST_COMPLETED)
    if ready.done():
        return ready.result()
    if owner.cancelled():
        raise RuntimeError("the connection task was cancelled before it connected")
    error = owner.exception()
    raise error if error is not None else RuntimeError("the connection ended before it connected")


async def _stop(owner: asyncio.Task[None]) -> None:
    """Cancel ``owner`` and wait for it: the client exits in its task (the SDK stops
    the process, shielded, and kills it if it does not exit)."""
    owner.cancel()
    await asyncio.gather(owner, return_exceptions=True)


def _decoded_size(data: str) -> int:
    """Bytes in base64 ``data``, without decoding it."""
    return len(data) * 3 // 4 - data[-2:].count("=") if data else 0


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= NOTICE_DETAIL else line[: NOTICE_DETAIL - 1] + "…"


def _describe(exc: BaseException) -> str:
    """``Type: message``, one line; for exception groups, the first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
