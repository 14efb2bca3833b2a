"""The fake's state on disk (the playground's memory): a snapshot and a journal.

:meth:`State.to_dict` writes every table as JSON-ready data; this module reads such
a document back into the dataclasses, so a playground restarted on the same file
finds its guild, channels, threads, messages, webhooks, registered commands and
interactions again (who used a command stays shown above its answer; their tokens
stay valid, as a Discord token does for its 15 minutes, which a fake does not count).
Autocomplete interactions are not kept: nothing refers to them.

:class:`Journal` keeps the file current change by change, for a fake that must
lose nothing it has answered (the playground's, which a ``kill -9`` may end at any
moment): :meth:`Journal.commit`, called before each answer, appends every entity
that differs from what is on disk as one JSON line and syncs it; when the journal
outgrows the snapshot, the snapshot is rewritten and the journal emptied. Entities
are compared with the copies written last (dataclass equality: unchanged nested
values compare by identity, so a commit costs a pass over the tables in C and
the serialisation of what changed only).

Snapshot writes are atomic (a temporary file renamed over the old one): a crash
while saving leaves the previous file intact, never half a document; a crash while
appending to the journal leaves at most a torn last line, which was never answered
and is dropped at the next load.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import types
import typing
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from fakediscord.models import (
    Application,
    ApplicationCommand,
    BotAccount,
    Channel,
    Guild,
    Interaction,
    Message,
    User,
    Webhook,
)
from fakediscord.state import State, jsonable

__all__ = ["FORMAT_VERSION", "JOURNAL_SUFFIX", "Journal", "load_state", "restore", "save_state"]

FORMAT_VERSION = 1
JOURNAL_SUFFIX = ".journal"
"""The journal lives beside the snapshot: ``playground.json.journal``."""
COMPACT_MIN_BYTES = 1 << 20
"""The journal is folded into the snapshot once it is larger than this and the snapshot."""
AUTOCOMPLETE = 4

_TABLES: dict[str, type] = {
    "users": User,
    "bots": BotAccount,
    "applications": Application,
    "guilds": Guild,
    "channels": Channel,
    "messages": Message,
    "webhooks": Webhook,
    "commands": ApplicationCommand,
    "interactions": Interaction,
}


def _convert(value: Any, hint: Any) -> Any:
    """``value`` (parsed JSON) as the type ``hint`` names (the inverse of ``jsonable``)."""
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
            value = _record(cls, record)
            if _kept(name, value):
                table[key_type(key)] = value
    _reindex(state)


def _kept(table: str, value: Any) -> bool:
    """Whether an entity is saved: everything but autocomplete interactions."""
    return table != "interactions" or value.type != AUTOCOMPLETE


def _reindex(state: State) -> None:
    """Rebuild what is derived from the tables: each channel's message order, the id floor."""
    state.channel_messages.clear()
    for channel_id in state.channels:
        state.channel_messages[channel_id] = []
    for message in sorted(state.messages.values(), key=lambda m: m.id):
        state.channel_messages.setdefault(message.channel_id, []).append(message.id)
    ids = (key for name in _TABLES if name != "bots" for key in getattr(state, name))
    state.reserve_ids_up_to(max(ids, default=0))
    state.changed.notify()


def _document(state: State) -> dict[str, Any]:
    tables = state.to_dict()
    tables["interactions"] = {
        key: record
        for key, record in tables["interactions"].items()
        if record["type"] != AUTOCOMPLETE
    }
    return {"format": FORMAT_VERSION, **tables}


def save_state(state: State, path: Path) -> None:
    """Write the state to ``path`` atomically (directories created as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", encoding="utf-8") as file:
        json.dump(_document(state), file, ensure_ascii=False)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX; elsewhere there is nothing to sync)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


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


Tables = dict[str, dict[Any, Any]]


def _tables(state: State) -> Tables:
    return {name: getattr(state, name) for name in _TABLES}


class Journal:
    """One state file kept current change by change (see the module doc).

    Args:
        path: the snapshot (``playground.json``); the journal is ``path`` +
            :data:`JOURNAL_SUFFIX`.
        compact_min_bytes: the journal is folded into the snapshot once it is larger
            than this and than the snapshot.
    """

    def __init__(self, path: Path, *, compact_min_bytes: int = COMPACT_MIN_BYTES) -> None:
        self.path = path
        self.journal_path = path.with_name(path.name + JOURNAL_SUFFIX)
        self._compact_min = compact_min_bytes
        self._fd: int | None = None
        self._size = 0
        self._snapshot_size = 0
        self._disk: Tables = {name: {} for name in _TABLES}
        self._seen = -1
        """The state's change count at the last look: equal, and there is nothing to look for."""
        self.commits = 0
        """Commits that wrote something (tests and the playground's figures read it)."""

    def open(self, state: State) -> bool:
        """Load the snapshot and replay the journal into ``state``, then fold them into one
        snapshot; False when there was nothing on disk (``state`` is left as it was).

        Raises ``ValueError`` naming the file when the snapshot is not a state document.
        """
        found = load_state(state, self.path)
        if self.journal_path.exists():
            found = self._replay(state) or found
        self._remember(state)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._size = os.fstat(self._fd).st_size
        self.compact(state)
        return found

    def commit(self, state: State) -> int:
        """Append what changed since the last commit and sync it; returns the bytes written.

        Nothing changed: nothing is written. Every change to the state notifies its
        ``changed`` signal (that is how waiters wake), so without a notification since
        the last look the tables are not even compared. A failed write is undone (the
        journal cut back to where it was) and raised; the change stays pending for the
        next commit.
        """
        if self._fd is None:
            raise RuntimeError("the journal is not open; call open() first")
        seen = state.changed.count
        if seen == self._seen:
            return 0
        puts, drops = self._changes(state)
        if not puts and not drops:
            self._seen = seen
            return 0
        line = {
            "put": {
                name: {str(key): jsonable(dataclasses.asdict(value)) for key, value in rows.items()}
                for name, rows in puts.items()
            },
            "drop": {name: [str(key) for key in keys] for name, keys in drops.items()},
        }
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        try:
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)
        self._seen = seen
        self.commits += 1
        for name, rows in puts.items():
            for key, value in rows.items():
                self._disk[name][key] = copy.deepcopy(value)
        for name, keys in drops.items():
            for key in keys:
                self._disk[name].pop(key, None)
        if self._size > max(self._compact_min, self._snapshot_size):
            self.compact(state)
        return len(data)

    def compact(self, state: State) -> None:
        """Write the whole state as the snapshot and empty the journal.

        A crash between the two leaves the new snapshot and the old journal, whose
        replay in order ends at the same state.
        """
        save_state(state, self.path)
        self._snapshot_size = self.path.stat().st_size
        if self._fd is not None and self._size:
            os.ftruncate(self._fd, 0)
            os.fsync(self._fd)
            self._size = 0
        self._remember(state)

    def close(self, state: State) -> None:
        """Fold everything into the snapshot and close the journal; safe to call twice."""
        if self._fd is None:
            return
        try:
            self.compact(state)
        finally:
            os.close(self._fd)
            self._fd = None

    # internals

    def _changes(self, state: State) -> tuple[Tables, dict[str, list[Any]]]:
        puts: Tables = {}
        drops: dict[str, list[Any]] = {}
        for name, table in _tables(state).items():
            disk = self._disk[name]
            kept = new = 0
            for key, value in table.items():
                if name == "interactions" and not _kept(name, value):
                    continue
                kept += 1
                old = disk.get(key)
                if old is None:
                    new += 1
                    puts.setdefault(name, {})[key] = value
                elif old != value:
                    puts.setdefault(name, {})[key] = value
            if len(disk) + new != kept:  # some entity on disk is gone
                drops[name] = [key for key in disk if key not in table]
        return puts, drops

    def _remember(self, state: State) -> None:
        """What is on disk now: a copy of every saved entity, to compare the next commit with."""
        self._seen = state.changed.count
        self._disk = {
            name: {key: copy.deepcopy(value) for key, value in table.items() if _kept(name, value)}
            for name, table in _tables(state).items()
        }

    def _replay(self, state: State) -> bool:
        """Apply each complete journal line in order; a torn last line is cut off."""
        raw = self.journal_path.read_bytes()
        applied, good = False, 0
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                change = json.loads(line)
                self._apply(state, change)
            except (ValueError, KeyError, TypeError, AttributeError):
                break
            good += len(line)
            applied = True
        if good < len(raw):
            with self.journal_path.open("r+b") as file:
                file.truncate(good)
        if applied:
            _reindex(state)
        return applied

    @staticmethod
    def _apply(state: State, change: dict[str, Any]) -> None:
        tables = _tables(state)
        for name, rows in (change.get("put") or {}).items():
            key_type: Callable[[str], Any] = str if name == "bots" else int
            for key, record in rows.items():
                tables[name][key_type(key)] = _record(_TABLES[name], record)
        for name, keys in (change.get("drop") or {}).items():
            key_type = str if name == "bots" else int
            for key in keys:
                tables[name].pop(key_type(key), None)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
