"""Saving the fake's state to a JSON file and loading it back (the playground's memory).

:meth:`State.to_dict` already writes every table as JSON-ready data; this module
reads such a document back into the dataclasses, so a playground restarted on
the same file finds its guild, channels, threads, messages, webhooks and
registered commands again. Interactions are not restored: their tokens only
live for minutes on Discord too, so nobody can answer an old one anyway.

Writes are atomic (a temporary file renamed over the old one): a crash while
saving leaves the previous file intact, never half a document.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

from fakediscord.models import (
    Application,
    ApplicationCommand,
    BotAccount,
    Channel,
    Guild,
    Message,
    User,
    Webhook,
)
from fakediscord.state import State

__all__ = ["FORMAT_VERSION", "load_state", "restore", "save_state"]

FORMAT_VERSION = 1

_TABLES: dict[str, type] = {
    "users": User,
    "bots": BotAccount,
    "applications": Application,
    "guilds": Guild,
    "channels": Channel,
    "messages": Message,
    "webhooks": Webhook,
    "commands": ApplicationCommand,
}


def _convert(value: Any, hint: Any) -> Any:
    """``value`` (parsed JSON) as the type ``hint`` names: the inverse of ``_jsonable``."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(value, options[0]) if len(options) == 1 else value
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_convert(v, item) for v in value]
    if origin is dict:
        key_type, item = typing.get_args(hint)
        convert_key = int if key_type is int else str
        return {convert_key(k): _convert(v, item) for k, v in value.items()}
    if hint is datetime:
        return datetime.fromisoformat(value)
    if hint is bytes:
        return base64.b64decode(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _record(hint, value)
    return value


def _record(cls: type, data: dict[str, Any]) -> Any:
    """One dataclass from its ``asdict`` form; unknown keys (a newer file) are ignored."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: _convert(v, hints[k]) for k, v in data.items() if k in names})


def restore(state: State, data: dict[str, Any]) -> None:
    """Replace ``state``'s tables with those of a :meth:`State.to_dict` document."""
    for name, cls in _TABLES.items():
        table = getattr(state, name)
        table.clear()
        key_type = str if name == "bots" else int
        for key, record in (data.get(name) or {}).items():
            table[key_type(key)] = _record(cls, record)
    state.interactions.clear()
    state.channel_messages.clear()
    for channel_id in state.channels:
        state.channel_messages[channel_id] = []
    for message in sorted(state.messages.values(), key=lambda m: m.id):
        state.channel_messages.setdefault(message.channel_id, []).append(message.id)
    newest = max((int(k) for t in _TABLES for k in (data.get(t) or {}) if t != "bots"), default=0)
    state.reserve_ids_up_to(newest)
    state.changed.notify()


def save_state(state: State, path: Path) -> None:
    """Write the state to ``path`` atomically (directories created as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": FORMAT_VERSION, **state.to_dict()}
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", encoding="utf-8") as file:
        json.dump(document, file, ensure_ascii=False)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)


def load_state(state: State, path: Path) -> bool:
    """Load ``path`` into ``state``; False (state untouched) when the file does not exist.

    Raises ``ValueError`` naming the file when it is not a state document.
    """
    if not path.exists():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
            raise ValueError(f"not a format-{FORMAT_VERSION} state document")
        restore(state, data)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: cannot load the playground state ({exc})") from exc
    return True
