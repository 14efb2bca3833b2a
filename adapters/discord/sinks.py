"""Where a streamed message's parts go: the :class:`~adapters.discord.streaming.MessageSink`s.

A persona's words go through :class:`ThreadSink` (the webhook, or the bot naming the
persona); the bot's own lines (a plan) through :class:`BotSink`; the thread's one
status line through :class:`StatusSink`, which keeps its message id in the binding's
metadata across agents and restarts and pins it where a conversation goes on. Each
posts and edits through :class:`~adapters.discord.delivery.ThreadDelivery`, which
retries and repairs; a sink only remembers which message is which.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.discord.delivery import Persona, ThreadDelivery, name_tag
from adapters.discord.text import MESSAGE_LIMIT
from core.bindings.records import BindingMetadata, SessionBindingRecord
from core.subagents.delivery import Posted

__all__ = ["STATUS_MESSAGE_KEY", "BotSink", "StatusSink", "ThreadSink"]

STATUS_MESSAGE_KEY = "status_message_id"
"""Binding metadata: the message that is the thread's status line."""


class BotSink:
    """A :class:`~adapters.discord.streaming.MessageSink` posting as the bot (status lines)."""

    def __init__(self, delivery: ThreadDelivery, record: SessionBindingRecord) -> None:
        self._delivery = delivery
        self._record = record

    async def send(self, content: str) -> str:
        return await self._delivery.bot_send(self._record, content)

    async def edit(self, message_id: str, content: str) -> str:
        return await self._delivery.bot_edit(self._record, message_id, content)


class StatusSink:
    """The thread's one status line, kept across the agents shown there.

    An agent rebuilt after eviction or a restart, or a new agent after a
    handoff, gets a new presenter; without this each would post its own
    "Status:" message. The line's message id lives in the binding's metadata
    (``status_message_id``): a new presenter edits that message (posted again
    if someone deleted it). Each message that becomes the line of a conversation
    that goes on is pinned where the bot may pin (:meth:`ThreadDelivery.pin`), so a
    long thread keeps it in view; a run-mode thread is one task, let go when it is
    done, and its line is not pinned (a pin is a request and two gateway events
    that would buy it nothing).
    """

    def __init__(self, delivery: ThreadDelivery, record: SessionBindingRecord) -> None:
        self._bot = BotSink(delivery, record)
        self._delivery = delivery
        self._bindings = delivery.bindings
        self._binding_id = record.binding_id

    async def send(self, content: str) -> str:
        current = self._bindings.get(self._binding_id)
        known = current.meta.status_message_id if current else None
        message_id = await (
            self._bot.edit(str(known), content) if known else self._bot.send(content)
        )
        await self._remember(message_id)
        return message_id

    async def edit(self, message_id: str, content: str) -> str:
        shown = await self._bot.edit(message_id, content)
        if shown != message_id:
            await self._remember(shown)
        return shown

    async def _remember(self, message_id: str) -> None:
        current = self._bindings.active(self._binding_id)
        if current is not None and current.meta.status_message_id != message_id:
            await self._bindings.update_metadata(
                self._binding_id, BindingMetadata(status_message_id=message_id)
            )
            if current.meta.spawn_mode != "run":
                await self._delivery.pin(current, message_id)


class ThreadSink:
    """A :class:`~adapters.discord.streaming.MessageSink` for one binding and persona."""

    def __init__(self, delivery: ThreadDelivery, record: SessionBindingRecord, persona: Persona):
        self._delivery = delivery
        self._record = record
        self._persona = persona
        self._sent: dict[str, Posted] = {}
        self._by_bot = False

    def limit(self) -> int:
        """The longest part to send: room for the persona's name once the bot speaks for it.

        Only ever lowers (a streamed message must not be re-split into fewer parts).
        """
        if not self._by_bot:
            return MESSAGE_LIMIT
        return MESSAGE_LIMIT - len(name_tag(self._persona))

    async def send(self, content: str) -> str:
        return self._keep(await self._delivery.send(self._record, self._persona, content))

    async def edit(self, message_id: str, content: str) -> str:
        sent = self._sent[message_id]
        return self._keep(await self._delivery.edit(self._record, sent, self._persona, content))

    def adopt(self, sent: Posted) -> None:
        """A message an earlier process posted for this persona: this sink edits it now."""
        self._keep(sent)

    def posted(self, message_ids: Sequence[str]) -> tuple[Posted, ...]:
        """The messages ``message_ids`` (this sink's), with the way each was sent."""
        return tuple(self._sent[m] for m in message_ids if m in self._sent)

    def _keep(self, sent: Posted) -> str:
        self._sent[sent.message_id] = sent
        self._by_bot = self._by_bot or sent.path == "bot"
        return sent.message_id
