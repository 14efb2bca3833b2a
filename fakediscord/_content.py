"""What Discord checks in a message body, and who a message mentions.

Limits matter to the bot: content over 2000 characters is a 400 (50035), which is why
long agent output must be split before sending; a message carries at most 10 files
(50035) of at most 10 MiB each (413, 40005: the upload limit of a server without
boosts). Mentions honour ``allowed_mentions``,
so a bot that sends model output with mentions disabled pings nobody.
"""

from __future__ import annotations

import re
from typing import Any

from fakediscord.errors import EMPTY_MESSAGE, INVALID_FORM_BODY, REQUEST_TOO_LARGE, DiscordError

__all__ = [
    "MAX_CONTENT",
    "MAX_EMBEDS",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "ROLE_MENTION",
    "USER_MENTION",
    "form_error",
    "mentioned",
    "parses",
    "validate",
    "validate_files",
]

Json = dict[str, Any]
MAX_CONTENT = 2000
MAX_EMBEDS = 10
MAX_FILES = 10
MAX_FILE_BYTES = 10 * 1024 * 1024
USER_MENTION = re.compile(r"<@!?(\d+)>")
ROLE_MENTION = re.compile(r"<@&(\d+)>")


def validate(body: Json, *, has_files: bool, allow_empty: bool) -> None:
    """Refuse what Discord refuses: too long, too many embeds, or nothing to show."""
    content = body.get("content")
    if content is not None and len(str(content)) > MAX_CONTENT:
        raise form_error("content", f"Must be {MAX_CONTENT} or fewer in length.")
    if len(body.get("embeds") or []) > MAX_EMBEDS:
        raise form_error("embeds", f"Must be {MAX_EMBEDS} or fewer in length.")
    if allow_empty or has_files or content or body.get("embeds") or body.get("components"):
        return
    raise DiscordError(400, EMPTY_MESSAGE)


def validate_files(sizes: list[int]) -> None:
    """Refuse more than :data:`MAX_FILES` files, or one over :data:`MAX_FILE_BYTES`."""
    if len(sizes) > MAX_FILES:
        raise form_error("attachments", f"Must be {MAX_FILES} or fewer in length.")
    if any(size > MAX_FILE_BYTES for size in sizes):
        raise DiscordError(413, REQUEST_TOO_LARGE)


def form_error(field: str, detail: str) -> DiscordError:
    return DiscordError(400, INVALID_FORM_BODY, f"Invalid Form Body ({field}: {detail})")


def parses(allowed: Json | None, kind: str) -> bool:
    """Whether ``allowed_mentions`` lets this kind ping (no ``allowed_mentions``: all do)."""
    return allowed is None or kind in (allowed.get("parse") or [])


def mentioned(pattern: re.Pattern[str], content: str, allowed: Json | None, kind: str) -> list[int]:
    """Ids mentioned in ``content`` that ``allowed_mentions`` lets ping, in order."""
    explicit = {int(i) for i in (allowed or {}).get(kind) or []}
    found: list[int] = []
    for match in pattern.finditer(content):
        ident = int(match.group(1))
        if ident not in found and (parses(allowed, kind) or ident in explicit):
            found.append(ident)
    return found
