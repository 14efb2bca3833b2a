"""``!config get | set | reset``: a room's runtime flag overrides, for its administrators.

The same flags, keys, validation and words as Discord's ``/config``
(:mod:`core.config.flags`, :mod:`core.flag_text`), with two Matrix readings: the
room is the scope, and a short key means the Matrix flag
(``spawnSubagentSessions`` is ``channels.matrix.threadBindings.spawnSubagentSessions``).
An administrator is a room member at the account's ``admin_power_level`` or above;
anyone else is refused with one sentence. Every server-wide override (Discord's
``everywhere``) stays with the bot's Discord operators.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from adapters.matrix.command_context import PREFIX, Asked, CommandAccount, Definitions, Handlers
from core.config import find_flag_path, shortest_flag_key
from core.errors import ConfigError
from core.flag_text import (
    FlagWords,
    ambiguous_key_text,
    code,
    empty_key_text,
    not_changed_text,
    set_text,
    show,
    unknown_key_text,
    value_text,
)

__all__ = ["ADMINS_ONLY", "DEFINITIONS", "WORDS", "ConfigCommands"]

CHANNEL: Final = "matrix"
ADMINS_ONLY: Final = "Only room administrators can use this command."
WORDS: Final = FlagWords(prefix=PREFIX, place="room", mention=code)
"""Matrix's spelling of core's config answers (a person's id shown as code, no ping)."""

_KEY: Final = {
    "type": 3,
    "name": "key",
    "description": "A flag: spawnSubagentSessions, scheduledTasks, enabled, idleHours, maxAgeHours",
    "required": True,
}
DEFINITIONS: Final[Definitions] = (
    {
        "type": 1,
        "name": "config",
        "description": "Read and change this room's runtime flags (administrators).",
        "options": [
            {
                "type": 1,
                "name": "get",
                "description": "Show a flag's value, e.g. key:spawnSubagentSessions",
                "options": [_KEY],
            },
            {
                "type": 1,
                "name": "set",
                "description": "Override a flag here at once, e.g. key:spawnSubagentSessions "
                "value:on",
                "options": [
                    _KEY,
                    {
                        "type": 3,
                        "name": "value",
                        "description": "on or off; for idleHours and maxAgeHours hours (0: never)",
                        "required": True,
                    },
                ],
            },
            {
                "type": 1,
                "name": "reset",
                "description": "Remove this room's override of a flag.",
                "options": [_KEY],
            },
        ],
    },
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a flag command does nothing: the one sentence the person reads."""

    text: str


class ConfigCommands:
    """One account's ``!config`` commands."""

    def __init__(self, account: CommandAccount) -> None:
        self._account = account

    def handlers(self) -> Handlers:
        return {
            ("config", "get"): self.get,
            ("config", "set"): self.set,
            ("config", "reset"): self.reset,
        }

    async def get(self, asked: Asked, options: Mapping[str, Any]) -> str:
        path = await self._path(asked, "config get", str(options["key"]))
        if isinstance(path, Refusal):
            return path.text
        return f"`{path}` = {self._shown(asked.room_id, path)}"

    async def set(self, asked: Asked, options: Mapping[str, Any]) -> str:
        path = await self._path(asked, "config set", str(options["key"]))
        if isinstance(path, Refusal):
            return path.text
        scope, overrides = asked.room_id, self._account.uses.overrides
        old = overrides.get(scope, path, account_id=self._account.account_id)
        try:
            stored = await overrides.set(scope, path, str(options["value"]), actor=asked.sender)
        except ConfigError as exc:
            return not_changed_text(path, exc)
        return set_text(path, stored, old.value, scope, WORDS)

    async def reset(self, asked: Asked, options: Mapping[str, Any]) -> str:
        path = await self._path(asked, "config reset", str(options["key"]))
        if isinstance(path, Refusal):
            return path.text
        scope, overrides = asked.room_id, self._account.uses.overrides
        if path not in overrides.own(scope):
            return (
                f"`{path}` has no override {WORDS.where(scope)}, none is set to remove; "
                f"it is {self._shown(scope, path)}."
            )
        removed = await overrides.reset(scope, path, actor=asked.sender)
        return (
            f"`{path}` override `{show(removed)}` removed {WORDS.where(scope)}; "
            f"now {self._shown(scope, path)}."
        )

    # -- helpers -------------------------------------------------------------------

    async def _path(self, asked: Asked, command: str, key: str) -> str | Refusal:
        """The flag path ``key`` names in a Matrix room; else why not (a person who is no
        administrator here, a key naming no flag, or several)."""
        if not await self._account.is_admin(asked):
            return Refusal(ADMINS_ONLY)
        if not key.strip():
            return Refusal(empty_key_text(command, WORDS))
        config = self._account.uses.config
        found = find_flag_path(config, key, channel=CHANNEL)
        if found.path is not None:
            return found.path
        if not found.candidates:
            return Refusal(unknown_key_text(key, WORDS))
        clear = [shortest_flag_key(config, p, channel=CHANNEL) for p in found.candidates]
        return Refusal(ambiguous_key_text(key, clear))

    def _shown(self, scope: str, path: str) -> str:
        overrides = self._account.uses.overrides
        flag = overrides.get(scope, path, account_id=self._account.account_id)
        origin = overrides.origin(scope, flag.source) if flag.overridden else None
        return value_text(flag, origin, WORDS)
