"""A one-line progress display for the playground's terminal.

The person who typed the run command should see that something is alive without
reading logs: live sessions, bindings, deliveries, where the page is, and whether
the bot is online (it may have been stopped from the page). On a
terminal the line is rewritten in place (``\\r``) twice a second; into a pipe or a
file (CI, a test) a full line is written every few seconds instead, and only
when something changed, so the output stays readable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Counts", "Progress", "format_line"]

TTY_INTERVAL = 0.5
LINE_INTERVAL = 5.0


@dataclass(frozen=True, slots=True)
class Counts:
    sessions: int
    bindings: int
    deliveries: int
    bot: str = ""
    """``online`` or ``offline`` (stopped from the page); "" when not known."""


def format_line(counts: Counts, url: str) -> str:
    line = (
        f"playground {url} · live sessions {counts.sessions} · bindings {counts.bindings}"
        f" · deliveries {counts.deliveries}"
    )
    return f"{line} · bot {counts.bot}" if counts.bot else line


class Progress:
    """Writes :func:`format_line` to ``stream`` until stopped.

    Args:
        count: reads the current figures (cheap; called every tick).
        interactive: rewrite in place; default: whether ``stream`` is a TTY.
    """

    def __init__(
        self,
        stream: TextIO,
        count: Callable[[], Counts],
        url: str,
        *,
        interactive: bool | None = None,
    ) -> None:
        self._stream = stream
        self._count = count
        self._url = url
        isatty = getattr(stream, "isatty", None)
        self.interactive = bool(isatty and isatty()) if interactive is None else interactive
        self._interval = TTY_INTERVAL if self.interactive else LINE_INTERVAL
        self._task: asyncio.Task[None] | None = None
        self._last = ""
        self._width = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="playground-progress")

    async def stop(self) -> None:
        """Stop ticking; on a terminal, end the rewritten line so the next output is clean."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.interactive and self._width:
            self._write("\n")

    def tick(self) -> None:
        """Write the line now (if it changed, for a non-interactive stream)."""
        line = format_line(self._count(), self._url)
        if self.interactive:
            padding = " " * max(self._width - len(line), 0)
            self._width = len(line)
            self._write(f"\r{line}{padding}")
        elif line != self._last:
            self._write(line + "\n")
        self._last = line

    async def _run(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(self._interval)  # a display refresh period, not synchronisation

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.write(text)
            self._stream.flush()
