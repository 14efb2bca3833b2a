"""One bot process per SQLite file, checked at start-up.

SQLite serves one process well; two bot processes on one file would both
receive every Discord event, each with its own in-memory bindings that never
hear of the other's changes. Rather than misbehave quietly, a second process
is refused at start with a message naming PostgreSQL, the store for several
processes. The check is an exclusive ``flock`` on a file beside the database:
the kernel drops it when the process ends, however it ends, so a killed bot
never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from core.errors import StoreError

__all__ = ["ProcessLock", "lock_path_for"]


def lock_path_for(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


class ProcessLock:
    """Held for as long as this process uses the SQLite file."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = lock_path_for(database)
        self._file: IO[bytes] | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds the lock now (taken, not yet released)."""
        return self._file is not None

    def acquire(self) -> None:
        """Take the lock, or raise a StoreError telling what to do instead."""
        import fcntl  # POSIX; the bot runs on Linux and macOS

        handle = self.path.open("a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StoreError(
                f"another bot process is already running on the SQLite store {self.database}; "
                "SQLite serves one bot process. To run several processes (shards), use "
                'PostgreSQL: [store] url = "postgresql+asyncpg://user@host/db"'
            ) from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n".encode())
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()  # closing drops the flock
            self._file = None
