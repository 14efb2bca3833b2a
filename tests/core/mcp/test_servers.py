"""The registry of MCP servers and the start-up check of the tool names a config spells out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from core.clock import FakeClock
from core.config import McpServerConfig
from core.errors import ConfigError, ThreadboundError
from core.mcp import McpServers
from tests.core.mcp.helpers import TIME_SERVER

pytestmark = pytest.mark.asyncio(loop_scope="module")
GONE = {"command": ["/nonexistent/mcp-server"]}


def registry(**configs: dict[str, Any]) -> McpServers:
    return McpServers(
        {name: McpServerConfig.model_validate(config) for name, config in configs.items()},
        env={},
        clock=FakeClock(),
    )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def servers() -> AsyncIterator[McpServers]:
    """mcp-server-time as ``clock`` (started by the first check) and a server that
    cannot start."""
    servers = registry(clock={"command": TIME_SERVER}, gone=GONE)
    yield servers
    await servers.close()


class TestCheck:
    async def test_known_names_pass_and_the_server_stays_up(self, servers: McpServers) -> None:
        """Tool names the server has pass; the server it started keeps running for use."""
        await servers.check({"clock": {"convert_time", "get_current_time"}})
        assert servers.connection("clock").alive
        assert servers.connection("clock").starts == 1

    async def test_an_unknown_tool_is_one_line_naming_what_the_server_has(
        self, servers: McpServers
    ) -> None:
        """A misspelt tool is one ConfigError line: file, server, the name, the known ones."""
        with pytest.raises(ConfigError) as caught:
            await servers.check({"clock": {"nope", "get_current_time"}}, source="bot.toml")
        assert str(caught.value) == (
            "bot.toml: mcp_servers.clock: expected tool names the server offers "
            "(unknown tool 'nope'; the server has: get_current_time, convert_time)"
        )

    async def test_a_server_that_cannot_start_is_skipped_with_a_warning(
        self, servers: McpServers
    ) -> None:
        """A server down at start-up is logged and its names trusted; the others are
        still checked."""
        with capture_logs() as logs, pytest.raises(ConfigError, match="'nope'"):
            await servers.check({"gone": {"anything"}, "clock": {"nope"}})
        (skipped,) = [entry for entry in logs if entry["event"] == "mcp.check_skipped"]
        assert skipped["server"] == "gone"
        assert skipped["log_level"] == "warning"
        assert "FileNotFoundError" in skipped["error"]
        await servers.check({"gone": {"anything"}})

    async def test_a_server_no_table_configures_is_a_config_error(
        self, servers: McpServers
    ) -> None:
        """A reference to a server without a table is refused, before anything starts."""
        with pytest.raises(ConfigError, match="no server 'web' is configured"):
            await servers.check({"web": {"fetch"}})


class TestRegistry:
    async def test_one_connection_per_server(self, servers: McpServers) -> None:
        """Every session asking for a server gets the same connection."""
        assert servers.connection("clock") is servers.connection("clock")
        assert servers.names() == ["clock", "gone"]

    async def test_an_unconfigured_server_is_refused(self, servers: McpServers) -> None:
        """Asking for a server no table configures says which ones exist."""
        with pytest.raises(ThreadboundError, match=r"no MCP server named 'x'.*clock, gone"):
            servers.connection("x")

    async def test_close_stops_every_server(self) -> None:
        """close() stops each started server's process."""
        servers = registry(clock={"command": TIME_SERVER})
        await servers.check({"clock": {"get_current_time"}})
        clock = servers.connection("clock")
        assert clock.alive
        await servers.close()
        assert not clock.alive
