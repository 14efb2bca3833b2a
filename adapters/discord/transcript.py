"""Finishing, in Discord, a persona message its thread is still owed.

The :class:`~core.transcript.TranscriptSink` of one account. A message is
recorded (its words and tool lines, the parts' message ids) before its final
text is posted; when a process died before Discord showed it, or Discord kept
refusing the final edit, this compares each part with what the thread shows
and changes only what differs: an edit of a part that shows less, and for a
part no recorded message holds, first a look through the thread for the
message a dead process may have posted (ours, after the last known part,
showing the part or the start of it), then a new post. Run twice, it changes
nothing the second time: exactly once, whoever finishes it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

import discord

from adapters.discord.delivery import Persona, ThreadDelivery, persona_of, spoken_by
from adapters.discord.errors import discord_said
from adapters.discord.ids import snowflake
from adapters.discord.retry import DEFAULT_POLICY
from adapters.discord.text import MESSAGE_LIMIT, split_message
from adapters.discord.tool_lines import TranscriptDoc
from core.bindings.records import SessionBindingRecord
from core.errors import DeliveryError
from core.logging import get_logger
from core.subagents.delivery import Posted
from core.transcript import SentPart, ThreadMessage

__all__ = ["DiscordTranscriptSink", "parts_of"]

_log = get_logger("adapters.discord")

HISTORY_LIMIT: Final = 50
"""Messages looked through for a part a dead process may have posted."""
LOOKBACK: Final = timedelta(seconds=DEFAULT_POLICY.deadline)
"""How long before a message's record its first part may have been posted: a post is
retried for at most that long."""


def parts_of(message: ThreadMessage) -> list[str]:
    """The message's text split as its stream split it."""
    text = TranscriptDoc.from_content(message.content).render()
    limit = message.content.get("limit")
    return [p for p in split_message(text, limit if isinstance(limit, int) else MESSAGE_LIMIT) if p]


class DiscordTranscriptSink:
    """Makes a bound thread show a recorded persona message, changing only what differs."""

    channel = "discord"

    def __init__(self, delivery: ThreadDelivery) -> None:
        self._delivery = delivery

    @property
    def account_id(self) -> str:
        return self._delivery.manager.account_id

    async def settle(
        self, binding: SessionBindingRecord, message: ThreadMessage
    ) -> ThreadMessage | None:
        persona = persona_of(binding)
        try:
            thread = await self._delivery.manager.fetch_channel(
                binding.conversation.conversation_id
            )
        except discord.HTTPException as exc:
            raise DeliveryError(f"could not read the thread: {discord_said(exc)}") from exc
        sent = [Posted(p.message_id, "bot" if p.path == "bot" else "webhook") for p in message.sent]
        changed = 0
        for index, part in enumerate(parts_of(message)):
            if index < len(sent):
                posted = sent[index]
                if await self._shows(thread, posted, persona) != _wanted(posted, persona, part):
                    sent[index] = await self._delivery.edit(binding, posted, persona, part)
                    changed += 1
                continue
            found = await self._find(thread, persona, part, sent[-1] if sent else None, message)
            if found is None:
                posted = await self._delivery.send(binding, persona, part)
                changed += 1
            else:
                posted, shows = found
                if shows != _wanted(posted, persona, part):
                    posted = await self._delivery.edit(binding, posted, persona, part)
                    changed += 1
            sent.append(posted)
        if changed:
            _log.info(
                "transcript.finished",
                binding_id=binding.binding_id,
                key=message.key,
                changed=changed,
            )
        return message.showing(tuple(SentPart(p.message_id, p.path) for p in sent))

    async def _shows(self, thread: Any, posted: Posted, persona: Persona) -> str | None:
        """What the message shows now; None when it is gone (an edit then posts it anew)."""
        try:
            found = await thread.fetch_message(int(posted.message_id))
        except discord.NotFound:
            return None
        except discord.HTTPException as exc:
            raise DeliveryError(f"could not read a message: {discord_said(exc)}") from exc
        return str(found.content)

    async def _find(
        self,
        thread: Any,
        persona: Persona,
        part: str,
        after: Posted | None,
        message: ThreadMessage,
    ) -> tuple[Posted, str] | None:
        """Ours, under this persona, after the last known part (or, with none known, since
        the first could have been posted), showing ``part`` or the start of it: a post a
        dead process made without recording its id. With what it shows."""
        me = self._delivery.manager.client.user
        since: Any = (
            discord.Object(snowflake(after.message_id))
            if after is not None
            else (message.updated_at - LOOKBACK if message.updated_at else None)
        )
        try:
            async for candidate in thread.history(limit=HISTORY_LIMIT, after=since):
                ours = (
                    candidate.webhook_id is not None and candidate.author.name == persona.name
                ) or (me is not None and candidate.author == me)
                if not ours or not candidate.content:
                    continue
                posted = Posted(str(candidate.id), "webhook" if candidate.webhook_id else "bot")
                if _wanted(posted, persona, part).startswith(candidate.content):
                    return posted, str(candidate.content)
        except discord.HTTPException as exc:
            raise DeliveryError(f"could not read the thread: {discord_said(exc)}") from exc
        return None


def _wanted(posted: Posted, persona: Persona, part: str) -> str:
    """What a message sent that way shows for ``part`` (the bot names the persona)."""
    return part if posted.path == "webhook" else spoken_by(persona, part)
