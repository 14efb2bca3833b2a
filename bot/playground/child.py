"""The playground's bot in a process of its own: ``python -m bot.playground.child``.

The playground (:mod:`bot.playground.app`) starts it and writes one line on its
stdin, the :class:`~bot.playground.runner.BotLink` as JSON (the token travels on the
pipe, never on the command line or in the environment, which the bot's own tools
and agents could read). From then on it is the real bot connected to Discord, as
far as it can tell:

- SIGTERM or SIGINT stop it cleanly, as they stop the real bot (the page's Stop,
  and Ctrl-C through the host); SIGKILL (the page's Kill) ends it on the spot;
- its stdin stays open while the host lives: end of input means the host is gone,
  and the bot then stops cleanly instead of lingering without a Discord;
- twice a second, when they changed, it writes its figures on stdout as
  ``counts <sessions> <bindings>`` lines, for the host's progress line.

Exit status: 0 after a clean stop, 1 when the client ended on its own (Discord
refused the token, the connection was lost for good), 2 for a bad configuration
or link.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from bot.playground.runner import BotLink, PlaygroundBot
from core.config import Config, load_config
from core.errors import ThreadboundError
from core.logging import configure_logging, get_logger, shutdown_logging

__all__ = ["COUNTS_PREFIX", "main", "parse_counts"]

COUNTS_PREFIX = "counts "
REPORT_SECONDS = 0.5
EXIT_CLEAN, EXIT_ENDED, EXIT_USAGE = 0, 1, 2

_log = get_logger("bot.playground.child")


def parse_counts(line: str) -> tuple[int, int] | None:
    """``counts 2 3`` -> (2, 3); None for any other line."""
    if not line.startswith(COUNTS_PREFIX):
        return None
    try:
        sessions, bindings = (int(part) for part in line[len(COUNTS_PREFIX) :].split())
    except ValueError:
        return None
    return sessions, bindings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bot.playground.child",
        description="The playground's bot; started by the playground, which writes its "
        "link on stdin.",
    )
    parser.add_argument("--config", type=Path, default=None, metavar="PATH")
    args = parser.parse_args(argv)
    from bot.voice import silence_voice_warnings

    silence_voice_warnings()
    try:
        config = load_config(args.config)
    except ThreadboundError as exc:
        sys.stderr.write(f"threadbound: {exc}\n")
        return EXIT_USAGE
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(_run(config))
    return EXIT_CLEAN


async def _run(config: Config) -> int:
    reader = await _stdin()
    try:
        link = BotLink.from_json((await reader.readline()).decode())
    except (ValueError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"threadbound: {exc}\n")
        return EXIT_USAGE
    configure_logging(
        level=config.logging.level,
        json_path=config.json_log_path(),
        console=config.logging.console and not sys.stderr.isatty(),  # a TTY has the progress line
        # the fake's token, and a real one --playground may run beside: never logged
        secrets=[link.token, *(t for a in config.account_ids() if (t := config.account_token(a)))],
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    bot = PlaygroundBot(config, link)
    try:
        await bot.start()
        assert bot.client_task is not None
        _log.info("bot.starting", accounts=config.account_ids()[:1], live_bindings=bot.counts()[1])
        async with asyncio.TaskGroup() as tasks:
            asked = tasks.create_task(stop.wait())
            orphaned = tasks.create_task(reader.read())  # the host's end of the pipe closed
            report = tasks.create_task(_report(bot, sys.stdout))
            watched: set[asyncio.Future[Any]] = {asked, orphaned, bot.client_task}
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            ended = bot.client_task.done() and not (asked.done() or orphaned.done())
            for task in (asked, orphaned, report):
                task.cancel()
        if ended and not bot.client_task.cancelled() and bot.client_task.exception():
            _log.error("playground.bot_client_ended", error=str(bot.client_task.exception()))
        return EXIT_ENDED if ended else EXIT_CLEAN
    finally:
        await bot.stop()
        _log.info("bot.stopped")
        shutdown_logging()


async def _stdin() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def _report(bot: PlaygroundBot, out: TextIO) -> None:
    """Write the figures when they change; a display refresh period, not synchronisation."""
    last: tuple[int, int] | None = None
    while True:
        counts = bot.counts()
        if counts != last:
            try:
                out.write(f"{COUNTS_PREFIX}{counts[0]} {counts[1]}\n")
                out.flush()
            except (OSError, ValueError):
                return  # the host is gone; the end of stdin says so too
            last = counts
        await asyncio.sleep(REPORT_SECONDS)


if __name__ == "__main__":
    sys.exit(main())
