"""External agents' process groups, recorded in the store, so a dead bot's are stopped.

Each agent runs in a process group of its own (:mod:`core.acp.process`). A bot
process that stops cleanly stops every group; one killed with ``kill -9`` stops
none, and an agent that does not exit when its stdin closes (``codex-acp``) then
goes on running, on the same session, beside the one the next process starts.
So each group is recorded when its agent starts and forgotten once it is stopped:
the bot process that owns it (its lease owner id, :mod:`core.leases`), the pid
space it lives in, its leader's pid and the leader's start time.

At start-up, and whenever it takes a dead process's work over, a bot process
stops the groups left by owners the store proves dead (:mod:`core.store.liveness`:
the SQLite process lock, or PostgreSQL's per-process advisory locks), and only:

- in its own pid space (the same boot of the same kernel, the same pid namespace):
  another machine's pids mean nothing here, so its rows wait for a process there;
- a group whose leader is still the very process recorded: the same pid **and** the
  same start time. A pid the kernel has since given to an unrelated process is left
  alone (its row is dropped), and so is a group whose leader already exited.

Never a group whose owner lives: a live neighbour sharing the store keeps its
agents, even on the same machine.

Why the store and not a file beside the workspaces: the proof of death is about
the owner ids the store holds, and one query finds every group a dead owner left
on this machine whatever the configuration names now (a file under an agent's
``workspace_dir`` is missed once that agent, or its directory, leaves the config);
rows are written and read in transactions, and processes sharing a PostgreSQL
store, on one machine or several, each see just the rows they may act on.

Linux only: the start time comes from ``/proc``. Where there is none, nothing
is recorded, and nothing is ever stopped on a guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sqlalchemy import Connection, delete, select

from core.clock import Clock, SystemClock
from core.logging import get_logger
from core.store import Database
from core.store.liveness import Liveness
from core.store.tables import AcpProcessRow, table_of

__all__ = ["AgentGroups", "Leader", "leader_of", "stop_group", "this_machine"]

STOP_GRACE_SECONDS: Final = 3.0
"""How long a dead process's agent gets to end on SIGTERM before its group is killed."""

_log = get_logger("core.acp")
_P = table_of(AcpProcessRow)
_PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Leader:
    """What ``/proc/<pid>/stat`` says of a process: enough to know it again."""

    pid: int
    started: int
    """Clock ticks after boot at which it started: a later process with its pid differs."""
    group: int
    state: str
    """``Z`` for a zombie: it has exited, its parent has not reaped it."""


def leader_of(pid: int, proc: Path = _PROC) -> Leader | None:
    """The process ``pid`` is now, or None (gone, or no ``/proc`` here)."""
    try:
        stat = (proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ... starttime ...": comm may hold anything,
    # spaces and parentheses included, so the fields are counted after its last ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return Leader(pid=pid, started=int(fields[19]), group=int(fields[2]), state=fields[0])
    except (IndexError, ValueError):
        return None


def this_machine(proc: Path = _PROC) -> str | None:
    """This pid space: the kernel's boot id and our pid namespace; None without ``/proc``.

    Two machines (or two containers) never share it, and a reboot changes it, so a
    pid recorded under it is only ever read back where it means the same."""
    try:
        boot = (proc / "sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        namespace = os.readlink(proc / "self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{namespace}"[:200]


async def stop_group(pid: int, started: int, *, grace_seconds: float = STOP_GRACE_SECONDS) -> bool:
    """Stop the process group ``pid`` leads, if its leader is still the process that
    started at ``started``: SIGTERM, then SIGKILL after ``grace_seconds``; True if so.

    The leader is held by a pidfd taken before the check, so its end is awaited on
    the descriptor (no polling), and SIGKILL goes to the group only while the process
    checked still leads it, or once it has ended: what it started may live on, and
    the group's number stays reserved while any of them does. Without pidfds (a
    kernel before 5.3) the group only gets SIGTERM.
    """
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:
        handle = None
    try:
        now = leader_of(pid)
        if now is None or now.started != started or now.group != pid:
            return False
        _signal_group(pid, signal.SIGTERM)
        if handle is None:
            return True
        if not await _ended(handle, grace_seconds):
            _signal_group(pid, signal.SIGKILL)
            await _ended(handle, grace_seconds)
        _signal_group(pid, signal.SIGKILL)
        return True
    finally:
        if handle is not None:
            os.close(handle)


async def _ended(handle: int, seconds: float) -> bool:
    """Whether the process behind the pidfd ``handle`` ends within ``seconds``."""
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    loop.add_reader(handle, ended.set)
    try:
        async with asyncio.timeout(seconds):
            await ended.wait()
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(handle)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


@dataclass(frozen=True, slots=True)
class _Row:
    owner: str
    pid: int
    started: int
    agent: str
    session_key: str


class AgentGroups:
    """This bot process's record of its agents' process groups, and the stop of the
    groups dead processes left.

    Args:
        database: the store the record is kept in (the bot's own).
        owner: this process's lease owner id, which ``liveness`` proves alive.
        liveness: which other owners are provably dead.
        machine: this pid space (default :func:`this_machine`; None records nothing).
        grace_seconds: how long a dead process's agent gets to end on SIGTERM.
    """

    def __init__(
        self,
        database: Database,
        *,
        owner: str,
        liveness: Liveness,
        clock: Clock | None = None,
        machine: str | None = None,
        grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        self._db = database
        self._grace = grace_seconds
        self.owner = owner
        self._liveness = liveness
        self._clock: Clock = clock or SystemClock()
        self.machine = machine if machine is not None else this_machine()
        self._host = socket.gethostname()[:255]

    async def record(self, pid: int, *, agent: str, session_key: str) -> bool:
        """Record the group ``pid`` leads (an agent just started); False when it cannot
        be known again later (no ``/proc``, or it is already gone), so nothing is."""
        found = leader_of(pid)
        if self.machine is None or found is None:
            return False
        row = {
            "owner": self.owner,
            "pid": pid,
            "machine": self.machine,
            "started": found.started,
            "host": self._host,
            "agent": agent,
            "session_key": session_key[:300],
            "recorded_at": self._clock.now(),
        }

        def write(conn: Connection) -> None:
            conn.execute(delete(_P).where(_P.c.owner == self.owner, _P.c.pid == pid))
            conn.execute(_P.insert().values(**row))

        await self._db.run(write)
        return True

    async def forget(self, pid: int) -> None:
        """The group ``pid`` led is stopped: its record goes."""
        await self._db.run(
            lambda conn: conn.execute(delete(_P).where(_P.c.owner == self.owner, _P.c.pid == pid))
        )

    async def stop_orphans(self) -> list[int]:
        """Stop the groups that owners proven dead left on this machine; returns the pids
        of the groups stopped. Rows of live owners stay, and so do other machines'."""
        if self.machine is None:
            return []
        rows = await self._db.run(_rows_of_others, self.machine, self.owner)
        if not rows:
            return []
        dead = await self._liveness.dead({row.owner for row in rows})
        stopped: list[int] = []
        for row in (row for row in rows if row.owner in dead):
            if await stop_group(row.pid, row.started, grace_seconds=self._grace):
                stopped.append(row.pid)
                _log.info(
                    "acp.orphan_stopped",
                    pid=row.pid,
                    agent=row.agent,
                    session_key=row.session_key,
                    dead_owner=row.owner,
                )
            await self._db.run(_drop, row.owner, row.pid)
        return stopped


def _rows_of_others(conn: Connection, machine: str, owner: str) -> list[_Row]:
    query = select(_P.c.owner, _P.c.pid, _P.c.started, _P.c.agent, _P.c.session_key).where(
        _P.c.machine == machine, _P.c.owner != owner
    )
    return [_Row(str(o), int(p), int(s), str(a), str(k)) for o, p, s, a, k in conn.execute(query)]


def _drop(conn: Connection, owner: str, pid: int) -> None:
    conn.execute(delete(_P).where(_P.c.owner == owner, _P.c.pid == pid))
