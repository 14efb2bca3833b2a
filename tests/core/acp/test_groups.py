"""The record of external agents' process groups, and the stop of those a dead bot left:
real agent processes (the tests' stubborn agent, which outlives its stdin), a real
store (SQLite), ``/proc`` read for real. Which owners are dead is the one thing given
(a :class:`~core.store.liveness.Liveness` naming them), as the store's proof would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from core.acp.connection import AcpConnection
from core.acp.groups import AgentGroups, leader_of, this_machine
from core.acp.process import launch_plan
from core.config import AcpAgentConfig
from core.errors import ProviderError
from core.store import Database
from core.store.tables import AcpProcessRow, table_of
from tests.fixtures.acp import STUBBORN, Watched, group_members

pytestmark = pytest.mark.skipif(this_machine() is None, reason="needs Linux's /proc")

WAIT = 20  # seconds: bounds a hang only
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
IGNORES_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(86400)\n"
)


class Proven:
    """The store's proof of death, as given: exactly ``dead`` are dead."""

    def __init__(self, *dead: str) -> None:
        self._dead = set(dead)

    async def start(self, owner: str) -> None:
        del owner

    async def dead(self, owners: Collection[str]) -> set[str]:
        return self._dead & set(owners)

    async def check(self) -> None:
        return None

    async def close(self) -> None:
        return None


class Agents:
    """Agent processes started as the bot starts them (a group of their own, on pipes),
    and killed at the end whatever the test did."""

    def __init__(self) -> None:
        self.started: list[asyncio.subprocess.Process] = []

    async def stubborn(self) -> asyncio.subprocess.Process:
        """The stubborn agent, initialized (its child runs), then left by its client:
        stdin closed, as when the bot is killed. It stays."""
        process = await self._start(sys.executable, str(STUBBORN))
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(INITIALIZE)
        await process.stdin.drain()
        async with asyncio.timeout(WAIT):
            assert b'"result"' in await process.stdout.readline()
        process.stdin.close()
        return process

    async def ignoring_term(self) -> asyncio.subprocess.Process:
        process = await self._start(sys.executable, "-c", IGNORES_TERM)
        assert process.stdout is not None
        async with asyncio.timeout(WAIT):
            assert await process.stdout.readline() == b"ready\n"
        return process

    async def _start(self, *argv: str) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self.started.append(process)
        return process

    async def close(self) -> None:
        for process in self.started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


@pytest.fixture
async def agents() -> AsyncIterator[Agents]:
    made = Agents()
    yield made
    await made.close()


def groups(db: Database, owner: str, *dead: str, **options: Any) -> AgentGroups:
    return AgentGroups(db, owner=owner, liveness=Proven(*dead), **options)


async def rows(db: Database) -> list[tuple[str, int]]:
    table = table_of(AcpProcessRow)
    found = await db.run(
        lambda conn: conn.execute(select(table.c.owner, table.c.pid).order_by(table.c.owner))
    )
    return [(str(owner), int(pid)) for owner, pid in found]


async def ended(process: asyncio.subprocess.Process) -> int:
    async with asyncio.timeout(WAIT):
        return await process.wait()


class TestAgentGroups:
    async def test_a_dead_owners_group_is_stopped_and_a_live_owners_is_kept(
        self, db: Database, agents: Agents
    ) -> None:
        left, kept = await agents.stubborn(), await agents.stubborn()
        assert await groups(db, "killed").record(left.pid, agent="codex", session_key="s1")
        assert await groups(db, "neighbour").record(kept.pid, agent="codex", session_key="s2")
        members = group_members(left.pid)
        assert len(members) == 2  # the agent and its child, running despite EOF
        watched = Watched(members)

        stopped = await groups(db, "restarted", "killed").stop_orphans()

        assert stopped == [left.pid]
        assert await ended(left) == -signal.SIGTERM
        await watched.ended()  # its child too
        assert kept.returncode is None
        assert len(group_members(kept.pid)) == 2
        assert await rows(db) == [("neighbour", kept.pid)]

    async def test_a_group_that_ignores_sigterm_is_killed_after_the_grace(
        self, db: Database, agents: Agents
    ) -> None:
        stubborn = await agents.ignoring_term()
        await groups(db, "killed").record(stubborn.pid, agent="codex", session_key="s1")

        stopped = await groups(db, "restarted", "killed", grace_seconds=0.2).stop_orphans()

        assert stopped == [stubborn.pid]
        assert await ended(stubborn) == -signal.SIGKILL

    async def test_a_pid_now_another_process_is_never_signalled(
        self, db: Database, agents: Agents
    ) -> None:
        """The row names the pid, but the process there started at another time."""
        other = await agents.stubborn()
        await groups(db, "killed").record(other.pid, agent="codex", session_key="s1")
        table = table_of(AcpProcessRow)
        await db.run(lambda conn: conn.execute(table.update().values(started=table.c.started - 1)))

        stopped = await groups(db, "restarted", "killed").stop_orphans()

        assert stopped == []
        assert other.returncode is None
        assert len(group_members(other.pid)) == 2
        assert await rows(db) == []  # nothing left to stop: the record goes

    async def test_another_machines_groups_are_left_to_it(
        self, db: Database, agents: Agents
    ) -> None:
        agent = await agents.stubborn()
        await groups(db, "killed", machine="another-boot/pid:[1]").record(
            agent.pid, agent="codex", session_key="s1"
        )

        assert await groups(db, "restarted", "killed").stop_orphans() == []

        assert agent.returncode is None
        assert await rows(db) == [("killed", agent.pid)]

    async def test_a_stopped_agent_is_forgotten(self, db: Database, agents: Agents) -> None:
        agent = await agents.stubborn()
        mine = groups(db, "me")
        await mine.record(agent.pid, agent="codex", session_key="s1")
        assert leader_of(agent.pid) is not None

        await mine.forget(agent.pid)

        assert await rows(db) == []


async def test_an_agent_that_cannot_be_recorded_is_not_kept_running(
    db: Database, tmp_path: Path
) -> None:
    """The store refuses the record: the agent just started is stopped, and the turn is
    told why, rather than a process running that a crash of the bot would orphan."""
    groups = AgentGroups(db, owner="me", liveness=Proven())
    config = AcpAgentConfig(command=["python", str(STUBBORN)])
    connection = AcpConnection(
        "stubborn",
        lambda: launch_plan("stubborn", config, tmp_path, "s1", os.environ),
        start_timeout_seconds=WAIT,
        groups=groups,
        session_key="s1",
    )
    await db.close()

    with pytest.raises(ProviderError, match="could not be recorded in the store") as raised:
        await connection.open(None)

    assert "so it was stopped again" in str(raised.value)
    left = agents_in(tmp_path / "s1")
    for pid in left:  # the test's own clean-up, should it fail
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    assert left == []


def agents_in(workspace: Path) -> list[int]:
    """The stubborn agents running in ``workspace`` (their working directory)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            here = Path(os.readlink(entry / "cwd")) == workspace
            if here and b"stubborn.py" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # it ended meanwhile, or is not ours to read
    return found
