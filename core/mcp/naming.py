"""What the model calls an MCP tool: ``<server>__<tool>``, within providers' name rules.

OpenAI-compatible providers accept tool names of 1 to 64 characters from
``[A-Za-z0-9_-]``. A server's name already fits (the config checks it); a
tool's name may not, so other characters become ``_`` and a name too long is
cut and made unique again with a short hash of the whole name.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["MAX_NAME_LENGTH", "SEPARATOR", "model_tool_name"]

SEPARATOR: Final = "__"
MAX_NAME_LENGTH: Final = 64
_NOT_ALLOWED: Final = re.compile(r"[^A-Za-z0-9_-]")


def model_tool_name(server: str, tool: str) -> str:
    """``model_tool_name("clock", "get_current_time")`` -> ``"clock__get_current_time"``."""
    name = _NOT_ALLOWED.sub("_", f"{server}{SEPARATOR}{tool}")
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(f"{server}{SEPARATOR}{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME_LENGTH - 9]}_{digest}"
