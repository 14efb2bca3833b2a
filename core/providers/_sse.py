"""An incremental server-sent-events decoder: bytes in, ``data`` payloads out.

Hand-written rather than built on ``StreamReader.readline`` because aiohttp caps a
line at its buffer limit, and one chunk of a long tool-call argument can exceed it;
here a line may be any length. It follows the SSE rules the chat-completions
servers rely on: ``data:`` lines of one event are joined with ``\\n`` and the event
ends at a blank line; ``:`` comments (keep-alives, OpenRouter's "PROCESSING") and
``event:``/``id:``/``retry:`` fields are ignored; ``\\r\\n`` line endings are accepted.
Lines are split on bytes before decoding, so a UTF-8 character cut in two by the
network is never mangled.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SSEDecoder"]

_IGNORED_FIELDS: Final = frozenset({"event", "id", "retry"})
_EXCERPT: Final = 80


class SSEDecoder:
    """Feed it the body as it arrives; it returns each complete event's data.

    ``foreign_line`` keeps the first line that is not SSE at all (an HTML error page,
    a JSON document), so the caller can say what it got instead of a stream.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self.sse_lines = 0
        self.foreign_line: str | None = None

    def feed(self, chunk: bytes) -> list[str]:
        """Decode ``chunk``; return the data of every event it completed, in order."""
        self._buffer += chunk
        payloads: list[str] = []
        start = 0
        while (end := self._buffer.find(b"\n", start)) >= 0:
            self._line(bytes(self._buffer[start:end]), payloads)
            start = end + 1
        del self._buffer[:start]
        return payloads

    def close(self) -> list[str]:
        """The body ended: finish a last line without newline and a last undispatched event."""
        payloads: list[str] = []
        if self._buffer:
            self._line(bytes(self._buffer), payloads)
            self._buffer.clear()
        self._dispatch(payloads)
        return payloads

    def _line(self, raw: bytes, payloads: list[str]) -> None:
        line = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
        if not line:
            self._dispatch(payloads)
            return
        field, colon, value = line.partition(":")
        if not colon and field != "data":
            self._foreign(line)
            return
        if field == "data":
            self.sse_lines += 1
            self._data.append(value.removeprefix(" "))
        elif field == "" or field in _IGNORED_FIELDS:
            self.sse_lines += 1
        else:
            self._foreign(line)

    def _foreign(self, line: str) -> None:
        if self.foreign_line is None:
            self.foreign_line = line[:_EXCERPT]

    def _dispatch(self, payloads: list[str]) -> None:
        if self._data:
            payloads.append("\n".join(self._data))
            self._data.clear()
