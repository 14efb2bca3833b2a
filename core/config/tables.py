"""Every table of config.toml as a pydantic model: the bottom of :mod:`core.config`.

Only declarations and per-value checks live here; nothing in this module knows the
whole file, reads it, or resolves a flag. It imports nothing but pydantic and the
standard library, so any layer (flag resolution, loading, a provider, a service
holding agent profiles) can use these models without pulling in what they feed.

The seed's flag-bearing tables ([session], [channels]) keep camelCase keys; the
operational tables ([store], [bindings], [logging], [agent], [discord],
[playground], [agents.<id>], [providers.<name>]) use snake_case.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, ClassVar, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "DEFAULT_ACCOUNT_ID",
    "DEFAULT_ADMIN_POWER_LEVEL",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_DISPLAY_NAME",
    "DEFAULT_ENABLED",
    "DEFAULT_IDLE_HOURS",
    "DEFAULT_MAX_AGE_HOURS",
    "DEFAULT_SCHEDULED_TASKS",
    "DEFAULT_SPAWN_SUBAGENT_SESSIONS",
    "KNOWN_TOOLS",
    "STORE_SCHEMES",
    "AccountConfig",
    "AccountId",
    "AcpAgentConfig",
    "AgentConfig",
    "AgentProfile",
    "BindingsConfig",
    "ChannelsConfig",
    "DiscordConfig",
    "DiscordEndpointsConfig",
    "Hours",
    "LoggingConfig",
    "MatrixAccountConfig",
    "MatrixConfig",
    "McpServerConfig",
    "McpServerName",
    "PlaygroundConfig",
    "ProviderConfig",
    "ProviderName",
    "SchedulerConfig",
    "Seconds",
    "SessionConfig",
    "SessionThreadBindings",
    "StoreConfig",
    "ThreadBindingsLevel",
    "TomlTable",
    "agent_display_name",
    "default_token_env",
    "invalid_value",
]

DEFAULT_ENABLED = True
DEFAULT_IDLE_HOURS = 24.0
DEFAULT_MAX_AGE_HOURS = 0.0
DEFAULT_SPAWN_SUBAGENT_SESSIONS = False
DEFAULT_SCHEDULED_TASKS = True
DEFAULT_ACCOUNT_ID = "default"
DEFAULT_ADMIN_POWER_LEVEL = 100
"""A Matrix room's administrators by default: power level 100, what a room's creator has."""
MAX_POWER_LEVEL: Final = 2**53 - 1
"""The largest integer Matrix's canonical JSON carries, so the largest power level."""

DEFAULT_DISPLAY_NAME: Final = "Subagent"
"""The name an agent without a profile is shown under (see :func:`agent_display_name`)."""

STORE_SCHEMES = ("sqlite", "sqlite+aiosqlite", "postgresql+asyncpg")
"""The same as ``core.store.engine.SUPPORTED_DRIVERS`` (a test keeps them equal), spelled
out here so loading the config does not import SQLAlchemy."""

KNOWN_TOOLS = ("sleep", "http_get", "spawn_subagent", "emit_artifact", "schedule_wakeup")
"""Built-in tool names an agent profile may list (besides ``mcp:<server>[/<tool>]``)."""

MCP_PREFIX: Final = "mcp:"
DEFAULT_TOOL_RESULT_MAX_CHARS: Final = 20_000
DEFAULT_APPROVAL_TIMEOUT_SECONDS: Final = 600.0
DEFAULT_CONTEXT_WINDOW: Final = 32_768
"""A window most current models exceed: too small only compacts early, too large fails."""

Hours = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
AccountId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,32}$")]
ProviderName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,32}$")]
McpServerName = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*(?:_[a-z0-9-]+)*$", max_length=32)
]
"""A server's name becomes the prefix of its tools' model names (``server__tool``), so it
holds only what every provider accepts in a tool name, and never two underscores in a row."""
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MATRIX_SERVER: Final = r"(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9.-]{1,255})(?::[0-9]{1,5})?"
_MATRIX_USER_ID: Final = re.compile(rf"@[\x21-\x39\x3b-\x7e]+:{_MATRIX_SERVER}")
"""``@localpart:server``: a localpart of printable ASCII without ``:`` (the spec's historical
grammar, which clients must accept), then a host name or IP literal and an optional port."""
_MATRIX_ROOM_ID: Final = re.compile(r"![\x21-\x7e]+")
"""``!opaque`` or ``!opaque:server``: room version 12 dropped the server part."""
_MATRIX_ID_MAX: Final = 255
_MATRIX_TOKEN_PREFIXES: Final = ("syt_", "mct_")
"""How Synapse's and the Matrix Authentication Service's access tokens begin."""
_MCP_SERVER: Final = re.compile(r"(?=.{1,32}$)[a-z0-9][a-z0-9-]*(?:_[a-z0-9-]+)*")


def invalid_value(expected: str, problem: str) -> PydanticCustomError:
    """A validator error carrying our own wording, which never includes the input value.

    The loader recognises the ``tb_config`` type and passes ``expected`` and
    ``problem`` straight into its ``ConfigError``.
    """
    return PydanticCustomError(
        "tb_config", "{expected}", {"expected": expected, "problem": problem}
    )


def check_env_name(
    value: str, *, example: str, holds: str, token_prefixes: tuple[str, ...] = ()
) -> str:
    """``value`` is an environment variable's NAME: a pasted value of what it ``holds`` (the
    token, the key) is refused without being shown, and so is a name that starts as such a
    token does (``token_prefixes``)."""
    if not _ENV_NAME.fullmatch(value) or value.startswith(token_prefixes):
        raise invalid_value(
            f"the NAME of an environment variable (letters, digits and '_'), e.g. {example}",
            f"the value is not a variable name; if it is the {holds} itself, move it into "
            "that environment variable (value not shown)",
        )
    return value


class TomlTable(BaseModel):
    """Base of every TOML table: unknown keys and silent type coercions are mistakes."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, strict=True, loc_by_alias=True
    )


# -- [session] and [channels]: the flag-bearing tables (camelCase) ---------------------


class SessionThreadBindings(TomlTable):
    """``[session.threadBindings]``: the channel-agnostic baseline every channel inherits."""

    enabled: bool = DEFAULT_ENABLED
    idle_hours: Hours = Field(default=DEFAULT_IDLE_HOURS, alias="idleHours")
    max_age_hours: Hours = Field(default=DEFAULT_MAX_AGE_HOURS, alias="maxAgeHours")


class ThreadBindingsLevel(TomlTable):
    """Channel- or account-level ``threadBindings``; ``None`` means inherit from the level below."""

    enabled: bool | None = None
    idle_hours: Hours | None = Field(default=None, alias="idleHours")
    max_age_hours: Hours | None = Field(default=None, alias="maxAgeHours")
    spawn_subagent_sessions: bool | None = Field(default=None, alias="spawnSubagentSessions")
    scheduled_tasks: bool | None = Field(default=None, alias="scheduledTasks")


class SessionConfig(TomlTable):
    """``[session]``."""

    thread_bindings: SessionThreadBindings = Field(
        default_factory=SessionThreadBindings, alias="threadBindings"
    )


class AccountConfig(TomlTable):
    """One Discord bot account; it names its token's environment variable, never the token."""

    token_env: str
    thread_bindings: ThreadBindingsLevel = Field(
        default_factory=ThreadBindingsLevel, alias="threadBindings"
    )

    @field_validator("token_env")
    @classmethod
    def _is_variable_name(cls, value: str) -> str:
        """Catch a token pasted where its variable's name belongs, without echoing it."""
        return check_env_name(value, example="DISCORD_TOKEN_MAIN", holds="token")


def default_token_env(account_id: str) -> str:
    """The variable an account's token is read from when ``token_env`` is not set."""
    if account_id == DEFAULT_ACCOUNT_ID:
        return "DISCORD_TOKEN"
    return "DISCORD_TOKEN_" + account_id.upper().replace("-", "_")


class DiscordConfig(TomlTable):
    """``[channels.discord]``: channel-level flags and the bot accounts."""

    thread_bindings: ThreadBindingsLevel = Field(
        default_factory=ThreadBindingsLevel, alias="threadBindings"
    )
    accounts: dict[AccountId, AccountConfig] = Field(default_factory=dict)

    ACCOUNT_FLAGS: ClassVar[bool] = True
    """Each account may set the thread-binding flags for itself."""

    def account_ids(self) -> tuple[str, ...]:
        """The configured accounts; without any, the implicit ``default`` (DISCORD_TOKEN)."""
        return tuple(self.accounts) or (DEFAULT_ACCOUNT_ID,)

    @field_validator("accounts", mode="before")
    @classmethod
    def _fill_token_env(cls, value: object) -> object:
        """Give each account its conventional ``token_env`` so dumps show where tokens come from."""
        if not isinstance(value, Mapping):
            return value
        filled: dict[object, object] = {}
        for key, table in value.items():
            if isinstance(table, Mapping) and "token_env" not in table:
                table = {"token_env": default_token_env(str(key)), **table}
            filled[key] = table
        return filled


class MatrixAccountConfig(TomlTable):
    """``[channels.matrix.accounts.<id>]``: one Matrix account the bot runs as.

    Like a Discord account it names the environment variable holding its access token
    (``access_token_env``), never the token; the variable must be set when the file is
    loaded, since a Matrix account is only ever configured on purpose.
    """

    homeserver: str
    """The client-server API's base URL (``https://matrix.example.org``)."""
    user_id: str
    """The account's full user id, ``@threadbound:example.org``."""
    access_token_env: str
    rooms: list[str] = Field(default_factory=list)
    """Room ids (``!abc:example.org``) the bot serves; empty: every room it is invited to."""
    admin_power_level: int = Field(default=DEFAULT_ADMIN_POWER_LEVEL, ge=1, le=MAX_POWER_LEVEL)
    """A room member at this power level or above counts as an administrator there."""
    appservice_registration: str | None = Field(default=None, min_length=1)
    """An application service's registration file (relative: to the config's directory):
    personas then speak as virtual users of their own."""

    @field_validator("homeserver")
    @classmethod
    def _http_url(cls, value: str) -> str:
        check_http_url(
            value,
            example="https://matrix.example.org",
            where_secrets_go="the access token goes in the variable named by access_token_env",
        )
        return value.rstrip("/")

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str) -> str:
        if len(value) > _MATRIX_ID_MAX or not _MATRIX_USER_ID.fullmatch(value):
            raise invalid_value(
                "a full Matrix user id, @localpart:server, e.g. @threadbound:example.org",
                "not of that form",
            )
        return value

    @field_validator("access_token_env")
    @classmethod
    def _is_variable_name(cls, value: str) -> str:
        """Synapse's tokens (``syt_…``, ``mct_…``) are valid variable names: refuse them too."""
        return check_env_name(
            value,
            example="MATRIX_ACCESS_TOKEN",
            holds="access token",
            token_prefixes=_MATRIX_TOKEN_PREFIXES,
        )

    @field_validator("rooms")
    @classmethod
    def _room_ids(cls, value: list[str]) -> list[str]:
        wrong = [
            index
            for index, room in enumerate(value)
            if len(room) > _MATRIX_ID_MAX or not _MATRIX_ROOM_ID.fullmatch(room)
        ]
        if wrong:
            raise invalid_value(
                "room ids such as !abc:example.org (a room's settings show it; not its #alias)",
                f"item {wrong[0]} is not a room id",
            )
        if len(set(value)) != len(value):
            raise invalid_value("each room once", "a room id is listed twice")
        return value


class MatrixConfig(TomlTable):
    """``[channels.matrix]``: channel-level flags and the Matrix accounts."""

    thread_bindings: ThreadBindingsLevel = Field(
        default_factory=ThreadBindingsLevel, alias="threadBindings"
    )
    accounts: dict[AccountId, MatrixAccountConfig] = Field(default_factory=dict)

    ACCOUNT_FLAGS: ClassVar[bool] = False
    """An account has no flag level of its own: an administrator overrides the channel's."""

    def account_ids(self) -> tuple[str, ...]:
        """The configured accounts (none is implicit: Matrix runs only when configured)."""
        return tuple(self.accounts)

    @field_validator("accounts")
    @classmethod
    def _one_account_per_user(
        cls, value: dict[str, MatrixAccountConfig]
    ) -> dict[str, MatrixAccountConfig]:
        """Two accounts logged in as one user would both answer every event."""
        seen: dict[str, str] = {}
        for account_id, account in value.items():
            if account.user_id in seen:
                raise invalid_value(
                    "one account per Matrix user",
                    f"accounts {seen[account.user_id]} and {account_id} are the same user",
                )
            seen[account.user_id] = account_id
        return value


class ChannelsConfig(TomlTable):
    """``[channels]``: one table per channel adapter."""

    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)


# -- the operational tables (snake_case) -------------------------------------------------


class StoreConfig(TomlTable):
    """``[store]``: where bindings and session events are persisted."""

    url: str = "sqlite:///threadbound.db"
    busy_timeout_ms: int = Field(default=5000, gt=0)
    attachments_dir: str = Field(default="attachments", min_length=1)
    """Where copies of images people attach are kept (relative: to the config's directory)."""
    schema_: str = Field(default="", alias="schema", pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,62})?$")
    """PostgreSQL only: the schema holding every table (it must exist); "" is the default
    search path. Several deployments can then share one database."""
    lease_seconds: Seconds = 30.0
    """How long work a process has taken (a completion being posted, a running session)
    stays its own without renewal: after a crash, another process takes it over then."""

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


class SchedulerConfig(TomlTable):
    """``[scheduler]``: scheduled jobs (``/schedule``) and the ``schedule_wakeup`` tool."""

    timezone: str = Field(default="UTC", min_length=1)
    """The zone of date-times and cron expressions when a job names none (an IANA name)."""
    max_jobs_per_user: int = Field(default=10, ge=1)
    """Live jobs one person may have in one server (an agent's wake-ups count as its
    session owner's)."""
    min_interval_seconds: int = Field(default=300, ge=1)
    """The shortest spacing of a recurring job (``every`` or cron) that is accepted."""
    misfire_grace_seconds: int = Field(default=3600, ge=0)
    """A run missed (the bot was down) by less than this is run once when the bot is back;
    older ones are recorded as missed."""

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        """A zone the machine knows, so no job is refused later for the default's sake."""
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise invalid_value(
                "an IANA time zone name such as Europe/Paris", repr(value)
            ) from None
        return value


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
    tools: list[str] | None = None
    """The tools of an agent without a profile, as a profile's ``tools`` (``"mcp:clock"``,
    ``"mcp:clock/get_current_time"``, built-in names); unset: sleep, http_get,
    spawn_subagent and schedule_wakeup."""
    tool_result_max_chars: int = Field(default=DEFAULT_TOOL_RESULT_MAX_CHARS, ge=1000)
    """A tool result longer than this is cut, with a marker, before the model reads it."""
    approval_timeout_seconds: Seconds = DEFAULT_APPROVAL_TIMEOUT_SECONDS
    """A tool call waiting for approval longer than this is denied."""
    compaction_reserve_tokens: int = Field(default=4096, ge=0)
    """Room kept free in the context window for the answer: a prompt that would leave
    less is compacted first."""
    keep_recent_tokens: int = Field(default=8192, ge=0)
    """How much of the recent conversation a compaction keeps word for word."""
    attachment_text_max_bytes: int = Field(default=200_000, ge=1)
    """A text file attached in a bound thread reaches the model up to this size."""
    attachment_fetch_timeout_seconds: Seconds = 30.0
    """A file that takes longer than this to download is named as unreadable; the rest
    of its message still goes through."""

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_tool_names(value)


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
    show_tool_calls: Literal["compact", "off"] = "compact"
    """Show each tool call as one line in the agent's streamed message, or not at all."""
    operator_ids: list[int] = Field(default_factory=list)
    """Discord user ids who run the bot itself: they may change a flag for every
    server at once (``/config set ... everywhere:True``)."""
    shard_count: int | None = Field(default=None, ge=1, le=4096)
    """How many gateway shards the bot has in all; unset: Discord's recommendation."""
    shard_ids: list[int] | None = None
    """The shards this process connects; unset: every shard (one process)."""
    requests_per_second: float = Field(default=45.0, gt=0, le=50)
    """Requests the bot starts per second with its token, at most (Discord allows 50 in
    all): it paces itself below the global limit instead of learning it from 429s. The
    limit is the token's, whichever process sends: processes that split the shards split
    this too (:attr:`process_requests_per_second`)."""
    webhooks_per_channel: int = Field(default=10, ge=1, le=15)
    """Persona webhooks the bot makes in one channel, at most (Discord allows 15): a busy
    channel's threads are spread over them, each thread keeping its own."""
    webhook_requests_per_second: float = Field(default=5.0, gt=0, le=50)
    """Requests (posts, edits) the bot starts per second through one persona webhook, at
    most. They go one at a time, each after the one before has returned, so the webhook's
    own bucket (commonly 5 per 2 seconds, read from Discord's headers) sets the pace below
    this. The final text of an answer goes before streaming edits waiting on the same
    webhook."""
    catch_up_max_messages: int = Field(default=50, ge=0, le=1000)
    """After a downtime, at most this many messages people wrote in one bound thread
    meanwhile are read back and answered (the thread says when more were cut); 0: none."""

    @property
    def process_requests_per_second(self) -> float:
        """This process's share of :attr:`requests_per_second`: its shards over all of
        them (two processes of one shard each, 22.5 each), so processes that share a
        token stay under its global limit together without talking to each other."""
        if self.shard_ids is None or self.shard_count is None:
            return self.requests_per_second
        return self.requests_per_second * len(self.shard_ids) / self.shard_count

    @model_validator(mode="after")
    def _shards_in_range(self) -> DiscordEndpointsConfig:
        if self.shard_ids is None:
            return self
        if self.shard_count is None:
            raise invalid_value(
                "shard_ids together with shard_count (the total over every process)",
                "shard_count is not set",
            )
        if not self.shard_ids:
            raise invalid_value("at least one shard id", "an empty list")
        if len(set(self.shard_ids)) != len(self.shard_ids):
            raise invalid_value("each shard id once", "a shard id is repeated")
        wrong = [i for i in self.shard_ids if not 0 <= i < self.shard_count]
        if wrong:
            raise invalid_value(
                f"shard ids from 0 to {self.shard_count - 1} (shard_count - 1)",
                f"got {', '.join(map(str, wrong))}",
            )
        return self

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
    acp: str = ""
    """This agent is the external agent of that ``[acp_agents.<name>]`` table (it brings
    its own model and tools, so ``provider``, ``model`` and ``tools`` do not apply)."""

    @model_validator(mode="after")
    def _acp_brings_its_own(self) -> AgentProfile:
        if self.acp and (self.provider or self.model or self.tools):
            raise invalid_value(
                "either acp (an external agent, with its own model and tools) or "
                "provider / model / tools (a model this bot calls)",
                "both are set",
            )
        return self

    @field_validator("avatar_url")
    @classmethod
    def _http_avatar(cls, value: str) -> str:
        if value and urlsplit(value).scheme not in ("http", "https"):
            raise invalid_value('an http(s):// image URL, or ""', "not an http(s) URL")
        return value

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        return check_tool_names(value)


def check_tool_names(value: list[str]) -> list[str]:
    """Built-in names, ``mcp:<server>`` or ``mcp:<server>/<tool>``; which servers exist is
    checked with the whole file, which tools they have when the bot starts."""
    unknown = [name for name in value if name not in KNOWN_TOOLS and mcp_reference(name) is None]
    if unknown:
        raise invalid_value(
            f'tool names from {", ".join(KNOWN_TOOLS)}, or "mcp:<server>" / "mcp:<server>/<tool>"',
            f"unknown: {', '.join(unknown)}",
        )
    return value


def mcp_reference(name: str) -> tuple[str, str | None] | None:
    """``"mcp:clock"`` -> ``("clock", None)``, ``"mcp:clock/now"`` -> ``("clock", "now")``;
    None when ``name`` is not a well-formed MCP tool reference."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, _, tool = name[len(MCP_PREFIX) :].partition("/")
    if not _MCP_SERVER.fullmatch(server) or (_ and not tool):
        return None
    return server, tool or None


def refuse_literal_env(data: object, who: str) -> object:
    """``env = {...}`` would put values (secrets) in the file: point to env_from instead.
    ``who``: whose variables they are (the MCP server's, the external agent's)."""
    if isinstance(data, Mapping) and "env" in data:
        raise invalid_value(
            f'env_from = {{ NAME = "BOT_VARIABLE" }}: the {who}\'s variable NAME gets the '
            "value of the bot's environment variable BOT_VARIABLE",
            "env = {...} would keep values (secrets) in the config file (values not shown)",
        )
    return data


def check_http_url(value: str, *, example: str, where_secrets_go: str) -> None:
    """An http(s) URL with a host and nothing that could carry a secret (credentials,
    query, fragment); the error never shows the URL."""
    try:
        parts = urlsplit(value)
        has_credentials = bool(parts.username or parts.password)
    except ValueError:
        raise invalid_value("an http:// or https:// URL", "the URL cannot be parsed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid_value(
            f"an http:// or https:// URL such as {example}",
            f"got scheme {parts.scheme!r}" if parts.scheme else "no scheme",
        )
    if has_credentials or parts.query or parts.fragment:
        raise invalid_value(
            f"a URL without credentials, query or fragment; {where_secrets_go}",
            "the URL has extra parts (not shown)",
        )


def agent_display_name(
    profiles: Mapping[str, AgentProfile],
    agent: str | None,
    *,
    fallback: str = DEFAULT_DISPLAY_NAME,
) -> str:
    """The name ``agent`` is shown under: its profile's ``display_name``, else ``fallback``.

    The one place that answers this, for :meth:`core.config.Config.display_name` and
    for services that only hold the ``[agents]`` profiles. The default fallback is
    never the id itself: an id without a profile came from free text (a user's
    ``agent:`` option, a model's tool call, an old row), and a persona named from
    free text impersonates whoever it likes. Callers that only *mention* an agent
    in their own message (the handoff buttons) may pass the id as ``fallback``.
    """
    profile = profiles.get(agent or "")
    return profile.display_name if profile is not None else fallback


# -- [providers.<name>] -------------------------------------------------------------------


class ProviderConfig(TomlTable):
    """One ``[providers.<name>]`` table: which model endpoint to call, and where its key lives.

    Like the Discord tokens, an API key never appears in the file: the table names the
    environment variable that holds it (``api_key_env``), and
    :func:`core.providers.config.build_provider` reads it once, at start-up.

    ```toml
    [providers.local]
    base_url = "http://127.0.0.1:11434/v1"   # Ollama; no key needed
    model = "qwen2.5:7b"

    [providers.openai]
    base_url = "https://api.openai.com/v1"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"
    ```
    """

    kind: Literal["openai"] = "openai"
    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    timeout_s: Seconds = 120.0
    max_retries: int = Field(default=4, ge=0, le=10)
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, ge=1024)
    """Tokens the model reads at most (prompt and answer); compaction keeps sessions inside."""
    input_usd_per_mtok: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Price of a million prompt tokens, for the cost shown by /usage (0: unknown)."""
    output_usd_per_mtok: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Price of a million answer tokens."""
    vision: bool = False
    """The model reads images: attached pictures go to it as image parts."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        """An http(s) API root without credentials; a trailing slash is dropped."""
        check_http_url(
            value,
            example="https://api.openai.com/v1",
            where_secrets_go="put the key in the environment variable named by api_key_env",
        )
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _is_variable_name(cls, value: str | None) -> str | None:
        """Catch a key pasted where its variable's name belongs, without echoing it."""
        if value is None:
            return None
        return check_env_name(value, example="OPENAI_API_KEY", holds="key")


# -- [acp_agents.<name>] ------------------------------------------------------------------


class AcpAgentConfig(TomlTable):
    """One ``[acp_agents.<name>]`` table: an external agent the bot talks to over the Agent
    Client Protocol (stdio), a thread acting as its client.

    Its environment, like an MCP server's, is a small safe default plus ``env_from``
    (the agent's variable names mapped to the bot's own): nothing else of the bot's
    environment reaches it.

    ```toml
    [acp_agents.opencode]
    command = ["opencode", "acp"]          # a first word "python" means the bot's interpreter
    env_from = { OPENAI_API_KEY = "BOT_OPENAI_KEY" }
    workspace_dir = "acp-workspaces"       # each session works in its own directory under this
    idle_stop_seconds = 900                # an idle session's process is stopped
    ```
    """

    command: list[Annotated[str, StringConstraints(min_length=1)]] = Field(min_length=1)
    env_from: dict[str, str] = Field(default_factory=dict)
    workspace_dir: str = Field(default="acp-workspaces", min_length=1)
    """Where each session's own working directory is made (relative: to the config's)."""
    idle_stop_seconds: Seconds = 900.0
    """An agent process idle this long is stopped; the session's next message starts one."""
    start_timeout_seconds: Seconds = 60.0
    """How long the agent may take to start and open (or load) its session."""

    @model_validator(mode="before")
    @classmethod
    def _no_literal_env(cls, data: object) -> object:
        return refuse_literal_env(data, "agent")

    @field_validator("env_from")
    @classmethod
    def _variable_names(cls, value: dict[str, str]) -> dict[str, str]:
        return McpServerConfig.check_env_names(value)


# -- [mcp_servers.<name>] -----------------------------------------------------------------


class McpServerConfig(TomlTable):
    """One ``[mcp_servers.<name>]`` table: a Model Context Protocol server agents may use.

    Either ``command`` (a program the bot starts and talks to over stdio; a first word
    ``python`` or ``python3`` means the interpreter running the bot) or ``url`` (a
    streamable-HTTP endpoint). The server's environment is a small safe default (PATH,
    HOME, ...) plus ``env_from``, which maps the server's variable names to the names of
    the bot's own variables: a secret's value never appears in this file.

    ```toml
    [mcp_servers.clock]
    command = ["python", "-m", "mcp_server_time"]
    env_from = { TZ = "BOT_TZ" }
    timeout_seconds = 30
    require_approval = ["convert_time"]      # or true: every tool of this server
    ```
    """

    command: list[Annotated[str, StringConstraints(min_length=1)]] | None = None
    url: str | None = None
    env_from: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: Seconds = 30.0
    require_approval: bool | list[str] = False

    @model_validator(mode="before")
    @classmethod
    def _no_literal_env(cls, data: object) -> object:
        return refuse_literal_env(data, "server")

    @field_validator("command")
    @classmethod
    def _not_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise invalid_value(
                'the program and its arguments, e.g. ["python", "-m", "mcp_server_time"]',
                "the list is empty",
            )
        return value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            check_http_url(
                value,
                example="http://127.0.0.1:9000/mcp",
                where_secrets_go="no secret belongs in the config file",
            )
        return value

    @field_validator("env_from")
    @classmethod
    def _variable_names(cls, value: dict[str, str]) -> dict[str, str]:
        return cls.check_env_names(value)

    @staticmethod
    def check_env_names(value: dict[str, str]) -> dict[str, str]:
        """Both sides are variable names; a value that is not one is probably the secret."""
        for name, source in value.items():
            if not _ENV_NAME.fullmatch(name) or not _ENV_NAME.fullmatch(source):
                raise invalid_value(
                    'NAME = "BOT_VARIABLE" pairs of environment variable names',
                    f"{name!r} maps to something that is not a variable name; if it is the "
                    "secret itself, move it into an environment variable (value not shown)",
                )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise invalid_value(
                'either command = ["program", "arg", ...] (stdio) or url = "http://..." '
                "(streamable HTTP)",
                "both are set" if self.command is not None else "neither is set",
            )
        if self.url is not None and self.env_from:
            raise invalid_value(
                "env_from only with command: it sets the environment of a program the bot starts",
                "the server is reached by url",
            )
        return self
