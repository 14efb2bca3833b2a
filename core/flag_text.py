"""What a ``config`` command answers about a runtime flag, on every platform alike.

Discord's ``/config`` and Matrix's ``!config`` read and override the same flags
(:mod:`core.config.flags`) and say the same things about them: an unknown key names
the flags (and the nearest one), an ambiguous key lists the keys that would be
clear, a wrong value says what the flag takes, and a value says where it comes
from. Only the command's prefix, what a scope is called (a server, a room) and how
a person is mentioned differ; they are a :class:`FlagWords`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from core.config import FLAG_NAMES, FlagValue
from core.errors import ConfigError
from core.overrides import EVERY_SERVER, OverrideOrigin

__all__ = [
    "FlagWords",
    "ambiguous_key_text",
    "code",
    "empty_key_text",
    "not_changed_text",
    "set_text",
    "show",
    "source_text",
    "unknown_key_text",
    "value_text",
]


@dataclass(frozen=True, slots=True)
class FlagWords:
    """How one platform spells a config answer.

    Attributes:
        prefix: what starts a command (``/``, ``!``).
        place: what one scope is (``server``, ``room``).
        mention: a person by the actor id an override records (a Discord user id is a
            mention there; anything else is shown as code).
    """

    prefix: str
    place: str
    mention: Callable[[str], str]

    @property
    def example(self) -> str:
        """A command that works as typed, for the help texts and the answers."""
        return f"{self.prefix}config set key:spawnSubagentSessions value:on"

    def where(self, scope: str) -> str:
        """Where an override applies, in words."""
        return f"for every {self.place}" if scope == EVERY_SERVER else f"in this {self.place}"


def show(value: Any) -> str:
    """A flag's value as a person reads it: on/off, hours, or ``(none)``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "(none)" if value is None else str(value)


def code(text: str) -> str:
    """Inline code that a typed key cannot break out of."""
    return "`" + text.replace("`", "'")[:100] + "`"


def unknown_key_text(key: str, words: FlagWords) -> str:
    """The reply to a key that names no flag: the nearest flag, and every flag's name."""
    near = difflib.get_close_matches(key.strip().rsplit(".", 1)[-1], FLAG_NAMES, n=1)
    hint = f" Did you mean {code(near[0])}?" if near else ""
    names = ", ".join(code(name) for name in FLAG_NAMES)
    return (
        f"{code(key)} is not a flag.{hint} The flags are {names}; start typing in `key` "
        f"to pick one, e.g. {code(words.example)}."
    )


def empty_key_text(command: str, words: FlagWords) -> str:
    """The reply to a blank ``key`` of ``command`` (``config get``): which flag, with a
    command that works as typed."""
    value = " value:on" if command.endswith("set") else ""
    names = ", ".join(code(name) for name in FLAG_NAMES)
    return (
        f"Which flag? Give `key` a flag's name, e.g. "
        f"{code(f'{words.prefix}{command} key:spawnSubagentSessions{value}')}. "
        f"The flags are {names}; start typing in `key` to pick one."
    )


def ambiguous_key_text(key: str, clear: Iterable[str]) -> str:
    """The reply to a key several flags end with: the keys that would be clear."""
    listed = ", ".join(code(k) for k in clear)
    return f"{code(key)} could be any of these flags: {listed}. Use one of those keys."


def not_changed_text(path: str, exc: ConfigError) -> str:
    """The reply to a value the flag does not take."""
    return f"`{path}` was not changed: it takes {exc.expected} ({exc.problem})."


def set_text(path: str, stored: Any, old: Any, scope: str, words: FlagWords) -> str:
    """The reply to an override made: the new value, the one before, and where."""
    return f"`{path}` set to `{show(stored)}` (was `{show(old)}`) {words.where(scope)}."


def value_text(flag: FlagValue, origin: OverrideOrigin | None, words: FlagWords) -> str:
    """A flag's value and where it comes from, in words."""
    return f"`{show(flag.value)}`, {source_text(flag, origin, words)}"


def source_text(flag: FlagValue, origin: OverrideOrigin | None, words: FlagWords) -> str:
    """Where a flag's value comes from, as a person asks it: a runtime override (by whom,
    where, when), the config file's table at the level that set it, or the default.

    The key an admin asked about is never its own answer: the level is named, and the
    file's table is shown as it is written in ``config.toml``.
    """
    if flag.overridden:
        by = ""
        if origin is not None:
            who = words.mention(origin.actor)
            when = origin.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
            by = f" by {who} {words.where(origin.scope)} on {when}"
        return (
            f"from a runtime override{by} (`{words.prefix}config set`, stored at `{flag.source}`)"
        )
    table = flag.source.rsplit(".", 1)[0]
    if flag.level == "account":
        account = flag.source.split(".")[3]
        return f"from the config file's `[{table}]` (account `{account}`'s own level)"
    if flag.level == "channel":
        return f"from the config file's `[{table}]` (the channel level, for every account)"
    if flag.level == "session":
        return f"from the config file's `[{table}]` (the session level)"
    return "the built-in default (neither the config file nor an override sets it)"
