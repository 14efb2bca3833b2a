"""Posting completion announcements in Discord: the :class:`CompletionSink` of one account.

A bound announcement goes into the subagent's thread under its persona (or
as the bot, in the same thread, when no webhook can be had), after whatever
the thread's presenter is still sending (``before_post``), so the header
never overtakes the answer it announces. A fallback goes to the
requester's channel as the bot itself, in as many messages as its text needs
(a reply is the whole answer). Mentions are always disabled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Literal

import discord

from adapters.discord.delivery import ThreadDelivery, persona_of
from adapters.discord.errors import code_of, discord_said
from adapters.discord.ids import snowflake
from adapters.discord.text import split_message
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.errors import DeliveryError
from core.subagents.delivery import Posted

__all__ = ["DiscordCompletionSink"]

_NO_MENTIONS = discord.AllowedMentions.none()

HISTORY_LIMIT = 100
"""Messages looked through for an announcement a dead process may have posted."""

BeforePost = Callable[[SessionBindingRecord], Awaitable[None]]


class DiscordCompletionSink:
    """Completion announcements for one bot account."""

    channel = "discord"

    def __init__(self, delivery: ThreadDelivery, *, before_post: BeforePost | None = None) -> None:
        self._delivery = delivery
        self._before_post = before_post
        self._partial: dict[tuple[str, str], list[str]] = {}
        """Posts cut short, by (channel, content): the ids of the parts already there."""

    @property
    def account_id(self) -> str:
        return self._delivery.manager.account_id

    async def post_bound(self, binding: SessionBindingRecord, content: str) -> Posted:
        if self._before_post is not None:
            await self._before_post(binding)
        # The header names the persona: posted by the bot, it needs no name before it.
        return await self._delivery.send(binding, persona_of(binding), content, signed=True)

    async def post_to(self, conversation: ConversationRef, content: str) -> Posted:
        """Post as the bot, split into messages of Discord's size; the first one is the
        post's id. A post cut short (a part refused, or a process gone between parts)
        goes on after the parts already in the channel, never posting one twice: those
        this process posted are remembered, those a dead one posted are found by
        :meth:`find_posted`."""
        channel_id = snowflake(conversation.conversation_id)
        key = (conversation.conversation_id, content)
        done = self._partial.setdefault(key, [])
        try:
            channel = await self._delivery.manager.fetch_channel(channel_id)
            for part in split_message(content)[len(done) :]:
                message = await channel.send(part, allowed_mentions=_NO_MENTIONS)
                done.append(str(message.id))
        except discord.HTTPException as exc:
            raise DeliveryError(
                f"could not post in channel {channel_id}: {discord_said(exc)}",
                path="bot",
                code=code_of(exc),
            ) from exc
        del self._partial[key]
        return Posted(done[0], "bot")

    async def find_posted(
        self, conversation: ConversationRef, content: str, since: datetime
    ) -> Posted | None:
        """Look through what was posted there since ``since`` for this exact announcement.

        Posted in several messages, it counts as posted once its last part is there;
        the parts found before a missing one are kept for :meth:`post_to` to go on from.
        """
        manager = self._delivery.manager
        me = manager.client.user
        parts = split_message(content)
        found: list[discord.Message] = []
        try:
            channel = await manager.fetch_channel(snowflake(conversation.conversation_id))
            async for message in channel.history(limit=HISTORY_LIMIT, after=since):
                ours = message.webhook_id is not None or (me is not None and message.author == me)
                if ours and len(found) < len(parts) and message.content == parts[len(found)]:
                    found.append(message)
        except discord.HTTPException as exc:
            raise DeliveryError(
                f"could not read channel {conversation.conversation_id} to check for an "
                f"earlier post: {discord_said(exc)}"
            ) from exc
        if len(found) == len(parts):
            first = found[0]
            path: Literal["webhook", "bot"] = "webhook" if first.webhook_id is not None else "bot"
            return Posted(str(first.id), path)
        if found:
            self._partial[(conversation.conversation_id, content)] = [str(m.id) for m in found]
        return None
