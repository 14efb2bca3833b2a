"""A fake Discord (REST API v10 + gateway) on loopback, for the real discord.py client.

Built for threadbound's integration and end-to-end tests, and meant to become a local
"playground" Discord. It imports nothing from the product (only the standard library
and aiohttp), so it can be promoted as is::

    async with FakeDiscord() as fake:
        discord.http.Route.BASE = f"{fake.base_url}/api/v10"
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
        bot = fake.add_bot("token")
        guild = fake.add_guild("guild")
        channel = fake.add_text_channel(guild, "general")
        alice = fake.add_member(guild, "alice")
        ...  # start a discord.Client with "token", then: await fake.wait_ready(bot)
        await fake.user_says(channel, alice, "hello")
        reply = await fake.wait_for_message(channel, lambda m: m.author_id == bot.id)
"""

from __future__ import annotations

from fakediscord._acting import UserFile
from fakediscord._content import MAX_CONTENT, MAX_FILE_BYTES, MAX_FILES
from fakediscord.errors import DiscordError
from fakediscord.faults import Fault, Gate
from fakediscord.gateway import GatewaySession, Intents, SentEvent
from fakediscord.interactions import InteractionHandle
from fakediscord.models import (
    Application,
    ApplicationCommand,
    Attachment,
    BotAccount,
    Channel,
    Guild,
    Interaction,
    InteractionResponse,
    Member,
    Message,
    Reaction,
    Role,
    User,
    Webhook,
)
from fakediscord.ratelimits import Bucket, RateLimiter, RateLimits
from fakediscord.recording import RecordedFile, RecordedRequest
from fakediscord.server import DEFAULT_RATE_LIMITS, WAIT, FakeDiscord
from fakediscord.state import State

__all__ = [
    "DEFAULT_RATE_LIMITS",
    "MAX_CONTENT",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "WAIT",
    "Application",
    "ApplicationCommand",
    "Attachment",
    "BotAccount",
    "Bucket",
    "Channel",
    "DiscordError",
    "FakeDiscord",
    "Fault",
    "Gate",
    "GatewaySession",
    "Guild",
    "Intents",
    "Interaction",
    "InteractionHandle",
    "InteractionResponse",
    "Member",
    "Message",
    "RateLimiter",
    "RateLimits",
    "Reaction",
    "RecordedFile",
    "RecordedRequest",
    "Role",
    "SentEvent",
    "State",
    "User",
    "UserFile",
    "Webhook",
]
