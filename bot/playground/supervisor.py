"""The playground's hold on its bot: start it, stop it cleanly, kill it, see it end.

The page's Stop / Kill / Start buttons and the playground's own start and shutdown
act through a :class:`BotControl`. :class:`BotProcess` is the real one: the bot in
its own process (:mod:`bot.playground.child`), so the page and the fake Discord
outlive it, and a Kill is a true ``SIGKILL``: nothing of the bot's own code runs
after it. :class:`InProcessBot` runs the bot inside the playground's process, as
tests do to read its services; it can be stopped and started again, not killed.

A control is ``running`` from its start until it ended, ``stopping`` while a clean
stop is under way, ``stopped`` once it ended (``exit_code`` then says how: 0 a clean
stop, negative the signal that ended it, as :mod:`subprocess` reports it).
Whether the bot is *online* is another matter, which the fake's gateway answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

import structlog

from bot.playground.child import parse_counts
from bot.playground.runner import BotLink, PlaygroundBot
from bot.wiring import Services
from core.config import Config
from core.errors import ThreadboundError
from core.providers.types import Provider

__all__ = [
    "STOP_SECONDS",
    "BotControl",
    "BotControlError",
    "BotProcess",
    "InProcessBot",
    "ProcessState",
]

ProcessState = Literal["running", "stopping", "stopped"]
STOP_SECONDS = 30.0
"""How long a clean stop may take before the bot is killed: its shutdown waits up to
``bot.app.DRAIN_SECONDS`` twice (posts under way, then turns stopping)."""

_log = structlog.get_logger("bot.playground")


class BotControlError(ThreadboundError):
    """A control that does not apply now (Start while it runs, Kill of an in-process bot);
    the message says what does."""


class BotControl(Protocol):
    """What the playground does with its bot."""

    @property
    def state(self) -> ProcessState: ...

    @property
    def exit_code(self) -> int | None: ...

    @property
    def can_kill(self) -> bool: ...

    def counts(self) -> tuple[int, int]:
        """Live sessions and bindings, as the bot last told."""
        ...

    async def start(self) -> None:
        """Start it (it goes online once it has connected)."""
        ...

    async def stop(self) -> None:
        """Stop it cleanly, as Ctrl-C or SIGTERM stop the real bot; returns once it ended."""
        ...

    async def kill(self) -> None:
        """End it on the spot, as ``kill -9`` does; returns once it ended."""
        ...

    async def wait_ended(self) -> None:
        """Return once the current run has ended (at once when none runs)."""
        ...


def _refuse(action: str, state: ProcessState) -> BotControlError:
    if state == "stopping":
        return BotControlError(f"the bot is stopping; {action} it once it has stopped")
    if state == "running":
        return BotControlError(f"the bot is already running: stop or kill it before you {action}")
    return BotControlError(f"the bot is not running: start it before you {action} it")


class BotProcess:
    """The bot as a child process of the playground (see the module doc).

    Args:
        link: where the playground's Discord is; written on the child's stdin.
        config_path: the configuration file the child loads (None: its default lookup,
            from the same working directory).
        on_change: called whenever :attr:`state` (or the figures) changed, so the page
            hears of it.
    """

    can_kill = True

    def __init__(
        self,
        link: BotLink,
        *,
        config_path: Path | None,
        on_change: Callable[[], None],
        stop_seconds: float = STOP_SECONDS,
    ) -> None:
        self._link = link
        self._config_path = config_path
        self._on_change = on_change
        self._stop_seconds = stop_seconds
        self._process: asyncio.subprocess.Process | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._state: ProcessState = "stopped"
        self._exit_code: int | None = None
        self._counts = (0, 0)

    @property
    def state(self) -> ProcessState:
        return self._state

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def pid(self) -> int | None:
        """The running bot's process id (tests kill it from outside)."""
        return self._process.pid if self._process is not None and self._state != "stopped" else None

    def counts(self) -> tuple[int, int]:
        return self._counts

    def argv(self) -> list[str]:
        config = ["--config", str(self._config_path)] if self._config_path else []
        return [sys.executable, "-m", "bot.playground.child", *config]

    async def start(self) -> None:
        if self._state != "stopped":
            raise _refuse("start", self._state)
        process = await asyncio.create_subprocess_exec(
            *self.argv(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches the playground, which stops the bot
        )
        assert process.stdin is not None
        process.stdin.write((self._link.to_json() + "\n").encode())
        with contextlib.suppress(ConnectionError):  # it died at once: the watcher says so
            await process.stdin.drain()
        self._process, self._state, self._exit_code = process, "running", None
        self._watcher = asyncio.create_task(self._watch(process), name="playground-bot-watch")
        _log.info("playground.bot_started", pid=process.pid)
        self._on_change()

    async def stop(self) -> None:
        process = self._process
        if self._state != "running" or process is None:
            raise _refuse("stop", self._state)
        self._state = "stopping"
        self._on_change()
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self._stop_seconds):
                await self.wait_ended()
        except TimeoutError:
            _log.warning("playground.bot_stop_timed_out", seconds=self._stop_seconds)
            await self.kill()

    async def kill(self) -> None:
        process = self._process
        if self._state == "stopped" or process is None:
            raise _refuse("kill", self._state)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await self.wait_ended()

    async def wait_ended(self) -> None:
        if self._watcher is not None:
            await asyncio.shield(self._watcher)

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        """Read the figures the bot reports until it ends, then say how it ended."""
        assert process.stdout is not None
        while line := await process.stdout.readline():
            counts = parse_counts(line.decode(errors="replace"))
            if counts is not None and counts != self._counts:
                self._counts = counts
                self._on_change()
        code = await process.wait()
        self._state, self._exit_code, self._counts = "stopped", code, (0, 0)
        _log.info("playground.bot_exited", pid=process.pid, exit_code=code)
        self._on_change()


class InProcessBot:
    """The bot inside the playground's own process (tests read its :attr:`services`).

    Stop and Start work as for :class:`BotProcess`; there is no Kill: a process cannot
    SIGKILL a part of itself.
    """

    can_kill = False

    def __init__(
        self,
        config: Config,
        link: BotLink,
        *,
        provider: Provider | None,
        on_change: Callable[[], None],
    ) -> None:
        self._config = config
        self._link = link
        self._provider = provider
        self._on_change = on_change
        self.run: PlaygroundBot | None = None
        self._state: ProcessState = "stopped"
        self._exit_code: int | None = None

    @property
    def state(self) -> ProcessState:
        return self._state

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def services(self) -> Services | None:
        return self.run.services if self.run is not None else None

    def counts(self) -> tuple[int, int]:
        return self.run.counts() if self.run is not None else (0, 0)

    async def start(self) -> None:
        if self._state != "stopped":
            raise _refuse("start", self._state)
        run = PlaygroundBot(self._config, self._link, provider=self._provider)
        await run.start()
        self.run, self._state, self._exit_code = run, "running", None
        self._on_change()

    async def stop(self) -> None:
        if self._state != "running" or self.run is None:
            raise _refuse("stop", self._state)
        self._state = "stopping"
        self._on_change()
        try:
            await self.run.stop()
        finally:
            self.run, self._state, self._exit_code = None, "stopped", 0
            self._on_change()

    async def kill(self) -> None:
        raise BotControlError(
            "Kill needs the bot in its own process, as `python3 tb.py run` starts it"
        )

    async def wait_ended(self) -> None:
        task = self.run.client_task if self.run is not None else None
        if task is not None:
            await asyncio.gather(asyncio.shield(task), return_exceptions=True)
