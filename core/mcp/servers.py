"""Every configured MCP server of the bot process, and the start-up check of tool names.

A connection is made on first use only (:class:`~core.mcp.connection.McpConnection`);
the registry hands out the one connection per server that all sessions share.
The connection module, and with it the ``mcp`` SDK, is imported then too: a bot
with no server configured never loads it (:mod:`core.mcp.records`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from core.clock import Clock
from core.config import McpServerConfig
from core.errors import ConfigError, ThreadboundError
from core.logging import get_logger
from core.mcp.records import McpTool, McpUnavailable

if TYPE_CHECKING:
    from core.mcp.connection import McpConnection

__all__ = ["McpServers"]

_log = get_logger("core.mcp")


class McpServers:
    """The bot's MCP servers by name; closing it closes every connection.

    Args:
        configs: the ``[mcp_servers.<name>]`` tables.
        env: the bot's environment (each server reads only what its ``env_from`` names).
        clock: times starts and calls.
        cwd: where ``command`` servers start, so a relative path in a command resolves
            next to the config file (``Config.base_dir``); None: the bot's directory.
    """

    def __init__(
        self,
        configs: Mapping[str, McpServerConfig],
        *,
        env: Mapping[str, str],
        clock: Clock,
        cwd: Path | None = None,
    ) -> None:
        self._configs = dict(configs)
        self._env = env
        self._clock = clock
        self._cwd = cwd
        self._connections: dict[str, McpConnection] = {}

    def names(self) -> list[str]:
        """The configured servers' names, in the file's order."""
        return list(self._configs)

    def connection(self, name: str) -> McpConnection:
        """The one connection to server ``name`` (not started until used).

        Raises:
            ThreadboundError: no server of that name is configured.
        """
        connection = self._connections.get(name)
        if connection is None:
            config = self._configs.get(name)
            if config is None:
                known = ", ".join(self._configs) or "none"
                raise ThreadboundError(
                    f"no MCP server named {name!r} is configured (configured: {known}); "
                    f"add an [mcp_servers.{name}] table or fix the name."
                )
            from core.mcp.connection import McpConnection  # the SDK: only for a server in use

            connection = McpConnection(
                name, config, env=self._env, clock=self._clock, cwd=self._cwd
            )
            self._connections[name] = connection
        return connection

    async def check(self, references: Mapping[str, set[str]], *, source: str = "") -> None:
        """Tool names the config spells out must exist on their server.

        ``references`` maps a server to the tool names the config names for it
        (``mcp:server/tool`` entries, ``require_approval`` lists). Those servers are
        started (at once, side by side) and listed; they stay running for the
        sessions. A server that cannot be started now is not fatal (it may come up
        later): ``mcp.check_skipped`` is logged and its names are taken on trust.

        Raises:
            ConfigError: one line naming the server, the unknown tool and the known ones.
        """
        wanted = {server: names for server, names in references.items() if names}
        for server in wanted:
            if server not in self._configs:
                raise ConfigError(
                    source or "<config>",
                    f"mcp_servers.{server}",
                    "an [mcp_servers.<name>] table for every server a tool name refers to",
                    f"no server {server!r} is configured",
                )
        listed = await asyncio.gather(*(self._listed(server) for server in wanted))
        for (server, names), tools in zip(wanted.items(), listed, strict=True):
            if tools is None:
                continue
            known = [tool.name for tool in tools]
            unknown = sorted(names - set(known))
            if unknown:
                which = ", ".join(repr(name) for name in unknown)
                raise ConfigError(
                    source or "<config>",
                    f"mcp_servers.{server}",
                    "tool names the server offers",
                    f"unknown tool {which}; the server has: {', '.join(known) or 'no tools'}",
                )

    async def _listed(self, server: str) -> tuple[McpTool, ...] | None:
        try:
            return await self.connection(server).tools()
        except McpUnavailable as exc:
            _log.warning("mcp.check_skipped", server=server, error=str(exc))
            return None

    async def close(self) -> None:
        """Close every connection (stdio servers are stopped). Idempotent."""
        for connection in list(self._connections.values()):
            await connection.close()
