"""A tool call's arguments or result at a glance: one short line, for any chat to show.

Arguments come from the model and results from a tool server: the glance is one
line without backticks, cut to a limit. What a chat's markup would still read in it
(markdown, HTML) is the adapter's to neutralise, so the words are the same everywhere.
"""

from __future__ import annotations

import json
from typing import Final

__all__ = ["ARGUMENTS_LIMIT", "RESULT_LIMIT", "VALUE_LIMIT", "flat", "glance"]

ARGUMENTS_LIMIT: Final = 80
RESULT_LIMIT: Final = 80
VALUE_LIMIT: Final = 32


def flat(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters, without backticks."""
    line = " ".join(text.split()).replace("`", "'")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def glance(text: str, limit: int) -> str:
    """JSON objects as ``key: value`` pairs, anything else flattened; one line."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = text
    if isinstance(parsed, dict):
        parts = []
        for key, value in parsed.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            parts.append(f"{flat(str(key), VALUE_LIMIT)}: {flat(shown, VALUE_LIMIT)}")
        line = ", ".join(parts)
    else:
        line = parsed if isinstance(parsed, str) else json.dumps(parsed, ensure_ascii=False)
    return flat(line, limit)
