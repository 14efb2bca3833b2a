"""Messages in bound threads, into the inbox; and what the inbox tells their authors.

A gateway ``MESSAGE_CREATE`` in a bound thread is recorded in the inbox
(:mod:`core.inbox`) before anything else happens to it, then handed to its
session. Nothing raises out of here with a person's words in it: a message
that cannot even be recorded gets a ⚠️ and a reply asking for it again.

What became of a message shows on it:

- a reaction for how it was delivered: ▶️ started a turn, 🧭 steers the
  running one, 📥 queued as a follow-up (or queued for the bot process that
  runs its session now);
- ⚠️ and one reply when handing it over failed: it stays queued;
- one reply listing the files that did not reach the model, and why.

Every message seen in a bound thread, the bot's and its webhooks' included,
moves the thread's read cursor, so a restart reads back only what is newer.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Final

import aiohttp
import discord

from adapters.discord.delivery import persona_of
from adapters.discord.ids import CHANNEL, conversation_of
from adapters.discord.pacing import Lane, lane
from core.bindings.records import ConversationRef
from core.bindings.service import SessionBindingService
from core.inbox import FileRef, FileUnavailable, Inbox, InboxMessage, Outcome, Source
from core.inbox.shown import FAILED_MARK, MODE_MARKS, mark_of, not_saved_text, replies_of
from core.logging import get_logger

__all__ = [
    "FAILED_MARK",
    "MODE_MARKS",
    "DiscordInbox",
    "from_a_person",
    "inbox_message",
]

_log = get_logger("adapters.discord.inbox")
_NO_MENTIONS: Final = discord.AllowedMentions.none()

_SAID: Final = frozenset({discord.MessageType.default, discord.MessageType.reply})
"""What a person writes; the rest are Discord's system lines ("pinned a message", a
member joined the thread), authored by whoever caused them, with no words of theirs."""


def from_a_person(client: discord.Client, message: discord.Message, *, allow_bots: bool) -> bool:
    """The bot's own messages, webhook posts, Discord's system lines and (unless allowed)
    other bots are not input."""
    if message.type not in _SAID:
        return False
    if client.user is not None and message.author.id == client.user.id:
        return False
    if message.webhook_id is not None:
        return False
    return not message.author.bot or allow_bots


def inbox_message(
    account_id: str, message: discord.Message, *, source: Source = "live"
) -> InboxMessage:
    """A Discord message as the inbox keeps it: its files as references, not yet read."""
    return InboxMessage(
        conversation=conversation_of(account_id, message.channel),
        item_id=str(message.id),
        seq=message.id,
        text=message.content,
        author_id=str(message.author.id),
        author_name=message.author.display_name,
        files=tuple(
            FileRef(a.filename, a.url, a.size, a.content_type) for a in message.attachments
        ),
        source=source,
    )


class DiscordInbox:
    """One account's side of the inbox: the gateway's messages in, the outcomes shown."""

    channel = CHANNEL

    def __init__(
        self,
        account_id: str,
        client: discord.Client,
        inbox: Inbox,
        bindings: SessionBindingService,
        *,
        allow_bots: bool = False,
        in_background: Callable[[Coroutine[Any, Any, Any]], object] | None = None,
    ) -> None:
        self.account_id = account_id
        self._in_background = in_background
        self._client = client
        self._inbox = inbox
        self._bindings = bindings
        self._allow_bots = allow_bots

    # -- in ------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> bool:
        """A gateway message: a person's in a bound thread goes to its session, via the inbox.

        Returns whether the conversation is bound (the message was the inbox's to take,
        whoever wrote it); anything else is for the caller to look at (a mention).
        """
        conversation = conversation_of(self.account_id, message.channel)
        if self._bindings.active_for_conversation(conversation) is None:
            return False  # not a bound conversation: not the inbox's to answer
        self._inbox.seen(conversation, message.id)
        if not from_a_person(self._client, message, allow_bots=self._allow_bots):
            return True
        item = inbox_message(self.account_id, message)
        try:
            await self._inbox.receive(item)
        except Exception as exc:  # not even recorded: say so, visibly
            _log.error(
                "inbox.record_failed",
                conversation=conversation.describe(),
                item_id=item.item_id,
                exc_info=exc,
            )
            await self._mark(item, FAILED_MARK)
            await self._reply(item, not_saved_text(self._name(conversation)))
        return True

    def is_person(self, message: discord.Message) -> bool:
        return from_a_person(self._client, message, allow_bots=self._allow_bots)

    # -- the inbox's port ------------------------------------------------------------

    async def fetch_file(self, file: FileRef, /) -> bytes:
        """Download from Discord's CDN; every failure becomes a reason for the sender."""
        try:
            return await self._client.http.get_from_cdn(file.url)
        except discord.HTTPException as exc:
            answered = f"Discord's file server answered {exc.status}"
            raise FileUnavailable(file.name, answered) from exc
        except aiohttp.ClientConnectorError as exc:
            raise FileUnavailable(
                file.name, f"Discord's file server at {exc.host} could not be reached"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise FileUnavailable(
                file.name, f"the download broke off ({type(exc).__name__})"
            ) from exc

    async def acknowledge(self, message: InboxMessage, outcome: Outcome, /) -> None:
        """Show on the message what became of it (a command answers for itself, and a
        scheduled run's turn has no message of a person's to mark).

        The reactions and replies go out in the background (the account's drain
        waits for them): the next message of the conversation is not held back
        by a round trip to Discord.
        """
        if message.source in ("command", "schedule"):  # nothing written to react to
            return
        work = self._show(message, outcome)
        if self._in_background is None:
            await work
        else:
            self._in_background(work)

    async def _show(self, message: InboxMessage, outcome: Outcome) -> None:
        mark = mark_of(outcome)
        if mark is not None:
            await self._mark(message, mark)
        for text in replies_of(outcome, self._name(message.conversation)):
            await self._reply(message, text)

    # -- helpers -------------------------------------------------------------------

    def _name(self, conversation: ConversationRef) -> str:
        binding = self._bindings.resolve_by_conversation(conversation)
        return persona_of(binding).name if binding is not None else "the agent"

    def _partial(self, message: InboxMessage) -> discord.PartialMessage:
        channel = self._client.get_partial_messageable(
            int(message.conversation.conversation_id), type=discord.ChannelType.public_thread
        )
        return channel.get_partial_message(int(message.item_id))

    async def _mark(self, message: InboxMessage, emoji: str) -> None:
        try:
            await self._partial(message).add_reaction(emoji)
        except (discord.HTTPException, RuntimeError):  # RuntimeError: the client closed
            _log.warning("bot.reaction_failed", item_id=message.item_id, emoji=emoji)

    async def _reply(self, message: InboxMessage, text: str) -> None:
        try:
            with lane(Lane.PEOPLE):  # an answer to a person goes before deliveries and edits
                await self._partial(message).reply(
                    text[:2000], allowed_mentions=_NO_MENTIONS, mention_author=False
                )
        except (discord.HTTPException, RuntimeError):
            _log.warning("inbox.reply_failed", item_id=message.item_id)
