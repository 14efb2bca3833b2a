"""One webhook per parent channel: found or created on demand, then reused.

Webhook tokens are secrets. They live only in memory here; after a restart
the webhook is looked up again among the channel's webhooks (Discord returns
tokens for webhooks the application created), so nothing stores them at rest.

A channel where no webhook can be had (the bot lacks Manage Webhooks, or the
channel cannot hold webhooks) raises :class:`WebhookUnavailable`; the caller
then posts as the bot. The refusal is remembered for :data:`REFUSAL_RETRY`
seconds (every message of a streamed answer would otherwise ask Discord again
and be refused again), and marked ``repeated`` once it is known, so the caller
warns about it once, not once per message.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import discord

from adapters.discord.ids import snowflake
from adapters.discord.manager import ThreadBindingManager
from adapters.discord.pacing import Pacer
from core.clock import Clock, SystemClock
from core.errors import DeliveryError
from core.logging import get_logger

__all__ = ["REFUSAL_RETRY", "WEBHOOK_NAME", "WebhookPool", "WebhookUnavailable"]

WEBHOOK_NAME = "threadbound"
REFUSAL_RETRY = 600.0
"""Seconds before a channel that refused a webhook is asked again (a permission granted)."""

_log = get_logger("adapters.discord")


class WebhookUnavailable(DeliveryError):
    """No persona webhook can be had in this channel; the bot must speak itself."""

    def __init__(self, message: str, *, code: int | None = None, repeated: bool = False) -> None:
        super().__init__(message)
        self.code = code
        """Discord's error code (50013: missing permissions), if Discord refused."""
        self.repeated = repeated
        """This channel had refused already: the refusal was reported before."""


class WebhookPool:
    """The persona webhooks of one account, keyed by parent channel id."""

    def __init__(
        self,
        manager: ThreadBindingManager,
        *,
        clock: Clock | None = None,
        requests_per_second: float = 2.0,
    ) -> None:
        self._manager = manager
        self._rate = requests_per_second
        self._pacers: dict[int, Pacer] = {}
        self._clock: Clock = clock or SystemClock()
        self._hooks: dict[int, discord.Webhook] = {}
        self._refused: dict[int, tuple[WebhookUnavailable, datetime]] = {}
        """Channels that refused: the refusal, and when to ask again."""
        self._locks: dict[int, asyncio.Lock] = {}

    async def get(self, parent_id: str | int) -> discord.Webhook:
        """The channel's webhook; raises WebhookUnavailable while the channel refuses one."""
        key = snowflake(parent_id)
        hook = self._hooks.get(key)
        if hook is not None:
            return hook
        async with self._locks.setdefault(key, asyncio.Lock()):
            hook = self._hooks.get(key)
            if hook is None:
                self._raise_if_refused(key)
                hook = self._hooks[key] = await self._find_or_create_once(key)
            return hook

    def pacer(self, parent_id: str | int) -> Pacer:
        """The pacer of the channel's webhook: its posts and edits at most ``rate`` a second
        (one at a time after a pause: Discord's window is 5 per 2 s), final text before
        streaming edits."""
        key = snowflake(parent_id)
        pacer = self._pacers.get(key)
        if pacer is None:
            pacer = self._pacers[key] = Pacer(self._rate, burst=1)
        return pacer

    def forget(self, parent_id: str | int) -> None:
        """Drop a webhook Discord no longer knows; the next send makes a new one."""
        self._hooks.pop(snowflake(parent_id), None)

    def _raise_if_refused(self, parent_id: int) -> None:
        """Within the retry delay, a channel that refused is not asked again."""
        refused = self._refused.get(parent_id)
        if refused is not None and self._clock.now() < refused[1]:
            raise _again(refused[0])

    async def _find_or_create_once(self, parent_id: int) -> discord.Webhook:
        """Ask Discord; a refusal is remembered (``repeated`` after the first one)."""
        try:
            hook = await self._find_or_create(parent_id)
        except WebhookUnavailable as exc:
            known = parent_id in self._refused
            retry_at = self._clock.now() + timedelta(seconds=REFUSAL_RETRY)
            self._refused[parent_id] = (exc, retry_at)
            if known:
                raise _again(exc) from exc
            raise
        if self._refused.pop(parent_id, None) is not None:
            _log.info("discord.webhook_available_again", channel_id=str(parent_id))
        return hook

    async def _find_or_create(self, parent_id: int) -> discord.Webhook:
        channel = await self._manager.fetch_channel(parent_id)
        if not isinstance(channel, discord.TextChannel):
            raise WebhookUnavailable(
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
            raise WebhookUnavailable(
                f"the bot may not manage webhooks in channel {parent_id} "
                f"(HTTP {exc.status}, code {exc.code}); grant it the Manage Webhooks "
                "permission there. Until then it posts in its threads itself.",
                code=exc.code,
            ) from exc
        _log.info("discord.webhook_created", channel_id=str(parent_id))
        return hook


def _again(refusal: WebhookUnavailable) -> WebhookUnavailable:
    """A known refusal, raised anew (never the same exception object twice)."""
    return WebhookUnavailable(str(refusal), code=refusal.code, repeated=True)
