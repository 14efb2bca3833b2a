"""Typed configuration: one TOML file for settings, the environment for secrets.

Loaded and validated once, before the bot connects, then passed down; nothing reads
the file or the environment later. Every mistake becomes a single ``ConfigError``
naming the file, the dotted key as the user spelled it and what would have been
accepted -- never a traceback, and never a secret's value. Secrets are refused in the
file outright (:func:`core.secret_keys.is_secret_key`, the same test the log
redaction uses), so a config file can be committed or pasted into an issue safely.

The top layer of :mod:`core.config`: the whole-file :class:`Config`, loading and the
translation of pydantic errors. It reads :mod:`core.config.flags` and
:mod:`core.config.tables`; neither reads it. Import these names from ``core.config``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, NamedTuple, Union, get_args, get_origin

from pydantic import BaseModel, Field, PrivateAttr, SecretStr, ValidationError

from core.config.flags import RUNTIME_SOURCE
from core.config.tables import (
    DEFAULT_ACCOUNT_ID,
    DEFAULT_DISPLAY_NAME,
    AcpAgentConfig,
    AgentConfig,
    AgentProfile,
    BindingsConfig,
    ChannelsConfig,
    DiscordEndpointsConfig,
    LoggingConfig,
    McpServerConfig,
    McpServerName,
    PlaygroundConfig,
    ProviderConfig,
    ProviderName,
    SchedulerConfig,
    SessionConfig,
    StoreConfig,
    TomlTable,
    agent_display_name,
    default_token_env,
    mcp_reference,
)
from core.errors import ConfigError, got
from core.secret_keys import is_secret_key

__all__ = [
    "DEFAULTS_SOURCE",
    "DEFAULT_CONFIG_FILE",
    "Config",
    "check_agent_references",
    "load_config",
    "parse_config",
    "toml_key_path",
]

DEFAULT_CONFIG_FILE = "config.toml"
DEFAULTS_SOURCE = "<defaults>"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_CONVENTIONAL_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class Config(TomlTable):
    """The whole validated configuration; tokens are kept privately, out of repr and dumps."""

    session: SessionConfig = Field(default_factory=SessionConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    bindings: BindingsConfig = Field(default_factory=BindingsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    discord: DiscordEndpointsConfig = Field(default_factory=DiscordEndpointsConfig)
    providers: dict[ProviderName, ProviderConfig] = Field(default_factory=dict)
    agents: dict[ProviderName, AgentProfile] = Field(default_factory=dict)
    mcp_servers: dict[McpServerName, McpServerConfig] = Field(default_factory=dict)
    acp_agents: dict[ProviderName, AcpAgentConfig] = Field(default_factory=dict)
    playground: PlaygroundConfig = Field(default_factory=PlaygroundConfig)

    _config_path: Path | None = PrivateAttr(default=None)
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _tokens: dict[str, SecretStr] = PrivateAttr(default_factory=dict)
    _matrix_tokens: dict[str, SecretStr] = PrivateAttr(default_factory=dict)

    @property
    def config_path(self) -> Path | None:
        """The absolute path of the file read, or None when running on built-in defaults."""
        return self._config_path

    @property
    def base_dir(self) -> Path:
        """Directory relative paths are resolved against: the file's, else the start cwd."""
        return self._base_dir

    def account_ids(self) -> tuple[str, ...]:
        """Configured account ids, or the implicit ``("default",)`` when none is configured."""
        return tuple(self.channels.discord.accounts) or (DEFAULT_ACCOUNT_ID,)

    def token_env(self, account_id: str) -> str:
        """Name of the environment variable holding ``account_id``'s token."""
        self._require_account(account_id)
        account = self.channels.discord.accounts.get(account_id)
        return account.token_env if account is not None else default_token_env(account_id)

    def account_token(self, account_id: str) -> str | None:
        """The account's token as read from the environment at load time; None if unset or empty."""
        self._require_account(account_id)
        token = self._tokens.get(account_id)
        return token.get_secret_value() if token is not None else None

    def matrix_account_ids(self) -> tuple[str, ...]:
        """The configured Matrix accounts; none unless the file has some (no implicit one)."""
        return tuple(self.channels.matrix.accounts)

    def matrix_access_token(self, account_id: str) -> str:
        """The Matrix account's access token, read from its ``access_token_env`` at load time
        (loading fails without it, so a configured account always has one)."""
        self._require_matrix_account(account_id)
        return self._matrix_tokens[account_id].get_secret_value()

    def matrix_appservice_registration(self, account_id: str) -> Path | None:
        """The account's application-service registration file, absolute; None without one."""
        self._require_matrix_account(account_id)
        path = self.channels.matrix.accounts[account_id].appservice_registration
        return None if path is None else self._base_dir / path

    def store_url(self) -> str:
        """The store URL with a relative SQLite path made absolute against ``base_dir``."""
        url = self.store.url
        prefix = next((p for p in ("sqlite:///", "sqlite+aiosqlite:///") if url.startswith(p)), "")
        if not prefix:
            return url
        database, sep, query = url[len(prefix) :].partition("?")
        if database in ("", ":memory:") or database.startswith(("/", "file:")):
            return url
        return f"{prefix}{(self._base_dir / database).as_posix()}{sep}{query}"

    def attachments_path(self) -> Path:
        """The directory of stored attachment copies, absolute."""
        return self._base_dir / self.store.attachments_dir

    def acp_workspace_root(self, name: str) -> Path:
        """Where the sessions of ``[acp_agents.<name>]`` get their working directories."""
        return self._base_dir / self.acp_agents[name].workspace_dir

    def json_log_path(self) -> Path | None:
        """Where JSON log lines go (relative to ``base_dir``), or None when disabled with ``""``."""
        if not self.logging.json_file:
            return None
        return self._base_dir / self.logging.json_file

    def display_name(self, agent: str | None, *, fallback: str = DEFAULT_DISPLAY_NAME) -> str:
        """The name ``agent`` is shown under: its ``[agents.<id>]`` display_name, else
        ``fallback`` (``"Subagent"``: never a free-text id, see :func:`agent_display_name`)."""
        return agent_display_name(self.agents, agent, fallback=fallback)

    def _require_account(self, account_id: str) -> None:
        """Fail loudly on an unknown account instead of quietly reading no token."""
        if account_id not in self.account_ids():
            raise ConfigError(
                RUNTIME_SOURCE,
                f"channels.discord.accounts.{account_id}",
                f"a configured account id ({', '.join(self.account_ids())})",
                "no such account",
            )

    def _require_matrix_account(self, account_id: str) -> None:
        if account_id not in self.channels.matrix.accounts:
            known = ", ".join(self.matrix_account_ids()) or "none configured"
            raise ConfigError(
                RUNTIME_SOURCE,
                f"channels.matrix.accounts.{account_id}",
                f"a configured Matrix account id ({known})",
                "no such account",
            )


class _LocInfo(NamedTuple):
    """Where a pydantic error points, translated back to the file's spelling."""

    path: str
    table: type[BaseModel] | None
    is_key: bool


def _unwrap(annotation: object) -> object:
    """Strip ``Annotated`` and ``| None`` so the walk sees the model or dict underneath."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, UnionType):
            args = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _walk_loc(
    loc: tuple[str | int, ...], root: type[BaseModel], *, keep_last: bool = False
) -> _LocInfo:
    """Follow ``loc`` through the models, naming each field by its TOML alias.

    ``keep_last`` leaves the final key as given: for an unknown key that is the user's
    own spelling, even when it happens to be a field's Python name.
    """
    keys: list[str | int] = []
    current: object = root
    table: type[BaseModel] | None = None
    is_key = False
    for index, item in enumerate(loc):
        if item == "[key]":
            is_key = True
            continue
        if isinstance(item, int):
            keys.append(item)
            current = None
            continue
        key = item
        if isinstance(current, type) and issubclass(current, BaseModel):
            table = current
            for name, info in current.model_fields.items():
                if key in (name, info.alias) and not (keep_last and index == len(loc) - 1):
                    key, current = info.alias or name, _unwrap(info.annotation)
                    break
            else:
                current = None
        elif get_origin(current) is dict:
            current = _unwrap(get_args(current)[1])
        else:
            current = None
        keys.append(key)
    return _LocInfo(_toml_key(tuple(keys)), table, is_key)


def toml_key_path(loc: tuple[str | int, ...], root: type[BaseModel] = Config) -> str:
    """The dotted TOML key path for a pydantic error ``loc`` (aliases, account ids kept)."""
    return _walk_loc(loc, root).path


def _allowed_keys(table: type[BaseModel] | None) -> str:
    """The keys a table accepts, spelled as the file must spell them."""
    if table is None:
        return "no keys here"
    return ", ".join(info.alias or name for name, info in table.model_fields.items())


def _kind(value: object) -> str:
    """A TOML-flavoured noun for a value's type; never the value itself."""
    nouns = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    nouns |= {dict: "a table", list: "an array"}
    return nouns.get(type(value), f"a {type(value).__name__}")


_TYPE_EXPECTED = {
    "bool_type": "true or false",
    "float_type": "a number",
    "int_type": "an integer",
    "string_type": "a string",
    "model_type": "a table",
    "dict_type": "a table",
    "list_type": "an array",
}


def _config_error_from_validation(exc: ValidationError, source: str) -> ConfigError:
    """Turn pydantic's first error into a ConfigError in the file's own terms.

    Only numbers and known-harmless strings are echoed; anything else is described by
    type, because a misplaced secret must not reach a log through an error message.
    """
    error = exc.errors(include_url=False, include_input=True)[0]
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    loc = tuple(error["loc"])
    where = _walk_loc(loc, Config, keep_last=kind == "extra_forbidden")
    if kind == "tb_config":
        expected, problem = str(ctx["expected"]), str(ctx["problem"])
    elif kind == "extra_forbidden":
        expected, problem = f"one of the keys {_allowed_keys(where.table)}", "unknown key"
    elif where.is_key and loc[0] == "mcp_servers":
        expected = (
            "a server name of 1 to 32 characters from a-z, 0-9, '-' and single '_' "
            "(its tools are named <server>__<tool>)"
        )
        problem = f"got {loc[-2]!r}"
    elif where.is_key:
        expected = "an account id of 1 to 32 characters from a-z, 0-9, '_' and '-'"
        problem = f"got {loc[-2]!r}"  # the key is in the path anyway
    elif kind in _TYPE_EXPECTED:
        expected, problem = _TYPE_EXPECTED[kind], f"got {_kind(value)}"
    elif kind in ("greater_than_equal", "greater_than"):
        bound = f">= {ctx['ge']:g}" if kind == "greater_than_equal" else f"> {ctx['gt']:g}"
        expected, problem = f"a number {bound}", got(value)
    elif kind == "finite_number":
        expected, problem = "a finite number", got(value)
    elif kind == "literal_error":
        expected, problem = f"one of {ctx['expected']}", got(value)
    else:
        expected, problem = error["msg"], ""
    return ConfigError(source, where.path, expected, problem)


def _toml_key(keys: tuple[str | int, ...]) -> str:
    """A dotted key path as TOML would spell it: keys quoted unless bare, indexes as ``[i]``."""
    path = ""
    for key in keys:
        if isinstance(key, int):
            path += f"[{key}]"
        else:
            path += ("." if path else "") + (key if _BARE_KEY.fullmatch(key) else f'"{key}"')
    return path


def _reject_secrets(data: Mapping[str, Any], source: str, keys: tuple[str | int, ...] = ()) -> None:
    """Refuse secret-looking keys anywhere in the file, before anything else can echo them."""
    for key, value in data.items():
        path = (*keys, str(key))
        in_env = path[0] in ("mcp_servers", "acp_agents") and path[2:3] in (("env",), ("env_from",))
        if len(path) == 4 and in_env:
            continue  # names of variables (env_from), or refused by McpServerConfig (env)
        if is_secret_key(str(key)):
            raise ConfigError(
                source,
                _toml_key(path),
                "no secrets in the config file: put the secret in an environment variable "
                f"and reference it with {_secret_hint(path)}",
                "a secret-looking key was found; its value is not shown",
            )
        if isinstance(value, Mapping):
            _reject_secrets(value, source, path)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    _reject_secrets(item, source, (*path, index))


def _secret_hint(path: tuple[str | int, ...]) -> str:
    """How the table at ``path`` names the variable holding its secret."""
    if path[:2] == ("channels", "matrix"):
        return 'access_token_env (e.g. access_token_env = "MATRIX_ACCESS_TOKEN")'
    in_account = path[:3] == ("channels", "discord", "accounts") and len(path) > 4
    env_name = default_token_env(str(path[3])) if in_account else "DISCORD_TOKEN"
    return f'token_env (e.g. token_env = "{env_name}")'


def _read_matrix_tokens(
    config: Config, source: str, env: Mapping[str, str]
) -> dict[str, SecretStr]:
    """Every Matrix account's access token from its variable; a missing one is an error
    naming the variable (never a value), and so is a missing registration file."""
    tokens: dict[str, SecretStr] = {}
    for account_id, account in config.channels.matrix.accounts.items():
        where = f"channels.matrix.accounts.{account_id}"
        name = account.access_token_env
        token = env.get(name, "")
        if not token:
            # a name in capitals is a variable's; anything else might be a pasted token
            shown = name if _CONVENTIONAL_ENV_NAME.fullmatch(name) else "the variable it names"
            raise ConfigError(
                source,
                f"{where}.access_token_env",
                f"the environment variable {shown} set to the account's access token",
                f"{shown} is {'empty' if name in env else 'not set'}",
            )
        tokens[account_id] = SecretStr(token)
        registration = config.matrix_appservice_registration(account_id)
        if registration is not None and not registration.is_file():
            raise ConfigError(
                source,
                f"{where}.appservice_registration",
                "the path of an application service's registration file (relative: to "
                "this file's directory)",
                "no such file",
            )
    return tokens


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
        _check_mcp_servers(config, profile.tools, f"agents.{agent_id}.tools", source)
        if profile.acp and profile.acp not in config.acp_agents:
            known = ", ".join(config.acp_agents) or "none configured"
            raise ConfigError(
                source,
                f"agents.{agent_id}.acp",
                f"the name of an [acp_agents.<name>] table ({known})",
                got(profile.acp),
            )
    if config.agent.tools is not None:
        _check_mcp_servers(config, config.agent.tools, "agent.tools", source)


def check_store_for_shards(config: Config, source: str) -> None:
    """SQLite serves one process: shards split over several processes need PostgreSQL."""
    if config.store.url.startswith("postgresql"):
        return
    if config.store.schema_:
        raise ConfigError(
            source, "store.schema", "no schema with SQLite (it is for PostgreSQL)", "set"
        )
    ids, count = config.discord.shard_ids, config.discord.shard_count
    if ids is not None and count is not None and len(ids) < count:
        raise ConfigError(
            source,
            "discord.shard_ids",
            "every shard (0 to shard_count - 1) while the store is SQLite, which serves "
            "one process; to split shards over several processes use PostgreSQL "
            '([store] url = "postgresql+asyncpg://user@host/db")',
            f"{len(ids)} of {count} shards",
        )


def _check_mcp_servers(config: Config, tools: list[str], where: str, source: str) -> None:
    """``mcp:<server>`` must name a ``[mcp_servers.<server>]`` table of the same file."""
    for name in tools:
        reference = mcp_reference(name)
        if reference is not None and reference[0] not in config.mcp_servers:
            known = ", ".join(config.mcp_servers) or "none configured"
            raise ConfigError(
                source,
                where,
                f"tools of a configured [mcp_servers.<name>] table ({known})",
                got(name),
            )


def _build(
    data: Mapping[str, Any], source: str, config_path: Path | None, env: Mapping[str, str]
) -> Config:
    """Validate ``data`` and attach what is not part of the file: location and tokens."""
    _reject_secrets(data, source)
    try:
        # by_name=False: the file must use the seed's camelCase spelling, one spelling only.
        config = Config.model_validate(data, by_name=False)
    except ValidationError as exc:
        # from None: pydantic's own message would echo the offending input value.
        raise _config_error_from_validation(exc, source) from None
    check_agent_references(config, source)
    check_store_for_shards(config, source)
    config._config_path = config_path
    config._base_dir = config_path.parent if config_path is not None else Path.cwd()
    for account_id in config.account_ids():
        token = env.get(config.token_env(account_id), "")
        if token:
            config._tokens[account_id] = SecretStr(token)
    config._matrix_tokens = _read_matrix_tokens(config, source, env)
    return config


def parse_config(
    data: Mapping[str, Any],
    *,
    config_path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Build a Config from already-parsed TOML data; what ``load_config`` does after reading.

    Useful where a test or tool has a dict rather than a file. ``config_path`` only sets
    ``base_dir`` and the name used in errors; the file is not read.
    """
    source = str(config_path) if config_path is not None else DEFAULTS_SOURCE
    absolute = config_path.absolute() if config_path is not None else None
    return _build(data, source, absolute, os.environ if env is None else env)


def load_config(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> Config:
    """Read, validate and return the configuration, or raise one ConfigError.

    ``path=None`` reads ``./config.toml`` when it exists and otherwise runs on built-in
    defaults; an explicit path must exist. Tokens are read from ``env`` (default
    ``os.environ``) now, once, and never again.
    """
    environment = os.environ if env is None else env
    if path is None:
        candidate = Path.cwd() / DEFAULT_CONFIG_FILE
        if not candidate.is_file():
            return _build({}, DEFAULTS_SOURCE, None, environment)
        path = candidate
    source = str(path)
    if not path.exists():
        raise ConfigError(source, "", "an existing TOML file", "file not found")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            source, "", "a UTF-8 encoded TOML file", f"undecodable byte at offset {exc.start}"
        ) from None
    except OSError as exc:
        raise ConfigError(source, "", "a readable TOML file", exc.strerror or str(exc)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", "valid TOML", str(exc)) from None
    return _build(data, source, path.absolute(), environment)
