"""One webhook per parent channel: found or created on demand, then reused.

Webhook tokens are secrets. They live only in memory here; after a restart
the webhook is looked up again among the channel's webhooks (Discord returns
tokens for webhooks the application created), so nothing stores them at rest.
"""

from __future__ import annotations

import asyncio

import discord

from adapters.discord.ids import snowflake
from adapters.discord.manager import ThreadBindingManager
from core.errors import DeliveryError
from core.logging import get_logger

__all__ = ["WEBHOOK_NAME", "WebhookPool"]

WEBHOOK_NAME = "threadbound"
_log = get_logger("adapters.discord")


class WebhookPool:
    """The persona webhooks of one account, keyed by parent channel id."""

    def __init__(self, manager: ThreadBindingManager) -> None:
        self._manager = manager
        self._hooks: dict[int, discord.Webhook] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def get(self, parent_id: str | int) -> discord.Webhook:
        key = snowflake(parent_id)
        hook = self._hooks.get(key)
        if hook is not None:
            return hook
        async with self._locks.setdefault(key, asyncio.Lock()):
            hook = self._hooks.get(key)
            if hook is None:
                hook = self._hooks[key] = await self._find_or_create(key)
            return hook

    def forget(self, parent_id: str | int) -> None:
        """Drop a webhook Discord no longer knows; the next send makes a new one."""
        self._hooks.pop(snowflake(parent_id), None)

    async def _find_or_create(self, parent_id: int) -> discord.Webhook:
        channel = await self._manager.fetch_channel(parent_id)
        if not isinstance(channel, discord.TextChannel):
            raise DeliveryError(
                f"channel {parent_id} cannot have webhooks; it is not a text channel"
            )
        me = self._manager.client.user
        try:
            for hook in await channel.webhooks():
                ours = hook.user is None or me is None or hook.user.id == me.id
                if hook.name == WEBHOOK_NAME and hook.token and ours:
                    return hook
            hook = await channel.create_webhook(name=WEBHOOK_NAME)
        except discord.Forbidden as exc:
            raise DeliveryError(
                f"the bot may not manage webhooks in channel {parent_id}; "
                "grant it the Manage Webhooks permission there"
            ) from exc
        _log.info("discord.webhook_created", channel_id=str(parent_id))
        return hook
