"""Runtime flag overrides: what admins change without a restart, per scope.

A scope is where an override applies (the Discord adapter uses the guild id).
An override is validated against the config schema before it is stored
(``validate_override``: the path must be an overridable flag of this config,
the value of the flag's type), persisted, applied at once (reads come from
memory), and audited as one ``config.changed`` log event with who changed
it, the old value and the new one.

A scope is a guild id, or :data:`EVERY_SERVER` (``*``) for an override
that applies in every server (a server's own override still wins there).
Several bot processes share one PostgreSQL store: a change is announced
(:mod:`core.store.changes`) and every other process reloads its overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select

from core import log_events
from core.clock import Clock, SystemClock
from core.config import (
    RUNTIME_SOURCE,
    Config,
    FlagValue,
    ThreadBindingSettings,
    resolve_flag,
    validate_override,
)
from core.config import resolve_thread_bindings as _resolve_thread_bindings
from core.errors import ConfigError
from core.logging import get_logger
from core.store.changes import announce
from core.store.database import Database
from core.store.tables import ConfigOverrideRow, table_of

__all__ = ["EVERY_SERVER", "OverrideOrigin", "RuntimeOverrides"]

EVERY_SERVER = "*"
"""The scope of an override for every server at once."""

_T = table_of(ConfigOverrideRow)
_log = get_logger("core.overrides")


@dataclass(frozen=True, slots=True)
class OverrideOrigin:
    """Who set a runtime override, when, and for which scope (a guild, or every server)."""

    scope: str
    actor: str
    at: datetime


def _load(conn: Connection) -> list[tuple[str, str, Any, str, datetime]]:
    columns = (_T.c.scope, _T.c.path, _T.c.value, _T.c.updated_by, _T.c.updated_at)
    return [tuple(row) for row in conn.execute(select(*columns))]


def _upsert(conn: Connection, row: dict[str, Any]) -> None:
    conn.execute(delete(_T).where(_T.c.scope == row["scope"], _T.c.path == row["path"]))
    conn.execute(_T.insert().values(**row))
    announce(conn, "override", scope=row["scope"])


def _delete(conn: Connection, scope: str, path: str) -> None:
    conn.execute(delete(_T).where(_T.c.scope == scope, _T.c.path == path))
    announce(conn, "override", scope=scope)


class RuntimeOverrides:
    """Overrides per scope, in memory after :meth:`start`, persisted on every change."""

    def __init__(self, database: Database, config: Config, *, clock: Clock | None = None):
        self._db = database
        self._config = config
        self._clock: Clock = clock or SystemClock()
        self._by_scope: dict[str, dict[str, Any]] = {}
        self._origins: dict[tuple[str, str], OverrideOrigin] = {}

    async def start(self) -> int:
        """Load stored overrides; an override the config no longer allows is ignored, loudly.

        Also what a process runs when another one changed an override: the table is
        small, and reading it whole cannot miss a change.
        """
        rows = await self._db.run(_load)
        loaded: dict[str, dict[str, Any]] = {}
        origins: dict[tuple[str, str], OverrideOrigin] = {}
        for scope, path, value, actor, at in rows:
            try:
                checked = validate_override(self._config, path, value)
            except ConfigError as exc:
                _log.warning("config.override_ignored", scope=scope, key=path, error=str(exc))
                continue
            loaded.setdefault(scope, {})[path] = checked
            origins[scope, path] = OverrideOrigin(scope, actor, at)
        self._by_scope = loaded  # one swap: a read never sees half a reload
        self._origins = origins
        return sum(len(v) for v in loaded.values())

    async def reload(self) -> int:
        """Read every override again (another process changed one, or may have)."""
        return await self.start()

    def for_scope(self, scope: str | None) -> Mapping[str, Any]:
        """The overrides that apply in ``scope``: every server's, then the scope's own."""
        everywhere = self._by_scope.get(EVERY_SERVER)
        own = self._by_scope.get(scope) if scope is not None else None
        if everywhere is None:
            return own or {}
        return {**everywhere, **own} if own else everywhere

    def own(self, scope: str) -> Mapping[str, Any]:
        """Only the overrides set for ``scope`` itself (what ``reset`` can remove)."""
        return self._by_scope.get(scope, {})

    def origin(self, scope: str | None, path: str) -> OverrideOrigin | None:
        """Who set the override of ``path`` that applies in ``scope``: the scope's own,
        else the every-server one (as :meth:`for_scope` merges them); None if neither."""
        for where in (scope, EVERY_SERVER):
            if where is not None and path in self._by_scope.get(where, {}):
                return self._origins.get((where, path))
        return None

    def get(self, scope: str | None, path: str, *, account_id: str | None = None) -> FlagValue:
        """The effective value of the flag at ``path``'s name, and where it came from."""
        flag = path.rsplit(".", 1)[-1]
        channel = path.split(".")[1] if path.startswith("channels.") else "discord"
        return resolve_flag(
            self._config,
            flag,
            channel=channel,
            account_id=self._configured(account_id),
            overrides=self.for_scope(scope),
        )

    def thread_bindings(
        self, scope: str | None, account_id: str | None = None, *, channel: str = "discord"
    ) -> ThreadBindingSettings:
        """Every thread-binding flag for an account, with this scope's overrides applied.

        The one resolver of those flags: an account the config does not name reads
        the channel's values (its own level does not exist).
        """
        return _resolve_thread_bindings(
            self._config,
            channel=channel,
            account_id=self._configured(account_id),
            overrides=self.for_scope(scope),
        )

    def binding_windows(self, scope: str | None, account_id: str, channel: str) -> tuple[int, int]:
        """A new binding's idle timeout and maximum age (ms) there: its account's flags,
        with the scope's overrides (an admin's ``/config set …idleHours``) applied."""
        settings = self.thread_bindings(scope, account_id, channel=channel)
        return settings.idle_timeout_ms, settings.max_age_ms

    def spawns_threads(
        self, scope: str | None, account_id: str | None = None, *, channel: str = "discord"
    ) -> bool:
        """The spawn gate: a subagent may open its own thread here (binding and spawning on),
        by ``channel``'s flags."""
        settings = self.thread_bindings(scope, account_id, channel=channel)
        return settings.enabled and settings.spawn_subagent_sessions

    def schedules(
        self, scope: str | None, account_id: str | None = None, *, channel: str = "discord"
    ) -> bool:
        """The scheduler's gate: ``/schedule add`` is taken and jobs fire here, by
        ``channel``'s flags."""
        return self.thread_bindings(scope, account_id, channel=channel).scheduled_tasks

    def _configured(self, account_id: str | None) -> str | None:
        return account_id if account_id in self._config.account_ids() else None

    async def set(self, scope: str, path: str, raw: str | bool | float, *, actor: str) -> Any:
        """Validate, persist, apply and audit one override; returns the stored value."""
        value = validate_override(self._config, path, raw)
        old = self.own(scope).get(path)
        now = self._clock.now()
        row = {"scope": scope, "path": path, "value": value, "updated_by": actor, "updated_at": now}
        await self._db.run(_upsert, row)
        self._by_scope.setdefault(scope, {})[path] = value
        self._origins[scope, path] = OverrideOrigin(scope, actor, now)
        log_events.emit(
            log_events.ConfigChanged(key=path, old=old, new=value, actor=actor, scope=scope), _log
        )
        return value

    async def reset(self, scope: str, path: str, *, actor: str) -> Any:
        """Remove an override (the file's value applies again); returns the removed value."""
        current = self.own(scope)
        if path not in current:
            raise ConfigError(
                RUNTIME_SOURCE,
                path,
                "a key with a runtime override in this server"
                if scope != EVERY_SERVER
                else "a key with a runtime override for every server",
                "none is set",
            )
        await self._db.run(_delete, scope, path)
        old = self._by_scope[scope].pop(path)
        self._origins.pop((scope, path), None)
        log_events.emit(
            log_events.ConfigChanged(key=path, old=old, new=None, actor=actor, scope=scope), _log
        )
        return old
