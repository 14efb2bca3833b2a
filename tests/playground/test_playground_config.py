"""The bot's configuration inside the playground: only what must differ is changed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.playground import Playground, playground_config
from core.config import parse_config, resolve_thread_bindings
from core.errors import ConfigError
from core.providers.demo import DemoProvider

FAKE = SimpleNamespace(base_url="http://127.0.0.1:4000", gateway_url="ws://127.0.0.1:4000/gateway")


def test_points_at_the_fake_and_switches_threads_on(tmp_path: Path) -> None:
    config = parse_config(
        {"agent": {"max_steps_per_turn": 7}}, config_path=tmp_path / "config.toml", env={}
    )
    inside = playground_config(config, FAKE, 42)
    assert inside.discord.api_base_url == "http://127.0.0.1:4000/api/v10"
    assert inside.discord.gateway_url == "ws://127.0.0.1:4000/gateway"
    assert inside.discord.command_guild_ids == [42]
    assert inside.store_url() == f"sqlite:///{tmp_path / 'playground.db'}"
    assert resolve_thread_bindings(inside).spawn_subagent_sessions is True
    assert inside.agent.max_steps_per_turn == 7
    assert inside.base_dir == tmp_path


def test_a_flag_set_in_the_file_is_respected(tmp_path: Path) -> None:
    config = parse_config(
        {"channels": {"discord": {"threadBindings": {"spawnSubagentSessions": False}}}},
        config_path=tmp_path / "config.toml",
        env={},
    )
    assert (
        resolve_thread_bindings(playground_config(config, FAKE, 1)).spawn_subagent_sessions is False
    )


def test_playground_table_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"playground\.host"):
        parse_config({"playground": {"host": "0.0.0.0"}}, env={})
    with pytest.raises(ConfigError, match=r"playground\.port"):
        parse_config({"playground": {"port": 70000}}, env={})
    defaults = parse_config({}, env={}).playground
    assert (defaults.port, defaults.state_file, defaults.store_file) == (
        8765,
        "playground.json",
        "playground.db",
    )


def test_the_demo_model_answers_only_without_a_provider() -> None:
    """With a [providers] table the playground uses the real model (build_services picks it)."""
    configured = parse_config(
        {"providers": {"local": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}}, env={}
    )
    assert Playground(configured).provider is None
    assert not Playground(configured).demo
    bare = Playground(parse_config({"playground": {"demo_sleep_seconds": 0.5}}, env={}))
    assert isinstance(bare.provider, DemoProvider)
    assert bare.provider.sleep_seconds == 0.5
