"""Shared by the core.config tests: config files written to a temporary directory and loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import Config, load_config
from core.errors import ConfigError

SECRET = "MTIzNDU2Nzg5.Gx7abc.super-secret-token-value"

TWO_ACCOUNTS = """
[session.threadBindings]
idleHours = 12

[channels.discord.threadBindings]
maxAgeHours = 48

[channels.discord.accounts.main.threadBindings]
idleHours = 2
spawnSubagentSessions = true

[channels.discord.accounts.other]
token_env = "OTHER_BOT_TOKEN"
"""


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    """Write a config file into tmp_path and return its path."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_text(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    """Load a config from TOML text with an empty (or given) environment."""
    return load_config(write(tmp_path, text), env=env or {})


def error_for(tmp_path: Path, text: str) -> ConfigError:
    """Load TOML text that must fail and return the ConfigError."""
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    return info.value
