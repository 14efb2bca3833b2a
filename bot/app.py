"""Running the bot: every account's client, the binding maintenance, clean shutdown.

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

import discord
import structlog

from adapters.discord.endpoints import use_endpoints
from adapters.discord.manager import ManagerRegistry
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


def _tokens(config: Config) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for account_id in config.account_ids():
        token = config.account_token(account_id)
        if not token:
            raise MissingToken(account_id, config.token_env(account_id))
        tokens[account_id] = token
    return tokens


async def run_bot(config: Config) -> int:
    """Run until a signal or a fatal Discord error; returns the exit status."""
    tokens = _tokens(config)
    configure_logging(
        level=config.logging.level,
        json_path=config.json_log_path(),
        console=config.logging.console,
        secrets=tokens.values(),
    )
    services = await build_services(config, single_process=True)
    try:
        return await _serve(services, tokens)
    finally:
        await services.close()
        _log.info("bot.stopped")
        shutdown_logging()


async def shut_down(
    services: Services, clients: Sequence[discord.Client], *, drain_seconds: float = DRAIN_SECONDS
) -> None:
    """Let posts under way land, stop the running turns where their threads can still
    say so, then disconnect every client."""
    await services.drain(drain_seconds)
    accounts = [a for a in (getattr(c, "account", None) for c in clients) if a is not None]
    await services.stop_turns(drain_seconds, [account.drain() for account in accounts])
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

    endpoints = services.config.discord
    use_endpoints(endpoints.api_base_url or None, endpoints.gateway_url or None)
    managers = ManagerRegistry()
    clients = [client_for(account, services, managers) for account in tokens]
    status = 0
    try:
        async with asyncio.TaskGroup() as group:
            maintenance = group.create_task(services.maintain())
            runs = [group.create_task(c.start(tokens[c.account_id])) for c in clients]
            _log.info("bot.starting", accounts=list(tokens), live_bindings=len(services.bindings))
            waiter = group.create_task(stop.wait())
            await asyncio.wait([waiter, *runs], return_when=asyncio.FIRST_COMPLETED)
            _stop_starting(clients, runs)
            await shut_down(services, clients)
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
    return status
