"""The operational tables of config.toml: [store], [bindings], [logging], [agent].

Split from :mod:`core.config` (which re-exports them) so that module keeps to
loading, errors and the whole-file model. These tables use snake_case keys;
the seed's flag tables, in :mod:`core._config_flags`, keep camelCase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, StringConstraints, field_validator

from core._config_flags import TomlTable, invalid_value
from core.errors import ConfigError, got

if TYPE_CHECKING:
    from core.config import Config

__all__ = [
    "KNOWN_TOOLS",
    "STORE_SCHEMES",
    "AgentConfig",
    "AgentProfile",
    "BindingsConfig",
    "DiscordEndpointsConfig",
    "LoggingConfig",
    "PlaygroundConfig",
    "ProviderName",
    "Seconds",
    "StoreConfig",
    "check_agent_references",
]

STORE_SCHEMES = ("sqlite", "sqlite+aiosqlite", "postgresql+asyncpg")
"""The same as ``core.store.engine.SUPPORTED_DRIVERS`` (a test keeps them equal), spelled
out here so loading the config does not import SQLAlchemy."""

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
ProviderName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,32}$")]


class StoreConfig(TomlTable):
    """``[store]``: where bindings and session events are persisted."""

    url: str = "sqlite:///threadbound.db"
    busy_timeout_ms: int = Field(default=5000, gt=0)

    @field_validator("url")
    @classmethod
    def _supported_url(cls, value: str) -> str:
        """Only the drivers we test are accepted, and no password in the file."""
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme not in STORE_SCHEMES:
            raise invalid_value(
                "a SQLAlchemy URL starting with sqlite://, sqlite+aiosqlite:// "
                "or postgresql+asyncpg://",
                f"got scheme {scheme!r}" if scheme else "no scheme",
            )
        try:
            password = urlsplit(value).password
        except ValueError:
            password = None
        if password:
            raise invalid_value(
                "a URL without a password; put it in the PGPASSWORD environment variable",
                "the URL contains a password (not shown)",
            )
        return value


class BindingsConfig(TomlTable):
    """``[bindings]``: timing of the binding service's background work."""

    touch_flush_seconds: Seconds = 5.0
    sweep_interval_seconds: Seconds = 60.0


class LoggingConfig(TomlTable):
    """``[logging]``."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    json_file: str = "logs/threadbound.jsonl"
    console: bool = True


class AgentConfig(TomlTable):
    """``[agent]``: how every session's agent loop behaves."""

    steer_skips_pending_tools: bool = True
    follow_up_mode: Literal["one-at-a-time", "all"] = "one-at-a-time"
    max_steps_per_turn: int = Field(default=25, gt=0, le=1000)
    max_total_tokens: int = Field(default=0, ge=0)
    """Per-session token budget; 0 means no limit."""
    max_cost_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Per-session cost budget; 0 means no limit."""
    idle_evict_seconds: Seconds = 900.0
    subagent_timeout_seconds: float = Field(default=1800.0, ge=0, allow_inf_nan=False)
    """A subagent's task is announced as timed out after this long; 0 means never."""
    http_get_allowed_hosts: list[str] = Field(default_factory=list)
    """Hosts http_get may fetch from (``*.example.org``: subdomains); none by default."""


class DiscordEndpointsConfig(TomlTable):
    """``[discord]``: where the bot's Discord is; unset means Discord's own addresses.

    A REST proxy (or the local playground) needs both: ``api_base_url`` with the
    version path (``https://proxy.example/api/v10``) and the gateway websocket URL.
    """

    api_base_url: str = ""
    gateway_url: str = ""
    command_guild_ids: list[int] = Field(default_factory=list)
    """Sync app commands to these guilds only (instant); empty: globally (slow to appear)."""
    allow_bots: bool = False
    """Let other bots' messages in bound threads reach the agent."""
    thread_auto_archive_minutes: Literal[60, 1440, 4320, 10080] = 10080
    """Inactivity after which Discord archives a thread the bot opened (the values it allows)."""

    @field_validator("api_base_url", "gateway_url")
    @classmethod
    def _url_or_empty(cls, value: str) -> str:
        if not value:
            return value
        scheme = urlsplit(value).scheme
        if scheme not in ("http", "https", "ws", "wss"):
            raise invalid_value(
                'an http(s):// or ws(s):// URL, or "" for Discord\'s own',
                f"got scheme {scheme!r}" if scheme else "no scheme",
            )
        return value.rstrip("/")


class PlaygroundConfig(TomlTable):
    """``[playground]``: the local Discord-compatible server ``python -m bot`` runs without a token.

    It always listens on 127.0.0.1 (a playground is never exposed); ``port`` 0 picks a
    free one. Relative paths are resolved against the config file's directory. The
    store is kept apart from the real bot's so playground threads never reach Discord.
    """

    port: int = Field(default=8765, ge=0, le=65535)
    state_file: str = "playground.json"
    """Where the fake Discord's guild, channels and messages are saved; "" keeps them in memory."""
    store_file: str = "playground.db"
    """The bot's SQLite store while in the playground."""
    demo_sleep_seconds: Seconds = 3.0
    """How long each step of the demo model (used when no provider is configured) sleeps."""
    demo_steps: int = Field(default=3, ge=1, le=20)
    """Sleeping steps per turn of the demo model before its final answer."""

    @field_validator("store_file")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise invalid_value("a file name for the playground's SQLite store", "got an empty one")
        return value


KNOWN_TOOLS = ("sleep", "http_get", "spawn_subagent", "emit_artifact")
"""Tool names an agent profile may list."""


class AgentProfile(TomlTable):
    """``[agents.<id>]``: one agent a session can run, and how it appears in Discord.

    ``display_name`` and ``avatar_url`` are the webhook persona. ``provider``
    names a ``[providers.<name>]`` table (default: the first one); references
    to providers and other agents are checked when the file is loaded.
    """

    display_name: str = Field(min_length=1, max_length=80)
    avatar_url: str = ""
    provider: str = ""
    model: str = ""
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    user_startable: bool = True
    artifact_types: list[str] = Field(default_factory=list)
    handoff_to: list[str] = Field(default_factory=list)
    handoff_thread: Literal["same", "new"] = "same"
    """Where this agent takes over after an accepted handoff: the offer's thread, or a new one."""

    @field_validator("avatar_url")
    @classmethod
    def _http_avatar(cls, value: str) -> str:
        if value and urlsplit(value).scheme not in ("http", "https"):
            raise invalid_value('an http(s):// image URL, or ""', "not an http(s) URL")
        return value

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in KNOWN_TOOLS]
        if unknown:
            raise invalid_value(
                f"tool names from {', '.join(KNOWN_TOOLS)}", f"unknown: {', '.join(unknown)}"
            )
        return value


def check_agent_references(config: Config, source: str) -> None:
    """Agent profiles may only name providers and agents that exist in the same file."""
    for agent_id, profile in config.agents.items():
        if profile.provider and profile.provider not in config.providers:
            known = ", ".join(config.providers) or "none configured"
            raise ConfigError(
                source,
                f"agents.{agent_id}.provider",
                f"the name of a [providers.<name>] table ({known})",
                got(profile.provider),
            )
        for target in profile.handoff_to:
            if target not in config.agents:
                raise ConfigError(
                    source,
                    f"agents.{agent_id}.handoff_to",
                    f"ids of [agents.<id>] tables ({', '.join(config.agents)})",
                    got(target),
                )
