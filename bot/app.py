"""Running the bot: every account's client, the binding maintenance, clean shutdown.

Every configured account of both platforms runs in one process: each Discord
account's client, and each Matrix account's ``/sync`` loop
(:class:`~adapters.matrix.account.MatrixAccount`), in one task group. A config
with only Matrix accounts runs only Matrix: no Discord client is made.

Shutdown order matters: first announcements and farewells already under way
are let finish (:data:`DRAIN_SECONDS` at most) while the clients can still post
them; then the running turns stop (their queues kept) and their threads say so,
again while the clients can post; then the clients disconnect (no new work
arrives), then the maintenance task stops, then pending touches are flushed and
the store is closed. SIGINT and SIGTERM both take that path. A client still
logging in when the stop comes (its commands syncing, say) has its start
cancelled first: nothing of it needs draining.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Sequence

import aiohttp
import discord
import structlog

from adapters.discord.endpoints import use_endpoints
from adapters.discord.manager import ManagerRegistry
from adapters.matrix import MatrixLoginError
from adapters.matrix.account import MatrixAccount
from bot.client import ThreadboundClient, client_for
from bot.wiring import Services, build_services
from core.config import Config
from core.errors import ThreadboundError
from core.logging import configure_logging, shutdown_logging

__all__ = ["DRAIN_SECONDS", "MissingToken", "run_bot", "shut_down"]

_log = structlog.get_logger("bot.app")
DRAIN_SECONDS = 10.0
"""How long a stopping bot waits for posts already under way: under a supervisor's
usual grace period between SIGTERM and SIGKILL (systemd and Docker: 10 s or more)."""


class MissingToken(ThreadboundError):
    """No bot token is set for an account; the message names the variable."""

    def __init__(self, account_id: str, variable: str) -> None:
        self.account_id = account_id
        self.variable = variable
        super().__init__(
            f"no Discord bot token for account {account_id!r}: set the environment "
            f"variable {variable} (the account's token_env in config.toml)"
        )


def discord_accounts(config: Config) -> tuple[str, ...]:
    """The Discord accounts to run: those configured; without any, the implicit one,
    unless only Matrix is configured and no Discord token is set (Matrix alone)."""
    if config.channels.discord.accounts:
        return config.account_ids()
    implicit = config.account_ids()
    if config.matrix_account_ids() and not any(config.account_token(a) for a in implicit):
        return ()
    return implicit


def _tokens(config: Config) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for account_id in discord_accounts(config):
        token = config.account_token(account_id)
        if not token:
            raise MissingToken(account_id, config.token_env(account_id))
        tokens[account_id] = token
    return tokens


async def run_bot(config: Config) -> int:
    """Run until a signal or a fatal Discord error; returns the exit status."""
    tokens = _tokens(config)
    matrix_tokens = [config.matrix_access_token(a) for a in config.matrix_account_ids()]
    configure_logging(
        level=config.logging.level,
        json_path=config.json_log_path(),
        console=config.logging.console,
        secrets=[*tokens.values(), *matrix_tokens],
    )
    services = await build_services(config, single_process=True)
    try:
        return await _serve(services, tokens)
    finally:
        await services.close()
        _log.info("bot.stopped")
        shutdown_logging()


async def shut_down(
    services: Services,
    clients: Sequence[discord.Client],
    *,
    drain_seconds: float = DRAIN_SECONDS,
    matrix: Sequence[MatrixAccount] = (),
) -> None:
    """Let posts under way land, stop the running turns where their threads can still
    say so, then disconnect every Discord client (a Matrix account's sync loop is
    cancelled by its caller, after this)."""
    await services.drain(drain_seconds)
    accounts = [a for a in (getattr(c, "account", None) for c in clients) if a is not None]
    shown = [account.drain() for account in accounts] + [account.drain() for account in matrix]
    await services.stop_turns(drain_seconds, shown)
    for client in clients:
        await client.close()


def _stop_starting(
    clients: Sequence[ThreadboundClient], runs: Sequence[asyncio.Task[None]]
) -> None:
    """Cancel the start of every client still logging in (its commands syncing, say).

    Left to run, its next request would meet the HTTP session the stop closes and
    fail, and that failure would tear the task group down mid-stop. A client that
    is set up is stopped by :func:`shut_down`, gateway and all.
    """
    for client, run in zip(clients, runs, strict=True):
        if not client.set_up and not run.done():
            run.cancel()


async def _serve(services: Services, tokens: dict[str, str]) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)

    clients: list[ThreadboundClient] = []
    if tokens:
        endpoints = services.config.discord
        use_endpoints(endpoints.api_base_url or None, endpoints.gateway_url or None)
        managers = ManagerRegistry()
        clients = [client_for(account, services, managers) for account in tokens]
    status = 0
    try:
        async with aiohttp.ClientSession() as http, asyncio.TaskGroup() as group:
            matrix = [
                MatrixAccount(account_id, services, session=http)
                for account_id in services.config.matrix_account_ids()
            ]
            maintenance = group.create_task(services.maintain())
            runs = [group.create_task(c.start(tokens[c.account_id])) for c in clients]
            syncs = [group.create_task(account.run()) for account in matrix]
            _log.info(
                "bot.starting",
                accounts=list(tokens),
                matrix_accounts=[a.account_id for a in matrix],
                live_bindings=len(services.bindings),
            )
            waiter = group.create_task(stop.wait())
            await asyncio.wait([waiter, *runs, *syncs], return_when=asyncio.FIRST_COMPLETED)
            _stop_starting(clients, runs)
            await shut_down(services, clients, matrix=matrix)
            for sync in syncs:
                sync.cancel()
            maintenance.cancel()
            waiter.cancel()
    except* discord.LoginFailure:
        _log.error("bot.login_failed", hint="Discord rejected a bot token; check token_env")
        status = 1
    except* discord.PrivilegedIntentsRequired:
        _log.error(
            "bot.intents_refused",
            hint="enable the Message Content intent for the bot in the Discord developer portal",
        )
        status = 1
    except* MatrixLoginError as failures:
        for failure in failures.exceptions:
            _log.error("bot.matrix_login_failed", error=str(failure))
        status = 1
    return status
