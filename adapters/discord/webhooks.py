"""Persona webhooks: a few per parent channel, found or created on demand, then reused.

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
from typing import Any

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
    """The persona webhooks of one account: up to ``per_channel`` in each parent channel,
    its threads spread over them.

    A webhook edits only the messages it posted, so a thread keeps the webhook it
    was given (remembered here, and in its binding's ``webhook_id`` for after a
    restart). A new thread goes to the channel's least busy webhook, or to a new
    one while the channel has fewer than ``per_channel``: Discord limits each
    webhook to a few requests a second, and a busy channel's threads would
    otherwise all wait on one.
    """

    def __init__(
        self,
        manager: ThreadBindingManager,
        *,
        clock: Clock | None = None,
        requests_per_second: float = 5.0,
        per_channel: int = 1,
    ) -> None:
        self._manager = manager
        self._rate = requests_per_second
        self._per_channel = max(1, per_channel)
        self._pacers: dict[int, Pacer] = {}
        self._clock: Clock = clock or SystemClock()
        self._hooks: dict[int, list[discord.Webhook]] = {}
        """Our webhooks in each channel, oldest first."""
        self._threads: dict[str, int] = {}
        """Each thread's webhook (by conversation id): the one that posted its messages."""
        self._refused: dict[int, tuple[WebhookUnavailable, datetime]] = {}
        """Channels that refused: the refusal, and when to ask again."""
        self._locks: dict[int, asyncio.Lock] = {}

    async def get(
        self, parent_id: str | int, thread: str | None = None, known: str | None = None
    ) -> discord.Webhook:
        """The webhook ``thread`` speaks through in the channel (``known``: the one its
        binding recorded); raises WebhookUnavailable while the channel refuses one."""
        key = snowflake(parent_id)
        wanted = self._threads.get(thread) if thread is not None else None
        if wanted is None and known:
            wanted = int(known)
        hooks = self._hooks.get(key)
        if hooks and wanted is not None:
            found = next((h for h in hooks if h.id == wanted), None)
            if found is not None:
                return self._assign(thread, found)
        async with self._locks.setdefault(key, asyncio.Lock()):
            hooks = self._hooks.get(key)
            if not hooks:
                self._raise_if_refused(key)
                hooks = self._hooks[key] = await self._find_or_create_once(key)
            found = next((h for h in hooks if h.id == wanted), None) if wanted else None
            if found is None:
                found = await self._least_busy(key, hooks)
            return self._assign(thread, found)

    def _assign(self, thread: str | None, hook: discord.Webhook) -> discord.Webhook:
        if thread is not None:
            self._threads[thread] = hook.id
        return hook

    async def _least_busy(self, key: int, hooks: list[discord.Webhook]) -> discord.Webhook:
        """The channel's webhook with the fewest threads; a new one while every webhook has
        a thread and the channel has room for more."""
        load = {hook.id: 0 for hook in hooks}
        for hook_id in self._threads.values():
            if hook_id in load:
                load[hook_id] += 1
        quietest = min(hooks, key=lambda h: load[h.id])
        if load[quietest.id] == 0 or len(hooks) >= self._per_channel:
            return quietest
        try:
            hook = await self._create(key)
        except WebhookUnavailable:  # the channel is full, say: the threads share
            return quietest
        hooks.append(hook)
        return hook

    def pacer(self, hook: discord.Webhook) -> Pacer:
        """The webhook's pacer: final text before streaming edits, one request at a time,
        at most ``rate`` a second. One at a time, discord.py keeps to the webhook's bucket
        exactly (it holds a request until the bucket Discord's headers describe has room);
        a pacer guessing the bucket's size could only be slower or over it."""
        pacer = self._pacers.get(hook.id)
        if pacer is None:
            # No burst: streaming edits that wait are coalesced into one. Let go in a
            # burst, a finished life's edits all went, and the next thread's intro on the
            # same webhook waited behind them (bench_subagents: 6 ms per spawn became 26).
            pacer = self._pacers[hook.id] = Pacer(self._rate, burst=1, one_at_a_time=True)
        return pacer

    def forget(self, parent_id: str | int, hook_id: int | None = None) -> None:
        """Drop a webhook Discord no longer knows (``hook_id``; None: every one of the
        channel's); its threads get another at their next message."""
        key = snowflake(parent_id)
        hooks = self._hooks.get(key, [])
        gone = {h.id for h in hooks} if hook_id is None else {hook_id}
        self._hooks[key] = [h for h in hooks if h.id not in gone]
        if not self._hooks[key]:
            del self._hooks[key]
        for thread, assigned in list(self._threads.items()):
            if assigned in gone:
                del self._threads[thread]

    def _raise_if_refused(self, parent_id: int) -> None:
        """Within the retry delay, a channel that refused is not asked again."""
        refused = self._refused.get(parent_id)
        if refused is not None and self._clock.now() < refused[1]:
            raise _again(refused[0])

    async def _find_or_create_once(self, parent_id: int) -> list[discord.Webhook]:
        """Ask Discord; a refusal is remembered (``repeated`` after the first one)."""
        try:
            hooks = await self._find_or_create(parent_id)
        except WebhookUnavailable as exc:
            known = parent_id in self._refused
            retry_at = self._clock.now() + timedelta(seconds=REFUSAL_RETRY)
            self._refused[parent_id] = (exc, retry_at)
            if known:
                raise _again(exc) from exc
            raise
        if self._refused.pop(parent_id, None) is not None:
            _log.info("discord.webhook_available_again", channel_id=str(parent_id))
        return hooks

    async def _find_or_create(self, parent_id: int) -> list[discord.Webhook]:
        """The channel's webhooks of ours (a restart finds them), or a first one made."""
        channel = await self._text_channel(parent_id)
        me = self._manager.client.user
        try:
            ours = [
                hook
                for hook in await channel.webhooks()
                if hook.name == WEBHOOK_NAME
                and hook.token
                and (hook.user is None or me is None or hook.user.id == me.id)
            ]
        except discord.Forbidden as exc:
            raise _forbidden(parent_id, exc) from exc
        return ours or [await self._create(parent_id, channel)]

    async def _create(self, parent_id: int, channel: Any = None) -> discord.Webhook:
        channel = channel or await self._text_channel(parent_id)
        try:
            hook: discord.Webhook = await channel.create_webhook(name=WEBHOOK_NAME)
        except discord.Forbidden as exc:
            raise _forbidden(parent_id, exc) from exc
        except discord.HTTPException as exc:  # e.g. the channel holds the most it may
            raise WebhookUnavailable(
                f"channel {parent_id} refused a new webhook (HTTP {exc.status}, code {exc.code})",
                code=exc.code,
            ) from exc
        _log.info("discord.webhook_created", channel_id=str(parent_id))
        return hook

    async def _text_channel(self, parent_id: int) -> Any:
        channel = await self._manager.fetch_channel(parent_id)
        if not isinstance(channel, discord.TextChannel):
            raise WebhookUnavailable(
                f"channel {parent_id} cannot have webhooks; it is not a text channel"
            )
        return channel


def _forbidden(parent_id: int, exc: discord.Forbidden) -> WebhookUnavailable:
    return WebhookUnavailable(
        f"the bot may not manage webhooks in channel {parent_id} "
        f"(HTTP {exc.status}, code {exc.code}); grant it the Manage Webhooks "
        "permission there. Until then it posts in its threads itself.",
        code=exc.code,
    )


def _again(refusal: WebhookUnavailable) -> WebhookUnavailable:
    """A known refusal, raised anew (never the same exception object twice)."""
    return WebhookUnavailable(str(refusal), code=refusal.code, repeated=True)
