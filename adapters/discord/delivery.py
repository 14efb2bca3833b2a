"""Putting an agent's words in its bound thread, under its persona.

A persona message goes through the parent channel's webhook with the agent's
name and avatar, ``thread_id`` set, and mentions disabled (model output must
never ping anyone). When the webhook cannot be had or refuses (no Manage
Webhooks permission, say), the bot itself posts into the SAME thread: a bound
destination is never silently swapped for the parent channel. The bot then
writes the persona's name in bold before its words (``**Scout**: ...``), so
readers still know who speaks; a channel that refused a webhook is warned
about once (:class:`~adapters.discord.webhooks.WebhookUnavailable`), not once
per message.

Every call is retried while its failure passes (:mod:`adapters.discord.retry`:
rate limits with or without ``Via``, 5xx, timeouts, resets), and repaired where
Discord says what is wrong:

- unknown webhook (10015): the webhook was deleted; a new one is made, and a
  message the dead webhook can no longer edit is posted again under the persona;
- unknown message (10008): someone deleted it; it is posted again;
- archived thread (50083): the thread is reopened and the call made again;
- unknown channel (10003): the thread is gone; the binding ends
  ``thread-deleted``, without a farewell;
- a locked thread, or the bot missing access or a permission in it (50001,
  50013): the binding ends (``thread-archived`` / ``missing-permissions``).

What still fails is one ``delivery.failed`` line with its path and Discord
code, and a :class:`~core.errors.DeliveryError` for the caller: never a silent
truncation. Every outbound send records activity on the binding (``touch``),
so a thread the agent is busy writing in is never swept as idle.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal, TypeVar

import discord

from adapters.discord.errors import (
    DISCORD_FAILURES,
    MISSING_ACCESS,
    MISSING_PERMISSIONS,
    THREAD_ARCHIVED,
    UNKNOWN_CHANNEL,
    UNKNOWN_MESSAGE,
    UNKNOWN_WEBHOOK,
    code_of,
    discord_said,
)
from adapters.discord.ids import snowflake
from adapters.discord.manager import ThreadBindingManager
from adapters.discord.pacing import text_source
from adapters.discord.retry import retrying
from adapters.discord.text import MESSAGE_LIMIT
from adapters.discord.webhooks import WebhookPool, WebhookUnavailable
from core import log_events
from core.bindings.records import BindingMetadata, SessionBindingRecord
from core.bindings.service import SessionBindingService
from core.config import DEFAULT_DISPLAY_NAME
from core.errors import DeliveryError
from core.logging import get_logger
from core.subagents.delivery import Posted

__all__ = [
    "DEFAULT_PERSONA",
    "THREAD_DELETED",
    "Persona",
    "ThreadDelivery",
    "name_tag",
    "persona_of",
    "spoken_by",
]

_log = get_logger("adapters.discord")
_NO_MENTIONS = discord.AllowedMentions.none()
T = TypeVar("T")


Path = Literal["webhook", "bot"]

THREAD_DELETED = "thread-deleted"
"""The end reason of a binding whose thread is gone (no farewell: nowhere to say it)."""


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    avatar_url: str | None = None


DEFAULT_PERSONA = Persona(name=DEFAULT_DISPLAY_NAME)
"""Who speaks when a binding names no persona: the agents' own default name."""


def persona_of(record: SessionBindingRecord) -> Persona:
    """The persona a binding was made with (name and avatar in its metadata)."""
    persona = record.meta.persona
    return Persona(name=persona.shown_name, avatar_url=persona.avatar_url)


def name_tag(persona: Persona) -> str:
    """How the bot names a persona before the words it posts for it."""
    return f"**{persona.name}**: "


def spoken_by(persona: Persona | None, content: str) -> str:
    """What the bot posts for ``persona``: its words after its name in bold.

    Without the webhook the message shows the bot as its author; the name keeps
    the speaker clear. Words that leave no room for the name go alone rather
    than cut: a streamed answer keeps room for it (:meth:`ThreadSink.limit`).
    """
    if persona is None or len(name_tag(persona)) + len(content) > MESSAGE_LIMIT:
        return content
    return name_tag(persona) + content


class _ThreadLost(Exception):
    """The thread cannot be written to any more; ``reason`` is the binding's end reason."""

    def __init__(self, reason: str, cause: BaseException | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


class ThreadDelivery:
    """Sends and edits persona (and bot) messages in bound threads for one account."""

    def __init__(
        self,
        manager: ThreadBindingManager,
        webhooks: WebhookPool,
        bindings: SessionBindingService,
    ) -> None:
        self.manager = manager
        self._webhooks = webhooks
        self.bindings = bindings
        self._ending: dict[str, asyncio.Future[Any]] = {}
        """Ends in flight, by binding id: a second caller waits for the first."""

    # -- persona messages ----------------------------------------------------------

    async def send(
        self, record: SessionBindingRecord, persona: Persona, content: str, *, signed: bool = False
    ) -> Posted:
        """Post ``content`` in the record's thread; raises DeliveryError if nothing got there.

        ``signed``: the content already names who speaks (an announcement's
        header), so the bot, if it posts instead of the webhook, adds no name;
        the text stays exactly what a restart looks for to avoid a second post.
        """
        return await self._reliably(
            record, "webhook", lambda: self._post(record, persona, content, signed=signed)
        )

    async def end_binding(self, record: SessionBindingRecord, reason: str) -> None:
        """End the binding of a thread that can no longer be written to (gone, locked).

        One way for every caller (a failed send, the gateway's thread deletion),
        so the reason, and with it the farewell or its absence, is always the same;
        and whoever comes second (a send failing while the deletion is being
        recorded) returns only once the binding has ended, never while it ends.
        """
        binding_id = record.binding_id
        ending = self._ending.get(binding_id)
        if ending is None:
            if self.bindings.get(binding_id) is None:
                return
            ending = asyncio.ensure_future(self.bindings.unbind(binding_id, reason=reason))
            self._ending[binding_id] = ending
            ending.add_done_callback(lambda _: self._ending.pop(binding_id, None))
        await asyncio.shield(ending)

    async def edit(
        self, record: SessionBindingRecord, sent: Posted, persona: Persona, content: str
    ) -> Posted:
        """Show ``content`` in ``sent``; returns where it shows now.

        That is ``sent`` itself, or a new message when ``sent`` can no longer be
        edited (deleted by someone, or made by a webhook that was deleted). The new
        message carries what the edit would have: a streaming edit's newest words, which
        its stream then counts as shown.
        """
        text = text_source(content)

        async def once() -> Posted:
            try:
                await self._edit_once(record, sent, persona, content)
                return sent
            except discord.NotFound as exc:
                if exc.code == UNKNOWN_WEBHOOK:
                    self._webhooks.forget(self._parent_id(record))
                elif exc.code != UNKNOWN_MESSAGE:
                    raise
                _log.info(
                    "delivery.reposted",
                    binding_id=record.binding_id,
                    message_id=sent.message_id,
                    code=exc.code,
                )
                return await self._post(record, persona, text())

        return await self._reliably(record, sent.path, once)

    # -- bot messages (status lines, notices) --------------------------------------

    async def bot_send(
        self,
        record: SessionBindingRecord,
        content: str,
        *,
        view: discord.ui.View | None = None,
        file: tuple[str, bytes] | None = None,
    ) -> str:
        """Post as the bot in the record's thread (with ``view``'s buttons, or ``file``
        attached: its name and bytes); returns its id."""
        sent = await self._reliably(
            record, "bot", lambda: self._bot_post(record, content, view=view, file=file)
        )
        return sent.message_id

    async def bot_edit(
        self,
        record: SessionBindingRecord,
        message_id: str,
        content: str,
        *,
        view: discord.ui.View | Any | None = discord.utils.MISSING,
    ) -> str:
        """Edit a bot message (posted again if it was deleted); returns where it shows.

        ``view=None`` takes its buttons away; left out, they stay as they are.
        """

        async def once() -> Posted:
            thread = await self._thread_of(record)
            try:
                await thread.get_partial_message(int(message_id)).edit(
                    content=content, allowed_mentions=_NO_MENTIONS, view=view
                )
            except discord.NotFound as exc:
                if exc.code != UNKNOWN_MESSAGE:
                    raise
                return await self._bot_post(record, content)
            return Posted(message_id, "bot")

        return (await self._reliably(record, "bot", once)).message_id

    async def pin(self, record: SessionBindingRecord, message_id: str) -> None:
        """Pin one of the bot's messages in the record's thread, where Discord lets it.

        Pinning takes Pin Messages, which a thread has from its parent channel (the
        creator of a thread gets no more), so the bot's rights are checked first, as
        Discord's clients do; without them, or when Discord refuses anyway, the message
        simply stays unpinned and one ``delivery.pin_skipped`` line says why. Never
        raises, never retried, never ends the binding: a pin is a courtesy.
        """
        try:
            thread = await self._thread_of(record)
            if not _may_pin(thread):
                reason = "the bot lacks the Pin Messages permission in this thread"
            else:
                await thread.get_partial_message(int(message_id)).pin()
                return
        except DISCORD_FAILURES as exc:
            reason = discord_said(exc)
        _log.info(
            "delivery.pin_skipped",
            binding_id=record.binding_id,
            message_id=message_id,
            reason=reason,
        )

    # -- one attempt of each -------------------------------------------------------

    async def _post(
        self, record: SessionBindingRecord, persona: Persona, content: str, *, signed: bool = False
    ) -> Posted:
        """Post under the persona, or as the bot when the webhook cannot be used."""
        parent = self._parent_id(record)
        speaker = None if signed else persona
        for attempt in (1, 2):
            try:
                hook = await self._hook(record)
            except WebhookUnavailable as exc:  # no webhook to be had (Manage Webhooks missing)
                if not exc.repeated:
                    self._failed(record, "webhook", exc, code=exc.code, taken_over=True)
                return await self._bot_post(record, content, speaker)
            try:
                message = await self._webhooks.pacer(hook).run(
                    partial(
                        hook.send,
                        content,
                        username=persona.name,
                        avatar_url=persona.avatar_url or discord.utils.MISSING,
                        thread=self._thread(record),
                        allowed_mentions=_NO_MENTIONS,
                        wait=True,
                    )
                )
                await self._remember_hook(record, hook)
                return Posted(str(message.id), "webhook")
            except discord.NotFound as exc:
                if exc.code != UNKNOWN_WEBHOOK or attempt == 2:
                    raise
                self._webhooks.forget(parent, hook.id)  # deleted under us: another, once
            except discord.Forbidden as exc:  # the webhook refuses: the bot speaks instead
                self._failed(record, "webhook", exc, code=exc.code, taken_over=True)
                return await self._bot_post(record, content, speaker)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _edit_once(
        self, record: SessionBindingRecord, sent: Posted, persona: Persona, content: str
    ) -> None:
        if sent.path == "webhook":
            hook = await self._hook(record)  # the one that posted the thread's messages
            text = text_source(content)  # a streaming edit that waits sends the newest words
            await self._webhooks.pacer(hook).run(
                lambda: hook.edit_message(
                    int(sent.message_id),
                    content=text(),
                    allowed_mentions=_NO_MENTIONS,
                    thread=self._thread(record),
                ),
                key=f"edit {sent.message_id}",
            )
        else:  # the bot posted it for the persona: it keeps the persona's name
            thread = await self._thread_of(record)
            await thread.get_partial_message(int(sent.message_id)).edit(
                content=spoken_by(persona, content), allowed_mentions=_NO_MENTIONS
            )

    async def _hook(self, record: SessionBindingRecord) -> discord.Webhook:
        """The webhook the record's thread speaks through (its own, once it has one)."""
        current = self.bindings.get(record.binding_id) or record
        return await self._webhooks.get(
            self._parent_id(record),
            record.conversation.conversation_id,
            current.meta.webhook_id,
        )

    async def _remember_hook(self, record: SessionBindingRecord, hook: discord.Webhook) -> None:
        """Record the thread's webhook in its binding: after a restart its messages are
        edited through the webhook that posted them (a failure costs only a repost)."""
        current = self.bindings.active(record.binding_id)
        if current is None or current.meta.webhook_id == str(hook.id):
            return
        try:
            await self.bindings.update_metadata(
                record.binding_id, BindingMetadata(webhook_id=str(hook.id))
            )
        except Exception:
            _log.warning("delivery.webhook_not_recorded", binding_id=record.binding_id)

    async def _bot_post(
        self,
        record: SessionBindingRecord,
        content: str,
        persona: Persona | None = None,
        *,
        view: discord.ui.View | None = None,
        file: tuple[str, bytes] | None = None,
    ) -> Posted:
        """Post as the bot; a persona's words are prefixed with its name, so readers know."""
        thread = await self._thread_of(record)
        # A File is read once: each attempt gets its own.
        attached = discord.File(io.BytesIO(file[1]), filename=file[0]) if file else None
        message = await thread.send(
            spoken_by(persona, content),
            allowed_mentions=_NO_MENTIONS,
            view=view or discord.utils.MISSING,
            file=attached or discord.utils.MISSING,
        )
        return Posted(str(message.id), "bot")

    # -- retry, repair, give up ----------------------------------------------------

    async def _reliably(
        self,
        record: SessionBindingRecord,
        path: Path,
        call: Callable[[], Awaitable[Posted]],
    ) -> Posted:
        """Run ``call`` with retries and repairs; DeliveryError once nothing more helps."""
        try:
            sent = await retrying(lambda: self._reopening(record, call), clock=self.bindings.clock)
        except _ThreadLost as lost:
            self._failed(record, path, lost.cause or lost, code=code_of(lost.cause))
            await self.end_binding(record, lost.reason)
            raise DeliveryError(
                f"thread {record.conversation.conversation_id} is "
                f"{_LOST.get(lost.reason, lost.reason.replace('-', ' '))}; its binding has ended",
                path=path,
                code=code_of(lost.cause),
            ) from lost.cause
        except DISCORD_FAILURES as exc:
            self._failed(record, path, exc, code=code_of(exc))
            raise DeliveryError(
                f"could not post in thread {record.conversation.conversation_id}: "
                f"{_describe(exc)}; the binding is kept",
                path=path,
                code=code_of(exc),
            ) from exc
        except RuntimeError as exc:  # aiohttp's "Session is closed", and the like
            if not self.manager.client.is_closed():
                raise
            self._failed(record, path, exc, code=None)
            raise DeliveryError(
                f"could not post in thread {record.conversation.conversation_id}: the bot's "
                "connection to Discord is closed; what is owed is finished at the next start",
                path=path,
            ) from exc
        self.bindings.touch(record.binding_id)
        return sent

    async def _reopening(self, record: SessionBindingRecord, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, reopening an archived thread once; a lost thread raises _ThreadLost."""
        try:
            return await call()
        except discord.HTTPException as exc:
            _raise_if_lost(exc)
            if exc.code != THREAD_ARCHIVED:
                raise
            archived = exc
        await self._reopen(record, archived)
        try:
            return await call()
        except discord.HTTPException as exc:
            _raise_if_lost(exc)
            if exc.code == THREAD_ARCHIVED:  # archived again at once: locked after all
                raise _ThreadLost("thread-archived", exc) from exc
            raise

    async def _reopen(self, record: SessionBindingRecord, archived: discord.HTTPException) -> None:
        """Unarchive the thread, unless it is locked (then the binding must end)."""
        thread_id = snowflake(record.conversation.conversation_id)
        try:
            thread = await self.manager.client.fetch_channel(thread_id)
            if not isinstance(thread, discord.Thread) or thread.locked:
                raise _ThreadLost("thread-archived", archived)
            await thread.edit(archived=False)
        except discord.HTTPException as exc:
            _raise_if_lost(exc)
            raise _ThreadLost("thread-archived", exc) from exc
        _log.info("delivery.thread_reopened", binding_id=record.binding_id)

    def _failed(
        self,
        record: SessionBindingRecord,
        path: Path,
        exc: BaseException,
        *,
        code: int | None,
        taken_over: bool = False,
    ) -> None:
        """One ``delivery.failed``: given up, or (``taken_over``) the bot path took over."""
        log_events.emit(
            log_events.DeliveryFailed(
                completion_id=None,
                path=path,
                destination=record.conversation.conversation_id,
                binding_id=record.binding_id,
                guild=record.scope,
                error=_describe(exc),
                code=code,
                retryable=taken_over,
                account=record.conversation.account_id,
            )
        )

    async def _thread_of(self, record: SessionBindingRecord) -> Any:
        return await self.manager.fetch_channel(snowflake(record.conversation.conversation_id))

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


_LOST: Final = {THREAD_DELETED: "gone", "thread-archived": "locked"}
"""How a DeliveryError names a lost thread, by the binding's end reason."""


def _may_pin(channel: Any) -> bool:
    """Whether the bot may pin in ``channel``; True when its cache cannot tell (Discord will)."""
    me = getattr(getattr(channel, "guild", None), "me", None)
    if me is None:
        return True
    try:
        return bool(channel.permissions_for(me).pin_messages)
    except (discord.ClientException, AttributeError):  # the parent channel is not cached
        return True


def _raise_if_lost(exc: discord.HTTPException) -> None:
    """Raise _ThreadLost when a Discord error means the binding must end."""
    if exc.code == UNKNOWN_CHANNEL:
        raise _ThreadLost(THREAD_DELETED, exc) from exc
    if exc.code in (MISSING_ACCESS, MISSING_PERMISSIONS):
        raise _ThreadLost("missing-permissions", exc) from exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, _ThreadLost):
        return f"the thread cannot be written to ({exc.reason})"
    return discord_said(exc)
