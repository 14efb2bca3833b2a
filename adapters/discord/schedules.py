"""What the scheduler posts in Discord: the :class:`~core.scheduler.runner.ScheduleChannel`
of one account.

A run's line in a bound thread goes through the thread delivery (an archived
thread is reopened, a deleted one ends its binding, as for any message); a
line in a channel (a channel job's run, a paused job's notice to its owner) is
posted by the bot, pinging nobody but the owner it names.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

import discord

from adapters.discord.completions import DiscordCompletionSink
from adapters.discord.delivery import ThreadDelivery
from adapters.discord.ids import snowflake
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.errors import DeliveryError
from core.scheduler.runner import ConversationGone

__all__ = ["DiscordSchedules"]

DISCORD_EPOCH_MS = 1_420_070_400_000


class DiscordSchedules:
    """The scheduler's port for one bot account."""

    channel = "discord"

    def __init__(self, delivery: ThreadDelivery, earlier: DiscordCompletionSink) -> None:
        self._delivery = delivery
        self._earlier = earlier
        """Whose look-up of a post a dead process may have made this one uses too."""

    @property
    def account_id(self) -> str:
        return self._delivery.manager.account_id

    async def tell_thread(
        self, binding: SessionBindingRecord, text: str, /, *, since: datetime | None = None
    ) -> None:
        if since is not None:  # a run a dead process was starting: it may have said it
            with contextlib.suppress(DeliveryError):  # cannot look: the send below decides
                if await self._earlier.find_posted(binding.conversation, text, since):
                    return
        try:
            await self._delivery.bot_send(binding, text)
        except DeliveryError as exc:
            live = self._delivery.bindings.get(binding.binding_id)
            if live is None or live.status != "active":  # the thread is gone: unbound
                raise ConversationGone(str(exc)) from exc
            raise

    async def tell_channel(
        self, conversation: ConversationRef, text: str, /, *, mention: str | None = None
    ) -> None:
        allowed = discord.AllowedMentions.none()
        if mention is not None:
            allowed = discord.AllowedMentions(
                everyone=False, roles=False, users=[discord.Object(snowflake(mention))]
            )
        try:
            channel = await self._delivery.manager.fetch_channel(conversation.conversation_id)
            await channel.send(text[:2000], allowed_mentions=allowed)
        except discord.NotFound as exc:
            raise ConversationGone(f"channel {conversation.conversation_id} is gone") from exc

    async def is_member(self, scope: str | None, user_id: str, /) -> bool:
        if scope is None:
            return True
        client = self._delivery.manager.client
        guild = client.get_guild(snowflake(scope))
        if guild is None:
            return True
        if guild.get_member(snowflake(user_id)) is not None:
            return True
        try:
            await guild.fetch_member(snowflake(user_id))
        except discord.NotFound:
            return False
        except discord.HTTPException:
            return True  # Discord could not say: the run goes ahead
        return True

    def seq_at(self, moment: datetime, /) -> int:
        """A snowflake for ``moment``: a scheduled turn sorts among the thread's messages."""
        return (int(moment.timestamp() * 1000) - DISCORD_EPOCH_MS) << 22
