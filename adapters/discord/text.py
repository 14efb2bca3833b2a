"""Fitting model output into Discord messages.

Discord refuses a message over 2,000 characters, so long output is split
where a reader would: at a blank line, else a line end, else a space, and a
hard cut only when a single word is longer than a message. A code block cut
in two is closed at the end of one part and reopened (same language) at the
start of the next, so neither part renders as broken markdown.
"""

from __future__ import annotations

import re

__all__ = ["MESSAGE_LIMIT", "split_message"]

MESSAGE_LIMIT = 2000
_FENCE = re.compile(r"^```(\S*)\s*$", re.MULTILINE)


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Parts of ``text``, each at most ``limit`` characters; ``[""]`` for empty text."""
    if limit < 20:
        raise ValueError("limit must leave room for code fences")
    parts: list[str] = []
    rest = text
    reopen = ""
    while True:
        rest = reopen + rest
        if len(rest) <= limit:
            parts.append(rest)
            return parts
        # Leave room to close a fence left open by the cut.
        cut = _cut_point(rest, limit - 4)
        head, rest = rest[:cut].rstrip("\n"), rest[cut:].lstrip("\n")
        language = _open_fence_language(head)
        if language is not None:
            head += "\n```"
            reopen = f"```{language}\n"
        else:
            reopen = ""
        parts.append(head)


def _cut_point(text: str, limit: int) -> int:
    window = text[:limit]
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at > limit // 2:
            return at + len(separator)
    return limit


def _open_fence_language(text: str) -> str | None:
    """The language of a code block still open at the end of ``text``, if any."""
    language: str | None = None
    for match in _FENCE.finditer(text):
        language = None if language is not None else match.group(1)
    return language
