"""Files attached to a message in a bound thread: checked, read, kept, or refused with a reply.

The rules (types, sizes, what the log keeps) are :mod:`core.attachments`; here
the Discord side: the size and type Discord announces are checked before a
file is downloaded, so an oversized or unsupported one costs nothing, and one
reply in the thread lists whatever did not reach the model, and why. The rest
of the message goes through either way.
"""

from __future__ import annotations

from typing import Final

import discord

from bot.wiring import Services
from core.attachments import (
    IMAGE_MAX_BYTES,
    NO_VISION,
    UNSUPPORTED,
    AttachmentRecord,
    Incoming,
    Refused,
    accept,
    kind_of,
    refusal_text,
)
from core.logging import get_logger

__all__ = ["read_attachments", "tell_refused"]

_log = get_logger("bot.attachments")
_NO_MENTIONS: Final = discord.AllowedMentions.none()


async def read_attachments(
    message: discord.Message, services: Services, *, vision: bool
) -> tuple[list[AttachmentRecord], list[Refused]]:
    """The message's files that may reach the model, and the ones refused."""
    text_max = services.config.agent.attachment_text_max_bytes
    accepted: list[AttachmentRecord] = []
    refused: list[Refused] = []
    for attachment in message.attachments:
        name = attachment.filename
        early = _refused_unread(name, attachment.content_type, attachment.size, text_max, vision)
        if early is not None:
            refused.append(early)
            continue
        try:
            data = await attachment.read()
        except discord.HTTPException as exc:
            _log.warning("attachment.download_failed", filename=name, error=str(exc))
            refused.append(Refused(name, "it could not be downloaded from Discord"))
            continue
        result = accept(
            Incoming(name, attachment.content_type, data),
            text_max_bytes=text_max,
            vision=vision,
            store=services.attachments,
        )
        if isinstance(result, Refused):
            refused.append(result)
        else:
            accepted.append(result)
    return accepted, refused


def _refused_unread(
    name: str, content_type: str | None, size: int, text_max: int, vision: bool
) -> Refused | None:
    """A refusal decided from what Discord announces, so the file is not downloaded."""
    kind = kind_of(name, content_type)
    if kind is None:
        return Refused(name, UNSUPPORTED)
    if kind == "image" and not vision:
        return Refused(name, NO_VISION)
    limit = IMAGE_MAX_BYTES if kind == "image" else text_max
    if size > limit:
        what = "images" if kind == "image" else "text files"
        return Refused(name, f"{what} may be {limit:,} bytes at most")
    return None


async def tell_refused(message: discord.Message, refused: list[Refused]) -> None:
    """One reply under the message listing what did not reach the model."""
    try:
        await message.reply(
            refusal_text(refused)[:2000], allowed_mentions=_NO_MENTIONS, mention_author=False
        )
    except discord.HTTPException as exc:
        _log.warning("attachment.reply_failed", error=str(exc))
