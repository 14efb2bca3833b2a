"""Fitting model output into a chat platform's messages, whichever platform.

A platform refuses a message over its limit (Discord 2,000 characters, a Matrix
event 65,536 bytes), so long output is split where a reader would: at a blank
line, else a line end, else a space, and a hard cut only when a single word is
longer than a message. A code block cut in two is closed at the end of one part
and reopened (same language) at the start of the next, so neither part renders
as broken markdown.

Every cut falls between two extended grapheme clusters (what a reader sees as
one character): a cut inside 👨‍👩‍👧‍👦, 🇫🇷, 👍🏽, 1️⃣ or a letter with its accents
would leave mangled halves at the end of one message and the start of the
next. Lengths are counted in code points (Python's ``len``), as Discord counts
them; an adapter whose platform counts bytes picks a limit that fits. Only a
single cluster longer than a whole message is cut inside.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from itertools import accumulate

import regex

__all__ = ["split_message"]

_FENCE = re.compile(r"^```(\S*)\s*$", re.MULTILINE)
_GRAPHEME = regex.compile(r"\X")


def split_message(text: str, limit: int) -> list[str]:
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
    """Where to end a part of at most ``limit`` characters: after the last separator in
    its second half, else at the last cluster boundary, on a cluster boundary either way."""
    ends = _cluster_ends(text, limit)
    for separator in ("\n\n", "\n", " "):
        at = text.rfind(separator, 0, limit)
        while at > limit // 2:
            cut = at + len(separator)
            if _is_end(ends, cut):
                return cut
            at = text.rfind(separator, 0, cut - 1)  # a space that carries a mark: earlier
    return ends[-1] if ends else limit  # else one cluster outgrows a message


def _cluster_ends(text: str, limit: int) -> list[int]:
    """The offsets in ``(0, limit]`` where a grapheme cluster of ``text`` ends, ascending.

    Whether a cluster ends at an offset depends on what precedes it and on the one
    character after it, so the text past ``limit + 1`` is never looked at.
    """
    ends = list(accumulate(map(len, _GRAPHEME.findall(text, 0, limit + 1))))
    return ends[: bisect_right(ends, limit)]


def _is_end(ends: list[int], offset: int) -> bool:
    at = bisect_left(ends, offset)
    return at < len(ends) and ends[at] == offset


def _open_fence_language(text: str) -> str | None:
    """The language of a code block still open at the end of ``text``, if any."""
    language: str | None = None
    for match in _FENCE.finditer(text):
        language = None if language is not None else match.group(1)
    return language
