"""The external agents' processes of this bot: one per live session, stopped when idle.

A session bound to an external agent (``[agents.<id>] acp = "<name>"``) gets
its connection here when its agent is built; the process itself starts with
the session's first prompt (:meth:`AcpConnection.open`), in the session's own
directory under ``[acp_agents.<name>] workspace_dir``. A process idle for
``idle_stop_seconds`` is stopped (the next message starts it again, loading the
session when the agent can); unbinding the thread stops it, and so does the
bot's stop. Each process's group is recorded in the store while it runs, so a bot
process killed with ``kill -9`` leaves them to its successor to stop
(:mod:`core.acp.groups`).

The connection and turn modules, and with them the ACP SDK, are imported with the
first external agent's session: a bot with no ``[acp_agents]`` pays neither their
import time nor their memory.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from core.acp.groups import AgentGroups
from core.acp.process import PYTHON_ALIASES, LaunchPlan, launch_plan
from core.agent.messages import ImageLoader
from core.bindings.records import BindingEnded
from core.clock import Clock, SystemClock
from core.config import AgentProfile, Config
from core.logging import get_logger

if TYPE_CHECKING:
    from core.acp.connection import AcpConnection
    from core.acp.turns import AcpTurns

__all__ = ["AcpConnections", "missing_command"]

_log = get_logger("core.acp")


def missing_command(config: Config, agent: str) -> str | None:
    """Why the external agent ``agent`` (an ``[acp_agents]`` name) cannot start here, if
    its program is not found: said at spawn, before a thread is made for nothing."""
    command = config.acp_agents[agent].command
    program = sys.executable if command[0] in PYTHON_ALIASES else command[0]
    if shutil.which(program) is not None:
        return None
    return (
        f"the external agent {agent!r} cannot start: its command {command[0]!r} was not "
        f"found; install it or fix [acp_agents.{agent}] command"
    )


class AcpConnections:
    """Every live session's connection to its external agent, by session key."""

    def __init__(
        self,
        config: Config,
        *,
        env: Mapping[str, str],
        clock: Clock | None = None,
        load_image: ImageLoader | None = None,
        groups: AgentGroups | None = None,
    ) -> None:
        self._config = config
        self._env = env
        self._clock: Clock = clock or SystemClock()
        self._load_image = load_image
        self._groups = groups
        self._by_session: dict[str, AcpConnection] = {}

    def turns_for(self, profile: AgentProfile, session_key: str) -> AcpTurns:
        """The turn runner of a session whose profile names an external agent."""
        from core.acp.turns import AcpTurns  # the SDK: only for an agent in use

        assert profile.acp is not None
        connection = self.connection(session_key, profile.acp)
        return AcpTurns(
            connection,
            display_name=profile.display_name or profile.acp,
            load_image=self._load_image,
        )

    def connection(self, session_key: str, agent: str) -> AcpConnection:
        """The session's connection to ``agent``, made (not started) on first use; one to
        another agent (the session was handed over) is stopped."""
        existing = self._by_session.get(session_key)
        if existing is not None and existing.name == agent:
            return existing
        if existing is not None:
            self._stop_later(existing)
        config = self._config.acp_agents[agent]

        def plan() -> LaunchPlan:
            root = self._config.acp_workspace_root(agent)
            return launch_plan(agent, config, root, session_key, self._env)

        from core.acp.connection import AcpConnection  # the SDK: only for an agent in use

        connection = AcpConnection(
            agent,
            plan,
            start_timeout_seconds=config.start_timeout_seconds,
            clock=self._clock,
            groups=self._groups,
            session_key=session_key,
        )
        self._by_session[session_key] = connection
        return connection

    def running(self) -> list[str]:
        """Sessions whose agent process runs."""
        return [key for key, conn in self._by_session.items() if conn.alive]

    async def stop(self, session_key: str) -> bool:
        """Stop the session's agent process (an unbinding, an ended session); True if
        one ran."""
        connection = self._by_session.pop(session_key, None)
        if connection is None:
            return False
        alive = connection.alive
        await connection.close()
        if alive:
            _log.info("acp.stopped", session_key=session_key, agent=connection.name)
        return alive

    async def stop_idle(self) -> list[str]:
        """Stop processes idle (no prompt under way) for their agent's ``idle_stop_seconds``;
        the next message starts them again."""
        now = self._clock.now()
        stopped: list[str] = []
        for key, connection in list(self._by_session.items()):
            limit = self._config.acp_agents[connection.name].idle_stop_seconds
            idle = (now - connection.idle_since).total_seconds()
            if connection.alive and not connection.prompting and idle >= limit:
                await connection.close()
                stopped.append(key)
                _log.info("acp.idle_stopped", session_key=key, agent=connection.name)
        return stopped

    def on_event(self, event: object) -> None:
        """A domain event (:mod:`core.events`): a session whose thread was unbound has
        its agent's process stopped (and its group: whatever it started)."""
        if isinstance(event, BindingEnded):
            key = event.record.target_session_key
            if key in self._by_session:
                self._later(self.stop(key))

    async def keep_stopping_idle(self, interval_seconds: float = 30.0) -> None:
        """Stop idle processes every ``interval_seconds``, forever."""
        while True:
            await self._clock.sleep(interval_seconds)
            await self.stop_idle()

    async def stop_orphans(self) -> list[int]:
        """Stop the agents' process groups that bot processes proven dead left running on
        this machine (:mod:`core.acp.groups`); the pids of the groups stopped."""
        if self._groups is None:
            return []
        return await self._groups.stop_orphans()

    async def close(self) -> None:
        """Stop every agent process (the bot stops)."""
        connections, self._by_session = list(self._by_session.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def _stop_later(self, connection: AcpConnection) -> None:
        self._later(connection.close())

    def _later(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        _closing.add(task)
        task.add_done_callback(_closing.discard)


_closing: set[asyncio.Task[Any]] = set()
"""Stops under way (a task nobody holds may be collected before it ends)."""
