"""Fitting model output into Discord messages: 2,000 characters at most.

The splitting itself is the platforms' common rule (:func:`core.text.split_message`);
only Discord's limit is decided here.
"""

from __future__ import annotations

from core.text import split_message as _split

__all__ = ["MESSAGE_LIMIT", "split_message"]

MESSAGE_LIMIT = 2000
"""The longest message Discord accepts, in code points."""


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Parts of ``text``, each at most ``limit`` characters; ``[""]`` for empty text."""
    return _split(text, limit)
