"""The discord.py client of one bot account."""

from __future__ import annotations

import discord
import structlog

from bot.wiring import Services

__all__ = ["ThreadboundClient", "intents"]

_log = structlog.get_logger("bot.client")


def intents() -> discord.Intents:
    """Guilds and messages, with message content: a bound thread is read without mentions."""
    wanted = discord.Intents.default()
    wanted.message_content = True
    return wanted


class ThreadboundClient(discord.Client):
    """One per configured account; everything it uses comes from :class:`Services`."""

    def __init__(self, account_id: str, services: Services) -> None:
        super().__init__(intents=intents())
        self.account_id = account_id
        self.services = services

    async def on_ready(self) -> None:
        _log.info(
            "bot.ready",
            account=self.account_id,
            guilds=len(self.guilds),
            live_bindings=len(self.services.bindings),
        )
