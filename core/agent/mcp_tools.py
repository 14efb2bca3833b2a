"""An MCP server's tools as agent tools: names, schemas, approval, failures.

A profile's ``tools`` entry ``"mcp:clock"`` offers every tool of server
``clock``, ``"mcp:clock/get_current_time"`` that one only. The model sees
``clock__get_current_time`` with the server's own JSON schema; the server
checks the arguments. Each source asks its connection for the tool list before
every model call (cached by the connection, refreshed when the server says
its list changed), and rebuilds its tools only when that list is a new one.

A server that is down or hangs gives the model an error result and the
thread a notice (:class:`~core.agent.tools.ToolFailed`); a server that could
not even list its tools offers the tools it listed last, so a call still
gets that error instead of the tool silently vanishing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from core.agent.tools import Tool, ToolContext, ToolFailed
from core.config import McpServerConfig, mcp_reference
from core.logging import get_logger
from core.mcp import McpServers, McpTool, McpUnavailable

if TYPE_CHECKING:  # the connection module imports the mcp SDK; a connection arrives built
    from core.mcp.connection import McpConnection

__all__ = ["McpToolSource", "mcp_sources", "mcp_tool", "referenced_tools", "requires_approval"]

_log = get_logger("core.agent")

TIMEOUT_MARGIN_S = 5.0
"""The registry's own timeout is a backstop: the connection times a call out first,
on the bot's clock, and says so in the thread."""


def requires_approval(config: McpServerConfig, tool: str) -> bool:
    rule = config.require_approval
    return rule if isinstance(rule, bool) else tool in rule


def mcp_tool(connection: McpConnection, config: McpServerConfig, tool: McpTool) -> Tool:
    """One MCP tool as a :class:`Tool` named ``server__tool``."""

    async def call(args: dict[str, Any], _context: ToolContext) -> str:
        try:
            result = await connection.call(tool.name, args)
        except McpUnavailable as exc:
            raise ToolFailed(str(exc), notice=exc.notice) from None
        if result.is_error:
            raise ToolFailed(result.text or f"{tool.model_name} reported an error")
        return result.text

    return Tool(
        name=tool.model_name,
        description=tool.description or f"{tool.name} (MCP server {tool.server})",
        args_model=None,
        fn=call,
        timeout_s=config.timeout_seconds + TIMEOUT_MARGIN_S,
        parameters=tool.input_schema,
        requires_approval=requires_approval(config, tool.name),
    )


class McpToolSource:
    """The tools one server offers one profile (all of them, or the ones it names)."""

    def __init__(
        self, connection: McpConnection, config: McpServerConfig, only: frozenset[str] | None
    ) -> None:
        self._connection = connection
        self._config = config
        self._only = only
        self._listed: object = None
        self._tools: tuple[Tool, ...] = ()

    async def tools(self) -> tuple[Tool, ...]:
        try:
            listed = await self._connection.tools()
        except McpUnavailable as exc:
            _log.warning("mcp.tools_unavailable", server=exc.server, error=str(exc))
            return self._tools  # the last list: a call then tells the model what is wrong
        if listed is not self._listed:
            self._listed = listed
            self._tools = tuple(
                mcp_tool(self._connection, self._config, tool)
                for tool in listed
                if self._only is None or tool.name in self._only
            )
        return self._tools


def mcp_sources(
    servers: McpServers, configs: Mapping[str, McpServerConfig], names: Iterable[str]
) -> list[McpToolSource]:
    """The sources for a profile's ``tools`` list (its ``mcp:`` entries; others are ignored)."""
    wanted: dict[str, set[str] | None] = {}
    for name in names:
        reference = mcp_reference(name)
        if reference is None:
            continue
        server, tool = reference
        if tool is None:
            wanted[server] = None
        elif server not in wanted or wanted[server] is not None:
            current = wanted.get(server)
            wanted[server] = {*(current or ()), tool}
    return [
        McpToolSource(
            servers.connection(server),
            configs[server],
            None if only is None else frozenset(only),
        )
        for server, only in wanted.items()
    ]


def referenced_tools(
    tool_lists: Iterable[Iterable[str]], servers: Mapping[str, McpServerConfig]
) -> dict[str, set[str]]:
    """Tool names the config spells out per server (``mcp:s/t`` and ``require_approval``
    lists), for the start-up check that they exist."""
    named: dict[str, set[str]] = {}
    for tools in tool_lists:
        for name in tools:
            reference = mcp_reference(name)
            if reference is not None and reference[1] is not None:
                named.setdefault(reference[0], set()).add(reference[1])
    for server, config in servers.items():
        if isinstance(config.require_approval, list) and config.require_approval:
            named.setdefault(server, set()).update(config.require_approval)
    return named
