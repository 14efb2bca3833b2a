"""Whether text says anything to a human: the test a spawn's task has to pass.

``str.strip()`` removes whitespace only. A task made of zero-width spaces,
joiners, word joiners or byte-order marks looks empty in Discord, yet it passed
that test and started a subagent on nothing, in a thread named after nothing.
"""

from __future__ import annotations

import unicodedata

__all__ = ["is_blank"]

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
"""Controls, format characters (U+200B…U+200D, U+2060, U+FEFF, …) and separators."""

_BLANK_LOOKING = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
"""Characters Unicode files as marks, letters or symbols that still render as nothing:
the combining grapheme joiner, the Hangul and Khmer fillers and the blank Braille cell."""


def is_blank(text: str) -> bool:
    """True when ``text`` shows a reader nothing: empty, or only invisible characters."""
    return all(
        char in _BLANK_LOOKING or unicodedata.category(char) in _INVISIBLE_CATEGORIES
        for char in text
    )
