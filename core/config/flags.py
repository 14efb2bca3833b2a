"""Flag resolution: which value a thread-binding flag has, and which level decided.

Precedence, highest first: runtime override > account > channel > session > default.
The rule lives here, in one place, so every caller (adapters, the spawn path, an
admin's ``/config show``) gets the same answer together with the dotted path it came
from. Runtime overrides are keyed by the very TOML path they override, so an admin can
read a value's ``source`` and override it by that same name.

The middle layer of :mod:`core.config`: it reads the tables of
:mod:`core.config.tables` and is read by :mod:`core.config.loading`, never the other
way round. It takes any :class:`FlagSource` (``Config`` is one) instead of importing
``Config``, so the import graph stays one-way. Import these names from ``core.config``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from core.config.tables import (
    DEFAULT_ENABLED,
    DEFAULT_IDLE_HOURS,
    DEFAULT_MAX_AGE_HOURS,
    DEFAULT_SCHEDULED_TASKS,
    DEFAULT_SPAWN_SUBAGENT_SESSIONS,
    ChannelsConfig,
    SessionConfig,
)
from core.errors import ConfigError, got

__all__ = [
    "FLAG_NAMES",
    "FLAG_SCHEDULED_TASKS",
    "FLAG_SPAWN_SUBAGENT_SESSIONS",
    "RUNTIME_SOURCE",
    "FlagKeyMatch",
    "FlagLevel",
    "FlagSource",
    "FlagValue",
    "ThreadBindingSettings",
    "channel_flag",
    "find_flag_path",
    "flag_is_bool",
    "flag_level",
    "overridable_paths",
    "resolve_flag",
    "resolve_thread_bindings",
    "shortest_flag_key",
    "validate_override",
]

FLAG_SPAWN_SUBAGENT_SESSIONS = "channels.discord.threadBindings.spawnSubagentSessions"
"""The flag a ``FeatureDisabled`` error names when a thread-bound spawn is refused."""

FLAG_SCHEDULED_TASKS = "channels.discord.threadBindings.scheduledTasks"
"""The flag a ``FeatureDisabled`` error names when ``/schedule add`` is refused."""


RUNTIME_SOURCE = "<runtime>"
"""``ConfigError.path`` for mistakes in runtime input (flag names, admin overrides)."""

_MS_PER_HOUR = 3_600_000
_TRUE_WORDS = frozenset({"true", "on", "yes"})
_FALSE_WORDS = frozenset({"false", "off", "no"})


class FlagSource(Protocol):
    """What flag resolution reads of a configuration; ``core.config.Config`` is one.

    A protocol rather than ``Config`` itself, so this module need not import the
    module that imports it.
    """

    @property
    def session(self) -> SessionConfig: ...

    @property
    def channels(self) -> ChannelsConfig: ...

    def account_ids(self) -> tuple[str, ...]:
        """Configured account ids, or ``("default",)`` when none is configured."""
        ...


@dataclass(frozen=True, slots=True)
class _Flag:
    """One flag: its TOML key, model attribute, value kind and whether [session] has it."""

    key: str
    attr: str
    is_bool: bool
    default: bool | float
    at_session_level: bool


_FLAGS: dict[str, _Flag] = {
    flag.key: flag
    for flag in (
        _Flag("enabled", "enabled", True, DEFAULT_ENABLED, True),
        _Flag("idleHours", "idle_hours", False, DEFAULT_IDLE_HOURS, True),
        _Flag("maxAgeHours", "max_age_hours", False, DEFAULT_MAX_AGE_HOURS, True),
        _Flag(
            "spawnSubagentSessions",
            "spawn_subagent_sessions",
            True,
            DEFAULT_SPAWN_SUBAGENT_SESSIONS,
            False,
        ),
        _Flag("scheduledTasks", "scheduled_tasks", True, DEFAULT_SCHEDULED_TASKS, False),
    )
}
FLAG_NAMES: tuple[str, ...] = tuple(_FLAGS)
"""Flag names as the TOML file spells them, in display order."""


class FlagValue(BaseModel):
    """A resolved flag and where it came from, so nobody has to guess why it is on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: bool | float
    source: str
    """The dotted TOML path of the level that decided, or ``"default"``."""
    overridden: bool = False
    """True when the value is a runtime override stored at ``source``, not the file's."""

    @property
    def level(self) -> FlagLevel:
        """Which level ``source`` is: an account's table, a channel's, ``[session]``, or
        the built-in default. ``overridden`` says whether a runtime override set it there."""
        return flag_level(self.source)


FlagLevel = Literal["account", "channel", "session", "default"]
"""The levels a flag is read from, most specific first (runtime overrides sit on them)."""


def flag_level(source: str) -> FlagLevel:
    """The level of a flag's ``source`` path (``FlagValue.source``)."""
    parts = source.split(".")
    if parts[0] == "channels":
        return "account" if parts[2:3] == ["accounts"] else "channel"
    if parts[0] == "session":
        return "session"
    return "default"


class ThreadBindingSettings(BaseModel):
    """Every thread-binding flag resolved for one (channel, account) at one moment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool
    idle_hours: float
    max_age_hours: float
    spawn_subagent_sessions: bool
    scheduled_tasks: bool

    @property
    def idle_timeout_ms(self) -> int:
        """Idle timeout in milliseconds as binding records store it; 0 means never."""
        return round(self.idle_hours * _MS_PER_HOUR)

    @property
    def max_age_ms(self) -> int:
        """Maximum binding age in milliseconds; 0 means no limit."""
        return round(self.max_age_hours * _MS_PER_HOUR)


def _flag(name: str) -> _Flag:
    """Look a flag up by TOML or Python spelling; a typo is a loud error, not a silent default."""
    for flag in _FLAGS.values():
        if name in (flag.key, flag.attr):
            return flag
    raise ConfigError(
        RUNTIME_SOURCE, name, f"a flag name, one of {', '.join(FLAG_NAMES)}", "unknown flag"
    )


def _levels(
    config: FlagSource, flag: _Flag, channel: str, account_id: str | None
) -> list[tuple[str, BaseModel | None]]:
    """The (path, table) levels that may set ``flag``, most specific first."""
    known_channels = type(config.channels).model_fields
    if channel not in known_channels:
        raise ConfigError(
            RUNTIME_SOURCE,
            f"channels.{channel}",
            f"a configured channel ({', '.join(known_channels)})",
            "unknown channel",
        )
    channel_config = getattr(config.channels, channel)
    levels: list[tuple[str, BaseModel | None]] = []
    if account_id is not None:
        if account_id not in channel_config.account_ids():
            known = ", ".join(channel_config.account_ids())
            raise ConfigError(
                RUNTIME_SOURCE,
                f"channels.{channel}.accounts.{account_id}",
                f"a configured account id ({known})",
                "no such account",
            )
        account = channel_config.accounts.get(account_id)
        if account is None or "thread_bindings" in type(account).model_fields:
            # an account table without flags of its own (Matrix's) has no level here
            levels.append(
                (
                    f"channels.{channel}.accounts.{account_id}.threadBindings.{flag.key}",
                    account.thread_bindings if account is not None else None,
                )
            )
    levels.append((f"channels.{channel}.threadBindings.{flag.key}", channel_config.thread_bindings))
    if flag.at_session_level:
        levels.append((f"session.threadBindings.{flag.key}", config.session.thread_bindings))
    return levels


def _coerce(flag: _Flag, raw: object, path: str) -> bool | float:
    """Turn an admin's typed value into the flag's type, rejecting anything ambiguous."""
    if flag.is_bool:
        if isinstance(raw, bool):
            return raw
        word = raw.strip().lower() if isinstance(raw, str) else None
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
        raise ConfigError(RUNTIME_SOURCE, path, "true/false, on/off or yes/no", got(raw))
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            value = None
    if value is None or not math.isfinite(value) or value < 0:
        raise ConfigError(RUNTIME_SOURCE, path, "a number of hours >= 0 (0 means never)", got(raw))
    return value


def resolve_flag(
    config: FlagSource,
    flag: str,
    *,
    channel: str = "discord",
    account_id: str | None = None,
    overrides: Mapping[str, object] | None = None,
) -> FlagValue:
    """Resolve one flag: any runtime override beats any file value, then the most specific level.

    Overrides are looked up at the account, channel and session paths (in that order)
    before the file is consulted at all, so an admin's ``/config set`` on the channel
    also wins over an account's file setting. Overrides for other accounts are ignored.
    """
    spec = _flag(flag)
    levels = _levels(config, spec, channel, account_id)
    if overrides:
        for path, _table in levels:
            if path in overrides:
                value = _coerce(spec, overrides[path], path)
                return FlagValue(value=value, source=path, overridden=True)
    for path, table in levels:
        if table is None or spec.attr not in table.model_fields_set:
            continue
        value = getattr(table, spec.attr)
        if value is not None:
            return FlagValue(value=value, source=path)
    return FlagValue(value=spec.default, source="default")


def resolve_thread_bindings(
    config: FlagSource,
    *,
    channel: str = "discord",
    account_id: str | None = None,
    overrides: Mapping[str, object] | None = None,
) -> ThreadBindingSettings:
    """All thread-binding flags for one (channel, account), resolved like ``resolve_flag``."""
    values = {
        spec.attr: resolve_flag(
            config, spec.key, channel=channel, account_id=account_id, overrides=overrides
        ).value
        for spec in _FLAGS.values()
    }
    return ThreadBindingSettings.model_validate(values)


def overridable_paths(config: FlagSource, *, channel: str = "discord") -> list[str]:
    """Every dotted path an admin on ``channel`` may override at runtime: the session
    level, the channel's own, and each account's where accounts have flags of their own
    (a channel without, such as Matrix: its administrators override the channel's)."""
    paths = [f"session.threadBindings.{f.key}" for f in _FLAGS.values() if f.at_session_level]
    paths += [channel_flag(channel, key) for key in FLAG_NAMES]
    table = getattr(config.channels, channel)
    if table.ACCOUNT_FLAGS:
        for account_id in table.account_ids():
            prefix = f"channels.{channel}.accounts.{account_id}.threadBindings."
            paths += [prefix + key for key in FLAG_NAMES]
    return paths


def channel_flag(channel: str, key: str) -> str:
    """The path of ``channel``'s own level of flag ``key``: what a refusal there names."""
    return f"channels.{channel}.threadBindings.{key}"


_ACCOUNT_KEY_PARTS = 3
"""An account's own flag is named with its account: ``<id>.threadBindings.<flag>`` at least."""


@dataclass(frozen=True, slots=True)
class FlagKeyMatch:
    """What a flag key an admin typed names: ``path`` when exactly one flag, else the
    ``candidates`` it could mean (none for a key that names no flag)."""

    key: str
    path: str | None
    candidates: tuple[str, ...]


def _fold(part: str) -> str:
    """One path component as compared: case, ``_`` and ``-`` do not matter."""
    return part.lower().replace("_", "").replace("-", "")


def _is_account_path(path: str) -> bool:
    return path.split(".")[2:3] == ["accounts"]


def find_flag_path(config: FlagSource, key: str, *, channel: str = "discord") -> FlagKeyMatch:
    """The overridable flag path ``key`` names: the path itself, or any unambiguous
    suffix of it (``spawnSubagentSessions``, ``discord.threadBindings.enabled``).

    Components compare without regard to case, ``_`` or ``-``, so the Python
    spelling (``spawn_subagent_sessions``) names the flag too. A key too short to
    name an account (fewer than three components) means the server-wide levels
    (``session.…``, ``channels.discord.…``), not an account's own: a bot with one
    account has an implicit ``default`` one whose flags would otherwise make every
    short key ambiguous. Keys are read among ``channel``'s paths: in a Matrix room,
    ``spawnSubagentSessions`` is ``channels.matrix.threadBindings.spawnSubagentSessions``.
    """
    text = key.strip()
    paths = overridable_paths(config, channel=channel)
    if text in paths:
        return FlagKeyMatch(key, text, (text,))
    wanted = [_fold(part) for part in text.split(".")]
    if not text or not all(wanted):
        return FlagKeyMatch(key, None, ())
    found = [
        path
        for path in paths
        if [_fold(part) for part in path.split(".")][-len(wanted) :] == wanted
        and len(path.split(".")) >= len(wanted)
    ]
    if len(found) > 1 and len(wanted) < _ACCOUNT_KEY_PARTS:
        found = [path for path in found if not _is_account_path(path)]
    return FlagKeyMatch(key, found[0] if len(found) == 1 else None, tuple(found))


def shortest_flag_key(config: FlagSource, path: str, *, channel: str = "discord") -> str:
    """The shortest key :func:`find_flag_path` reads as ``path`` (what help texts show)."""
    parts = path.split(".")
    for size in range(1, len(parts) + 1):
        key = ".".join(parts[-size:])
        if find_flag_path(config, key, channel=channel).path == path:
            return key
    return path


def flag_is_bool(path: str) -> bool:
    """Whether the flag at ``path`` is on/off (else a number of hours).

    Raises:
        ConfigError: ``path`` does not end with a flag name.
    """
    return _flag(path.rsplit(".", 1)[-1]).is_bool


def validate_override(config: FlagSource, path: str, raw: str | bool | int | float) -> bool | float:
    """Check an admin's ``/config set <path> <value>`` and return the typed value to store.

    Validated against ``config`` so an override for an account that does not exist is
    refused now instead of being stored and silently never applying.
    """
    channel = path.split(".")[1] if path.startswith("channels.") else "discord"
    channels = type(config.channels).model_fields
    if channel not in channels or path not in overridable_paths(config, channel=channel):
        parts = path.split(".")
        is_account_path = parts[0] == "channels" and parts[2:3] == ["accounts"] and len(parts) == 6
        table = getattr(config.channels, channel) if channel in channels else None
        flagged = table is not None and table.ACCOUNT_FLAGS
        known_ids = table.account_ids() if table is not None else ()
        if is_account_path and flagged and parts[3] not in known_ids:
            known = ", ".join(known_ids)
            raise ConfigError(
                RUNTIME_SOURCE, path, f"an account id configured in the file ({known})", "unknown"
            )
        raise ConfigError(
            RUNTIME_SOURCE,
            path,
            "an overridable flag path, one of " + ", ".join(overridable_paths(config)),
            "not overridable",
        )
    return _coerce(_flag(path.rsplit(".", 1)[1]), raw, path)
