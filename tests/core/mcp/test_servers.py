"""The registry of servers, the start-up check of tool names, and model-visible names."""

from __future__ import annotations

import sys

import pytest
from structlog.testing import capture_logs

from core.clock import FakeClock
from core.config import McpServerConfig
from core.errors import ConfigError, ThreadboundError
from core.mcp import McpServers, model_tool_name
from tests.core.mcp.helpers import TIME_SERVER


def servers(**configs: dict) -> McpServers:
    return McpServers(
        {name: McpServerConfig.model_validate(c) for name, c in configs.items()},
        env={},
        clock=FakeClock(),
    )


class TestNames:
    @pytest.mark.parametrize(
        ("server", "tool", "name"),
        [
            ("clock", "get_current_time", "clock__get_current_time"),
            ("fs", "read.file", "fs__read_file"),
            ("fs", "läs fil", "fs__l_s_fil"),
        ],
    )
    def test_server_and_tool_joined_within_provider_rules(
        self, server: str, tool: str, name: str
    ) -> None:
        assert model_tool_name(server, tool) == name

    def test_long_names_are_cut_and_stay_distinct(self) -> None:
        first = model_tool_name("server", "t" * 80 + "a")
        second = model_tool_name("server", "t" * 80 + "b")
        assert len(first) == len(second) == 64
        assert first != second
        assert first == model_tool_name("server", "t" * 80 + "a")  # deterministic


class TestCheck:
    async def test_known_names_pass_and_the_server_stays_up(self) -> None:
        registry = servers(clock={"command": TIME_SERVER})
        try:
            await registry.check({"clock": {"convert_time", "get_current_time"}})
            assert registry.connection("clock").alive
        finally:
            await registry.close()

    async def test_an_unknown_tool_is_one_line_naming_what_the_server_has(self) -> None:
        registry = servers(clock={"command": TIME_SERVER})
        try:
            with pytest.raises(ConfigError) as caught:
                await registry.check({"clock": {"nope"}}, source="config.toml")
        finally:
            await registry.close()
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith("config.toml: mcp_servers.clock: ")
        assert "unknown tool 'nope'" in message
        assert "get_current_time" in message
        assert "convert_time" in message

    async def test_a_server_that_cannot_start_is_skipped_with_a_warning(self) -> None:
        registry = servers(gone={"command": [sys.executable, "-c", "raise SystemExit(1)"]})
        try:
            with capture_logs() as logs:
                await registry.check({"gone": {"anything"}})
        finally:
            await registry.close()
        assert [e["server"] for e in logs if e["event"] == "mcp.check_skipped"] == ["gone"]

    async def test_an_unconfigured_server_is_refused(self) -> None:
        registry = servers()
        with pytest.raises(ThreadboundError, match="no MCP server named 'x'"):
            registry.connection("x")
