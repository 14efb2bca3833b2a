"""Discord objects become channel-agnostic references here, and only here.

The most common upstream failure was a prefixed id (``channel:123``) sent to
Discord's API. Every id that enters or leaves the adapter passes through
:func:`snowflake`, which strips such prefixes and refuses anything that is
not a Discord snowflake, naming what it got.
"""

from __future__ import annotations

import re

import discord

from core.bindings.records import ConversationRef
from core.errors import BindingError

__all__ = ["CHANNEL", "conversation_for", "conversation_of", "snowflake"]

CHANNEL = "discord"
_PREFIXED = re.compile(r"^(?:discord:)?(?:channel|thread|user|guild|webhook)?:?(\d{15,21})$")


def snowflake(value: str | int, /) -> int:
    """The numeric id in ``value`` (``123``, ``"123"``, ``"channel:123"``, ``"<#123>"``)."""
    text = str(value).strip()
    if text.startswith("<#") and text.endswith(">"):
        text = text[2:-1]
    match = _PREFIXED.match(text)
    if match is None:
        raise BindingError(f"{value!r} is not a Discord id (expected a snowflake like 1234…)")
    return int(match.group(1))


def conversation_for(
    account_id: str, channel_id: str | int, parent_id: str | int | None = None
) -> ConversationRef:
    """The reference of a Discord channel or thread (``parent_id`` for threads)."""
    return ConversationRef(
        channel=CHANNEL,
        account_id=account_id,
        conversation_id=str(snowflake(channel_id)),
        parent_conversation_id=str(snowflake(parent_id)) if parent_id is not None else None,
    )


def conversation_of(account_id: str, channel: discord.abc.Snowflake) -> ConversationRef:
    """The reference of a discord.py channel: a thread's carries its parent channel."""
    if isinstance(channel, discord.Thread):
        return conversation_for(account_id, channel.id, channel.parent_id)
    return conversation_for(account_id, channel.id)
