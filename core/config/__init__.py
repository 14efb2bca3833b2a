"""Typed configuration: ``from core.config import Config, load_config, resolve_flag, ...``.

The package is three layers whose imports flow one way (an import-linter
``layers`` contract in pyproject.toml enforces it):

* :mod:`core.config.loading` -- the whole-file :class:`Config`, loading, secret
  refusal and error translation;
* :mod:`core.config.flags` -- thread-binding flag resolution and runtime overrides;
* :mod:`core.config.tables` -- every TOML table as a pydantic model, provider
  tables included; pydantic and the standard library only.

Loading the config therefore imports no provider, HTTP client, database driver or
logging stack. This module only re-exports; import from here unless you are one of
the layers.
"""

from __future__ import annotations

from core.config.flags import (
    FLAG_NAMES,
    FLAG_SCHEDULED_TASKS,
    FLAG_SPAWN_SUBAGENT_SESSIONS,
    RUNTIME_SOURCE,
    FlagKeyMatch,
    FlagLevel,
    FlagSource,
    FlagValue,
    ThreadBindingSettings,
    channel_flag,
    find_flag_path,
    flag_is_bool,
    flag_level,
    overridable_paths,
    resolve_flag,
    resolve_thread_bindings,
    shortest_flag_key,
    validate_override,
)
from core.config.loading import (
    DEFAULT_CONFIG_FILE,
    DEFAULTS_SOURCE,
    Config,
    load_config,
    parse_config,
    toml_key_path,
)
from core.config.tables import (
    DEFAULT_ACCOUNT_ID,
    DEFAULT_ADMIN_POWER_LEVEL,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_DISPLAY_NAME,
    KNOWN_TOOLS,
    STORE_SCHEMES,
    AccountConfig,
    AcpAgentConfig,
    AgentConfig,
    AgentProfile,
    BindingsConfig,
    ChannelsConfig,
    DiscordConfig,
    DiscordEndpointsConfig,
    LoggingConfig,
    MatrixAccountConfig,
    MatrixConfig,
    McpServerConfig,
    McpServerName,
    PlaygroundConfig,
    ProviderConfig,
    ProviderName,
    SchedulerConfig,
    SessionConfig,
    SessionThreadBindings,
    StoreConfig,
    ThreadBindingsLevel,
    TomlTable,
    agent_display_name,
    default_token_env,
    mcp_reference,
)

__all__ = [
    "DEFAULTS_SOURCE",
    "DEFAULT_ACCOUNT_ID",
    "DEFAULT_ADMIN_POWER_LEVEL",
    "DEFAULT_CONFIG_FILE",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_DISPLAY_NAME",
    "FLAG_NAMES",
    "FLAG_SCHEDULED_TASKS",
    "FLAG_SPAWN_SUBAGENT_SESSIONS",
    "KNOWN_TOOLS",
    "RUNTIME_SOURCE",
    "STORE_SCHEMES",
    "AccountConfig",
    "AcpAgentConfig",
    "AgentConfig",
    "AgentProfile",
    "BindingsConfig",
    "ChannelsConfig",
    "Config",
    "DiscordConfig",
    "DiscordEndpointsConfig",
    "FlagKeyMatch",
    "FlagLevel",
    "FlagSource",
    "FlagValue",
    "LoggingConfig",
    "MatrixAccountConfig",
    "MatrixConfig",
    "McpServerConfig",
    "McpServerName",
    "PlaygroundConfig",
    "ProviderConfig",
    "ProviderName",
    "SchedulerConfig",
    "SessionConfig",
    "SessionThreadBindings",
    "StoreConfig",
    "ThreadBindingSettings",
    "ThreadBindingsLevel",
    "TomlTable",
    "agent_display_name",
    "channel_flag",
    "default_token_env",
    "find_flag_path",
    "flag_is_bool",
    "flag_level",
    "load_config",
    "mcp_reference",
    "overridable_paths",
    "parse_config",
    "resolve_flag",
    "resolve_thread_bindings",
    "shortest_flag_key",
    "toml_key_path",
    "validate_override",
]
