"""What Discord answers when it refuses: the codes the bot acts on, and one way to say it.

The thread delivery, the thread manager and the completion sink all turn a
failed Discord call into a message for a log line or a person; they say it the
same way (``HTTP 403, Missing Permissions, code 50013``) and agree on which
exceptions a Discord call can end with.
"""

from __future__ import annotations

import asyncio
from typing import Final

import aiohttp
import discord

__all__ = [
    "DISCORD_FAILURES",
    "MISSING_ACCESS",
    "MISSING_PERMISSIONS",
    "THREAD_ARCHIVED",
    "UNKNOWN_CHANNEL",
    "UNKNOWN_MESSAGE",
    "UNKNOWN_WEBHOOK",
    "code_of",
    "discord_said",
]

UNKNOWN_CHANNEL: Final = 10003
UNKNOWN_MESSAGE: Final = 10008
UNKNOWN_WEBHOOK: Final = 10015
MISSING_ACCESS: Final = 50001
MISSING_PERMISSIONS: Final = 50013
THREAD_ARCHIVED: Final = 50083

DISCORD_FAILURES: Final = (
    discord.HTTPException,
    asyncio.TimeoutError,
    aiohttp.ClientError,
    OSError,
)
"""Everything a REST call through discord.py can fail with: Discord's answer, a timeout,
or the connection (some aiohttp errors are not OSErrors)."""


def code_of(exc: BaseException | None) -> int | None:
    """Discord's error code of ``exc``; None when it gave none (discord.py says 0)."""
    return getattr(exc, "code", None) or None


def discord_said(exc: BaseException) -> str:
    """``HTTP 403, Missing Permissions, code 50013``; a non-HTTP failure by its type."""
    if isinstance(exc, discord.HTTPException):
        parts = [f"HTTP {exc.status}", exc.text, f"code {exc.code}" if exc.code else ""]
        return ", ".join(part for part in parts if part)
    return f"{type(exc).__name__}: {exc}"
