"""Putting an agent's words in its bound thread, under its persona.

A persona message goes through the parent channel's webhook with the agent's
name and avatar, ``thread_id`` set, and mentions disabled (model output must
never ping anyone). When the webhook path fails for a reason that does not
end the binding, the bot itself posts into the SAME thread: a bound
destination is never silently swapped for the parent channel.

What a failure means for the binding:

- unknown channel (10003): the thread is gone; the binding ends
  ``thread-deleted``, without a farewell;
- thread locked (50083 — an archived but unlocked thread is reopened by the
  webhook post itself): the binding ends ``thread-archived``;
- unknown webhook (10015): the webhook was deleted; a new one is made, once;
- anything else (5xx after discord.py's retries, a timeout): transient; the
  bot send is tried and the binding is kept.

Every outbound send records activity on the binding (``touch``), so a thread
the agent is busy writing in is never swept as idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import discord

from adapters.discord.ids import snowflake
from adapters.discord.manager import ThreadBindingManager
from adapters.discord.webhooks import WebhookPool
from core.bindings.records import SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.errors import DeliveryError
from core.logging import get_logger

__all__ = [
    "DEFAULT_PERSONA",
    "STATUS_MESSAGE_KEY",
    "BotSink",
    "Persona",
    "SentMessage",
    "StatusSink",
    "ThreadDelivery",
    "ThreadSink",
    "persona_of",
]

_log = get_logger("adapters.discord")
_NO_MENTIONS = discord.AllowedMentions.none()
UNKNOWN_CHANNEL, UNKNOWN_WEBHOOK, THREAD_LOCKED = 10003, 10015, 50083


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    avatar_url: str | None = None


DEFAULT_PERSONA = Persona(name="Subagent")
STATUS_MESSAGE_KEY = "status_message_id"
"""Binding metadata: the message that is the thread's status line."""


def persona_of(record: SessionBindingRecord) -> Persona:
    """The persona a binding was made with (name and avatar in its metadata)."""
    data = record.metadata.get("persona") or {}
    return Persona(name=data.get("name") or DEFAULT_PERSONA.name, avatar_url=data.get("avatar_url"))


@dataclass(frozen=True, slots=True)
class SentMessage:
    message_id: str
    path: Literal["webhook", "bot"]


class ThreadDelivery:
    """Sends and edits persona messages in bound threads for one account."""

    def __init__(
        self,
        manager: ThreadBindingManager,
        webhooks: WebhookPool,
        bindings: SessionBindingService,
    ) -> None:
        self.manager = manager
        self._webhooks = webhooks
        self.bindings = bindings

    async def send(
        self, record: SessionBindingRecord, persona: Persona, content: str
    ) -> SentMessage:
        """Post ``content`` in the record's thread; raises DeliveryError if nothing got there."""
        thread_id = snowflake(record.conversation.conversation_id)
        try:
            message = await self._webhook_send(record, persona, content)
            sent = SentMessage(str(message.id), "webhook")
        except discord.HTTPException as exc:
            await self._end_if_fatal(record, exc)
            _log.warning(
                "delivery.webhook_failed",
                binding_id=record.binding_id,
                status=exc.status,
                code=exc.code,
            )
            sent = await self._bot_send(record, content, thread_id)
        self.bindings.touch(record.binding_id)
        return sent

    async def edit(self, record: SessionBindingRecord, sent: SentMessage, content: str) -> None:
        thread_id = snowflake(record.conversation.conversation_id)
        try:
            if sent.path == "webhook":
                hook = await self._webhooks.get(self._parent_id(record))
                await hook.edit_message(
                    int(sent.message_id),
                    content=content,
                    allowed_mentions=_NO_MENTIONS,
                    thread=self._thread(record),
                )
            else:
                thread = await self.manager.fetch_channel(thread_id)
                await thread.get_partial_message(int(sent.message_id)).edit(
                    content=content, allowed_mentions=_NO_MENTIONS
                )
        except discord.HTTPException as exc:
            await self._end_if_fatal(record, exc)
            raise DeliveryError(f"could not edit message {sent.message_id}: {exc.text}") from exc
        self.bindings.touch(record.binding_id)

    async def _webhook_send(
        self, record: SessionBindingRecord, persona: Persona, content: str
    ) -> discord.WebhookMessage:
        parent = self._parent_id(record)
        for attempt in (1, 2):
            hook = await self._webhooks.get(parent)
            try:
                return await hook.send(
                    content,
                    username=persona.name,
                    avatar_url=persona.avatar_url or discord.utils.MISSING,
                    thread=self._thread(record),
                    allowed_mentions=_NO_MENTIONS,
                    wait=True,
                )
            except discord.NotFound as exc:
                if exc.code != UNKNOWN_WEBHOOK or attempt == 2:
                    raise
                self._webhooks.forget(parent)  # deleted under us: make a new one, once
        raise AssertionError("unreachable")

    async def _bot_send(
        self, record: SessionBindingRecord, content: str, thread_id: int
    ) -> SentMessage:
        try:
            thread = await self.manager.fetch_channel(thread_id)
            message = await thread.send(content, allowed_mentions=_NO_MENTIONS)
        except discord.HTTPException as exc:
            await self._end_if_fatal(record, exc)
            raise DeliveryError(
                f"could not post in thread {thread_id} by webhook or as the bot: {exc.text}; "
                "the binding is kept and the message can be retried"
            ) from exc
        return SentMessage(str(message.id), "bot")

    async def _end_if_fatal(self, record: SessionBindingRecord, exc: discord.HTTPException) -> None:
        """End the binding when the thread is gone or locked; then nothing more is tried."""
        reason = {UNKNOWN_CHANNEL: "thread-deleted", THREAD_LOCKED: "thread-archived"}.get(exc.code)
        if reason is None:
            return
        await self.bindings.unbind(record.binding_id, reason=reason)
        raise DeliveryError(
            f"thread {record.conversation.conversation_id} is "
            f"{'gone' if reason == 'thread-deleted' else 'locked'}; its binding has ended"
        ) from exc

    @staticmethod
    def _parent_id(record: SessionBindingRecord) -> int:
        """The channel holding the webhook: the thread's parent, or the bound channel itself."""
        conversation = record.conversation
        return snowflake(conversation.parent_conversation_id or conversation.conversation_id)

    @staticmethod
    def _thread(record: SessionBindingRecord) -> discord.Object | Any:
        """``thread=`` for webhook calls: the thread, or nothing for a bound plain channel."""
        conversation = record.conversation
        if conversation.parent_conversation_id is None:
            return discord.utils.MISSING
        return discord.Object(snowflake(conversation.conversation_id))


class BotSink:
    """A :class:`~adapters.discord.streaming.MessageSink` posting as the bot (status lines)."""

    def __init__(self, manager: ThreadBindingManager, record: SessionBindingRecord) -> None:
        self._manager = manager
        self._thread_id = snowflake(record.conversation.conversation_id)

    async def send(self, content: str) -> str:
        thread = await self._manager.fetch_channel(self._thread_id)
        message = await thread.send(content, allowed_mentions=_NO_MENTIONS)
        return str(message.id)

    async def edit(self, message_id: str, content: str) -> None:
        thread = await self._manager.fetch_channel(self._thread_id)
        await thread.get_partial_message(int(message_id)).edit(
            content=content, allowed_mentions=_NO_MENTIONS
        )


class StatusSink:
    """The thread's one status line, kept across the agents shown there.

    An agent rebuilt after eviction or a restart, or a new agent after a
    handoff, gets a new presenter; without this each would post its own
    "Status:" message. The line's message id lives in the binding's metadata
    (``status_message_id``): a new presenter edits that message, and posts a
    new one only if it was deleted.
    """

    def __init__(
        self,
        manager: ThreadBindingManager,
        bindings: SessionBindingService,
        record: SessionBindingRecord,
    ) -> None:
        self._bot = BotSink(manager, record)
        self._bindings = bindings
        self._binding_id = record.binding_id

    async def send(self, content: str) -> str:
        current = self._bindings.get(self._binding_id)
        known = current.metadata.get(STATUS_MESSAGE_KEY) if current else None
        if known:
            try:
                await self._bot.edit(str(known), content)
                return str(known)
            except discord.NotFound:
                pass  # deleted by someone: a new line below
        message_id = await self._bot.send(content)
        if current is not None and current.status == "active":
            await self._bindings.update_metadata(
                self._binding_id, **{STATUS_MESSAGE_KEY: message_id}
            )
        return message_id

    async def edit(self, message_id: str, content: str) -> None:
        await self._bot.edit(message_id, content)


class ThreadSink:
    """A :class:`~adapters.discord.streaming.MessageSink` for one binding and persona."""

    def __init__(self, delivery: ThreadDelivery, record: SessionBindingRecord, persona: Persona):
        self._delivery = delivery
        self._record = record
        self._persona = persona
        self._sent: dict[str, SentMessage] = {}

    async def send(self, content: str) -> str:
        sent = await self._delivery.send(self._record, self._persona, content)
        self._sent[sent.message_id] = sent
        return sent.message_id

    async def edit(self, message_id: str, content: str) -> None:
        await self._delivery.edit(self._record, self._sent[message_id], content)
