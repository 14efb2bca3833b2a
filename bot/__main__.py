"""``python -m bot``: run the bot, or read its logs.

    python -m bot [run] [--config PATH]                run every configured account,
                                                       Discord's and Matrix's
    python -m bot [run] --playground [--config PATH]   the local playground, never Discord
    python -m bot canary LOGFILE [--since 2h] [--json] the canary report

``--help`` lists every command (:data:`COMMANDS`); an unknown one is refused
with the names of those there are.

Configuration is validated here, once, before anything connects: a bad file
ends the process with one readable line and exit status 2, never a traceback.
Without any Discord token and no Matrix account the run command opens the local
playground instead of failing (see :mod:`bot.playground`): the product runs out of
the box. A config with only Matrix accounts runs only Matrix.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from core.canary import parse_duration, run_canary
from core.config import Config, load_config
from core.errors import ThreadboundError

EXIT_USAGE = 2
COMMANDS: dict[str, str] = {
    "run": "run the bot (the default); without a Discord token, the local playground",
    "canary": "the canary report of the bot's JSON log; exit 1 on a violation",
}
"""Every command of ``python -m bot``, with the line ``--help`` shows for it."""


def _commands_help() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, what in COMMANDS.items()]
    return "commands:\n" + "\n".join(lines) + "\n\npython -m bot COMMAND --help tells more."


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bot",
        usage="python -m bot [run] [--config PATH] [--playground]\n"
        "       python -m bot canary LOGFILE [--since DURATION] [--json]",
        description="Run the threadbound bot, or read its logs.",
        epilog=_commands_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="PATH",
        help="config file (default: ./config.toml if present)",
    )
    parser.add_argument(
        "--playground",
        action="store_true",
        help="run the local playground (a Discord on 127.0.0.1 and a web page) even with a token",
    )
    return parser


def _canary_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bot canary",
        description="Summarise routing and delivery outcomes from a JSON log; "
        "exit 1 on a duplicate delivery or a hidden fallback.",
    )
    parser.add_argument("logfile", type=Path, help="JSON lines log written by the bot")
    parser.add_argument("--since", default=None, help="only count the last DURATION (90s, 2h, 7d)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    return parser


def canary_main(argv: list[str]) -> int:
    args = _canary_parser().parse_args(argv)
    try:
        since = parse_duration(args.since) if args.since else None
    except ValueError as exc:
        print(f"canary: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run_canary(args.logfile, since=since, as_json=args.json, out=sys.stdout)


def run_main(argv: list[str]) -> int:
    from bot.app import run_bot
    from bot.voice import silence_voice_warnings

    args = _run_parser().parse_args(argv)
    silence_voice_warnings()  # the bot has no voice; nothing else is silenced
    try:
        config = load_config(args.config)
        if args.playground or not _any_token(config):
            return asyncio.run(_playground(config, forced=args.playground))
        return asyncio.run(run_bot(config))
    except ThreadboundError as exc:
        print(f"threadbound: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0


def _any_token(config: Config) -> bool:
    """Whether any account has its token; with none at all there is only the playground.

    A configured Matrix account always has one (loading the config fails without
    it). Some Discord accounts without a token is a mistake, not a wish to play:
    ``run_bot`` then stops with a message naming the missing variable.
    """
    if config.matrix_account_ids():
        return True
    return any(config.account_token(account_id) for account_id in config.account_ids())


async def _playground(config: Config, *, forced: bool) -> int:
    from bot.playground import run_playground

    if forced:
        reason = "--playground: starting the local playground (Discord is not contacted)"
    else:
        variables = ", ".join(config.token_env(a) for a in config.account_ids())
        reason = (
            f"no Discord token set ({variables}): starting the local playground; "
            "set the variable to connect to Discord instead"
        )
    return await run_playground(config, reason=reason)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and not argv[0].startswith("-") else None
    if command == "canary":
        return canary_main(argv[1:])
    if command == "run":
        return run_main(argv[1:])
    if command is not None:
        known = ", ".join(COMMANDS)
        print(
            f"python -m bot: unknown command {command!r}; the commands are {known} "
            "(python -m bot --help says what each does)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
