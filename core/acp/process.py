"""An external agent's process: started in the session's workspace, stopped with its group.

The agent's stdin and stdout carry the protocol; its stderr goes to a log file of
the session, never to a pipe nobody reads (an agent that writes more than a pipe
holds, about 64 KB, would block on it and hang). It runs in a process group of its
own, so stopping the session stops whatever the agent started too (a shell, a
language server). Its environment is a small safe default plus what
``env_from`` names; nothing else of the bot's reaches it, and no value of those
variables is ever logged or shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from core.config import AcpAgentConfig
from core.errors import ProviderError

__all__ = ["AgentProcess", "LaunchPlan", "launch_plan", "workspace_name"]

PYTHON_ALIASES: Final = ("python", "python3")
SAFE_VARIABLES: Final = (
    "HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER",
)  # fmt: skip
"""The bot's own variables every agent gets (as MCP servers do): enough to run a program."""
STOP_GRACE_SECONDS: Final = 3.0


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """What to run, where, with which environment; ``env`` holds secrets: never log it."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    stderr_log: Path


def workspace_name(session_key: str) -> str:
    """A directory name for a session: its key with anything but ``[A-Za-z0-9._-]`` replaced."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", session_key)[:120] or "session"


def launch_plan(
    name: str,
    config: AcpAgentConfig,
    root: Path,
    session_key: str,
    env: Mapping[str, str],
) -> LaunchPlan:
    """The launch of agent ``name`` for one session.

    Raises:
        ProviderError: a variable ``env_from`` names is missing from the bot's
            environment (named, never its value).
    """
    argv = list(config.command)
    if argv[0] in PYTHON_ALIASES:
        argv[0] = sys.executable
    missing = sorted({var for var in config.env_from.values() if var not in env})
    if missing:
        raise ProviderError(
            f"the external agent {name!r} needs the environment variable "
            f"{', '.join(missing)} (named by its env_from), which the bot's environment "
            "does not have; set it and restart the bot"
        )
    agent_env = {var: env[var] for var in SAFE_VARIABLES if var in env}
    agent_env.update({target: env[source] for target, source in config.env_from.items()})
    folder = workspace_name(session_key)
    return LaunchPlan(
        argv=tuple(argv),
        cwd=root / folder,
        env=agent_env,
        stderr_log=root / ".logs" / f"{folder}.stderr.log",
    )


class AgentProcess:
    """One running agent process and its stderr log."""

    def __init__(self, process: asyncio.subprocess.Process, stderr: IO[bytes]) -> None:
        self.process = process
        self._stderr = stderr

    @classmethod
    async def start(cls, name: str, plan: LaunchPlan) -> AgentProcess:
        """Start the agent in its workspace (made if need be), in a group of its own.

        Raises:
            ProviderError: the program is not found or cannot be run; the message
                names the command (its first word) and what to install or fix.
        """
        plan.cwd.mkdir(parents=True, exist_ok=True)
        plan.stderr_log.parent.mkdir(parents=True, exist_ok=True)
        stderr = plan.stderr_log.open("ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *plan.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=plan.cwd,
                env=dict(plan.env),
                start_new_session=True,
                limit=16 * 1024 * 1024,  # one protocol line may carry a whole file
            )
        except FileNotFoundError:
            stderr.close()
            raise ProviderError(
                f"the external agent {name!r} could not start: its command "
                f"{plan.argv[0]!r} was not found; install it or fix [acp_agents.{name}] command"
            ) from None
        except OSError as exc:
            stderr.close()
            raise ProviderError(
                f"the external agent {name!r} could not start: {plan.argv[0]!r} "
                f"failed ({type(exc).__name__}: {exc.strerror or exc})"
            ) from None
        return cls(process, stderr)

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def stop(self) -> None:
        """Stop the agent and everything in its process group: TERM, then KILL.

        Its stdin is closed first, and the subprocess transport (with its stdout pipe)
        once it has exited, so neither is left to the garbage collector: collected
        after the event loop closed, a transport's finalizer raises, and a collection
        that runs inside another parse (Python 3.11's traceback carets, pytest's
        assertion rewriting) fails that parse with "AST constructor recursion depth
        mismatch"."""
        stdin = self.process.stdin
        if stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                stdin.close()
        try:
            if self.alive:
                _signal_group(self.process.pid, signal.SIGTERM)
                try:
                    async with asyncio.timeout(STOP_GRACE_SECONDS):
                        await self.process.wait()
                except TimeoutError:
                    _signal_group(self.process.pid, signal.SIGKILL)
                    await self.process.wait()
            else:
                _signal_group(self.process.pid, signal.SIGKILL)  # what it started may live on
        finally:
            with contextlib.suppress(OSError):
                self._stderr.close()
            transport = getattr(self.process, "_transport", None)  # asyncio has no public way
            if transport is not None:
                with contextlib.suppress(RuntimeError):
                    transport.close()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
