"""How a tool call reads in a thread: one compact line, and the streamed message it lives in.

A line names the tool, its arguments shortened to a glance, how the call
went and, once it ran, its result shortened the same way:
``-# 🔧 clock__get_current_time · timezone: Europe/Paris · ✅ ok → datetime: …``.
The lines sit in the persona's streamed message between its words, so a turn
with ten calls is still one message edited a few times, within Discord's
edit limits (:class:`~adapters.discord.streaming.StreamingMessage` coalesces).
Arguments come from the model and results from a tool server: backticks,
newlines and markdown that could break out of the line are neutralised;
mentions never ping (the client allows none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

import discord

from core.tool_glance import ARGUMENTS_LIMIT, RESULT_LIMIT, flat, glance

__all__ = [
    "FINAL_STATUSES",
    "ToolLine",
    "ToolStatus",
    "TranscriptDoc",
    "short_arguments",
    "short_result",
]

ToolStatus = Literal[
    "running",
    "waiting",
    "ok",
    "error",
    "denied",
    "withdrawn",
    "cancelled",
    "rejected",
    "interrupted",
]

_STATUS: Final[dict[str, str]] = {
    "running": "…",
    "waiting": "⏸️ waiting for approval",
    "ok": "✅ ok",
    "error": "⚠️ error",
    "denied": "⛔ denied",
    "withdrawn": "↩️ withdrawn",
    "cancelled": "⏹️ cancelled",
    "rejected": "⛔ rejected",
    "interrupted": "⏹️ cut off by a bot restart",
}
FINAL_STATUSES: Final = frozenset(
    {"ok", "error", "denied", "withdrawn", "cancelled", "rejected", "interrupted"}
)
"""How a call can end; a line in one of these is not changed again by a later event."""


def short_arguments(arguments: str) -> str:
    """``{"timezone": "Europe/Paris"}`` -> ``timezone: Europe/Paris``, cut to a glance."""
    return discord.utils.escape_markdown(glance(arguments or "{}", ARGUMENTS_LIMIT))


def short_result(content: str) -> str:
    """A tool's result as the line shows it: JSON read like arguments, text on one line,
    cut to :data:`RESULT_LIMIT` characters (the model gets all of it)."""
    return discord.utils.escape_markdown(glance(content, RESULT_LIMIT))


@dataclass(slots=True)
class ToolLine:
    """One call's line; ``result`` is what the tool answered (shown shortened), if it ran.
    ``ended``: how it ended in words naming who, in place of the status's own
    (``cancelled by @alice``, ``rejected by @alice: Reject``)."""

    call_id: str
    name: str
    arguments: str
    status: ToolStatus = "running"
    result: str | None = None
    ended: str | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def render(self) -> str:
        args = short_arguments(self.arguments)
        name = self.name.replace("`", "'")
        shown = f"-# 🔧 `{name}`" + (f" · {args}" if args else "")
        result = short_result(self.result) if self.result else ""
        status = _STATUS[self.status]
        if self.ended:
            mark = status.split(" ", 1)[0]
            status = f"{mark} {discord.utils.escape_markdown(flat(self.ended, RESULT_LIMIT))}"
        return f"{shown} · {status}" + (f" → {result}" if result else "")


class TranscriptDoc:
    """The text of one streamed persona message: the model's words and tool lines, in order."""

    def __init__(self) -> None:
        self._parts: list[str | ToolLine] = []
        self._lines: dict[str, ToolLine] = {}

    def add_text(self, text: str) -> None:
        if self._parts and isinstance(self._parts[-1], str):
            self._parts[-1] += text
        else:
            self._parts.append(text)

    def add_line(self, line: ToolLine) -> None:
        self._parts.append(line)
        self._lines[line.call_id] = line

    def cut_off(self, mark: str) -> bool:
        """End the words being said with ``mark``, on a line of its own, where they were
        cut off; False, and nothing added, when the message does not end in words (a
        tool line then says how its call ended)."""
        if not self._parts or not isinstance(self._parts[-1], str):
            return False
        words = self._parts[-1]
        if not words.strip():
            return False
        self._parts[-1] = words + ("" if words.endswith("\n") else "\n") + mark
        return True

    def line(self, call_id: str) -> ToolLine | None:
        return self._lines.get(call_id)

    @property
    def open_calls(self) -> tuple[str, ...]:
        """The calls whose line may still change (running, or waiting for approval)."""
        return tuple(call_id for call_id, line in self._lines.items() if not line.final)

    def to_content(self) -> dict[str, Any]:
        """The doc as plain JSON, to render it again after a restart."""
        parts: list[Any] = []
        for part in self._parts:
            if isinstance(part, ToolLine):
                parts.append(
                    {
                        "call_id": part.call_id,
                        "name": part.name,
                        "arguments": part.arguments,
                        "status": part.status,
                        "result": part.result,
                        "ended": part.ended,
                    }
                )
            else:
                parts.append(part)
        return {"parts": parts}

    @classmethod
    def from_content(cls, content: Mapping[str, Any]) -> TranscriptDoc:
        """The doc :meth:`to_content` described (an unknown status reads as an ended call)."""
        doc = cls()
        for part in content.get("parts") or ():
            if isinstance(part, str):
                doc.add_text(part)
                continue
            status = part.get("status")
            doc.add_line(
                ToolLine(
                    str(part["call_id"]),
                    str(part.get("name") or ""),
                    str(part.get("arguments") or ""),
                    cast(ToolStatus, status) if status in _STATUS else "error",
                    part.get("result"),
                    part.get("ended"),
                )
            )
        return doc

    def render(self) -> str:
        """Words exactly as streamed; each tool line on a line of its own."""
        out = ""
        after_line = False
        for part in self._parts:
            if isinstance(part, ToolLine):
                if out and not out.endswith("\n"):
                    out += "\n"
                out += part.render()
                after_line = True
            else:
                out += ("\n" + part.lstrip("\n")) if after_line else part
                after_line = False
        return out
