"""Tests for core.config.tables: what each TOML table accepts, and how it refuses the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import STORE_SCHEMES, parse_config
from core.errors import ConfigError
from core.store.engine import SUPPORTED_DRIVERS
from tests.core.config.helpers import error_for, load_text


class TestStoreSchemes:
    def test_store_schemes_are_the_stores_drivers(self):
        """The config accepts exactly the URL schemes the store can open."""
        assert STORE_SCHEMES == SUPPORTED_DRIVERS


class TestAgentAndProviders:
    def test_agent_defaults(self) -> None:
        """The [agent] table defaults match the loop's documented defaults."""
        agent = parse_config({}, env={}).agent
        assert (agent.steer_skips_pending_tools, agent.follow_up_mode) == (True, "one-at-a-time")
        assert (agent.max_steps_per_turn, agent.max_total_tokens) == (25, 0)

    def test_providers_table(self) -> None:
        """[providers.<name>] tables are validated and keep the key out of the file."""
        config = parse_config(
            {
                "providers": {
                    "local": {"base_url": "http://127.0.0.1:11434/v1/", "model": "qwen"},
                    "openai": {
                        "base_url": "https://api.openai.com/v1",
                        "model": "gpt-4o-mini",
                        "api_key_env": "OPENAI_API_KEY",
                    },
                }
            },
            env={},
        )
        assert config.providers["local"].base_url == "http://127.0.0.1:11434/v1"
        assert config.providers["openai"].api_key_env == "OPENAI_API_KEY"

    def test_bad_follow_up_mode_names_the_key(self) -> None:
        """A wrong [agent] value is reported with its key path."""
        with pytest.raises(ConfigError) as err:
            parse_config({"agent": {"follow_up_mode": "later"}}, env={})
        assert err.value.key_path == "agent.follow_up_mode"


class TestDiscordEndpoints:
    def test_default_is_discords_own(self) -> None:
        """Unset endpoints keep discord.py's own addresses."""
        assert parse_config({}, env={}).discord.api_base_url == ""

    def test_bad_scheme(self) -> None:
        """An endpoint that is not http(s)/ws(s) names the key path."""
        with pytest.raises(ConfigError) as err:
            parse_config({"discord": {"gateway_url": "ftp://x"}}, env={})
        assert err.value.key_path == "discord.gateway_url"


class TestAgentProfiles:
    PROVIDERS = {"local": {"base_url": "http://127.0.0.1:11434/v1", "model": "m"}}

    def test_profiles_are_read(self) -> None:
        """[agents.<id>] tables carry the persona, model, tools and handoff targets."""
        config = parse_config(
            {
                "providers": self.PROVIDERS,
                "agents": {
                    "scout": {
                        "display_name": "Scout",
                        "avatar_url": "https://example.org/scout.png",
                        "provider": "local",
                        "tools": ["sleep", "emit_artifact"],
                        "artifact_types": ["note"],
                        "handoff_to": ["writer"],
                    },
                    "writer": {"display_name": "Writer", "user_startable": False},
                },
            },
            env={},
        )
        assert config.agents["scout"].handoff_to == ["writer"]
        assert config.agents["writer"].user_startable is False

    @pytest.mark.parametrize(
        ("profile", "key_path", "message"),
        [
            ({"display_name": "A", "provider": "nope"}, "agents.a.provider", "got 'nope'"),
            ({"display_name": "A", "handoff_to": ["ghost"]}, "agents.a.handoff_to", "'ghost'"),
            ({"display_name": "A", "tools": ["rm_rf"]}, "agents.a.tools", "unknown: rm_rf"),
            ({"display_name": "A", "avatar_url": "file:///x"}, "agents.a.avatar_url", "http"),
        ],
    )
    def test_bad_profiles_name_the_key(self, profile: dict, key_path: str, message: str) -> None:
        """A profile naming a missing provider or agent, or an unknown tool, is refused clearly."""
        with pytest.raises(ConfigError) as err:
            parse_config({"providers": self.PROVIDERS, "agents": {"a": profile}}, env={})
        assert err.value.key_path == key_path
        assert message in str(err.value)


class TestMcpServers:
    """``[mcp_servers.<name>]`` and the tools that name them: refused with one line."""

    def test_a_working_example(self, tmp_path: Path) -> None:
        config = load_text(
            tmp_path,
            '[mcp_servers.clock]\ncommand = ["python", "-m", "mcp_server_time"]\n'
            'env_from = { TZ = "BOT_TZ" }\ntimeout_seconds = 5\n'
            'require_approval = ["convert_time"]\n'
            '[agent]\ntools = ["mcp:clock", "sleep"]\n'
            '[agents.scout]\ndisplay_name = "Scout"\ntools = ["mcp:clock/get_current_time"]\n',
        )
        clock = config.mcp_servers["clock"]
        assert clock.command == ["python", "-m", "mcp_server_time"]
        assert (clock.env_from, clock.timeout_seconds) == ({"TZ": "BOT_TZ"}, 5)
        assert clock.require_approval == ["convert_time"]
        assert config.agent.tools == ["mcp:clock", "sleep"]
        assert config.agent.tool_result_max_chars == 20_000
        assert config.agent.approval_timeout_seconds == 600
        assert config.discord.show_tool_calls == "compact"

    def test_an_unknown_server(self, tmp_path: Path) -> None:
        error = error_for(tmp_path, '[agents.a]\ndisplay_name = "A"\ntools = ["mcp:nope"]\n')
        assert error.key_path == "agents.a.tools"
        assert "configured [mcp_servers.<name>] table (none configured)" in str(error)
        assert "'mcp:nope'" in str(error)

    def test_a_server_without_command_or_url(self, tmp_path: Path) -> None:
        error = error_for(tmp_path, "[mcp_servers.clock]\ntimeout_seconds = 5\n")
        assert error.key_path == "mcp_servers.clock"
        assert "neither is set" in str(error)

    def test_a_secret_in_the_file_is_refused_without_echo(self, tmp_path: Path) -> None:
        for table in (
            '[mcp_servers.s]\ncommand = ["x"]\nenv = { API_KEY = "sk-live-123456" }\n',
            '[mcp_servers.s]\ncommand = ["x"]\nenv_from = { API_KEY = "sk-live-123456" }\n',
            '[mcp_servers.s]\nurl = "https://user:sk-live-123456@example.org/mcp"\n',
        ):
            error = error_for(tmp_path, table)
            assert "sk-live-123456" not in str(error)
            assert "\n" not in str(error)

    def test_env_from_names_are_fine_even_when_they_look_secret(self, tmp_path: Path) -> None:
        config = load_text(
            tmp_path, '[mcp_servers.s]\ncommand = ["x"]\nenv_from = { API_KEY = "S_KEY" }\n'
        )
        assert config.mcp_servers["s"].env_from == {"API_KEY": "S_KEY"}

    @pytest.mark.parametrize("name", ["a__b", "Clock", "x" * 33, "-a"])
    def test_server_names_fit_tool_names(self, tmp_path: Path, name: str) -> None:
        error = error_for(tmp_path, f'[mcp_servers."{name}"]\ncommand = ["x"]\n')
        assert "its tools are named <server>__<tool>" in str(error)

    def test_malformed_tool_references(self, tmp_path: Path) -> None:
        error = error_for(tmp_path, '[agent]\ntools = ["mcp:", "mcp:clock/"]\n')
        assert "unknown: mcp:, mcp:clock/" in str(error)
