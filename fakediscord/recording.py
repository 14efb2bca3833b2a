"""Every REST request the fake received, so tests assert on what the bot really sent.

A record keeps the Authorization header value as sent (which bot token, or none for
webhook-token routes) and, once answered, the status the fake replied with, including
injected faults, rate-limit 429s and 404s for routes the fake does not implement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fakediscord._signal import Signal

__all__ = ["RecordedFile", "RecordedRequest", "Recorder"]


@dataclass(slots=True)
class RecordedFile:
    """A file part of a multipart request (``files[n]``)."""

    field: str
    filename: str
    content_type: str | None
    data: bytes


@dataclass(slots=True)
class RecordedRequest:
    """One request: ``path`` is the API path without ``/api/v10`` (``/channels/1/messages``)."""

    method: str
    path: str
    query: dict[str, str]
    json: Any
    authorization: str | None
    at: datetime
    files: list[RecordedFile] = field(default_factory=list)
    status: int | None = None
    implemented: bool = True
    fault: bool = False
    rate_limited: str | None = None
    """Why the limiter refused it with a 429: its scope (``user``, ``global``, ``shared``)
    or ``cloudflare`` (the invalid-request ban); None when it was not refused."""

    @property
    def token(self) -> str | None:
        """The bot token of a ``Bot <token>`` Authorization header, else None."""
        value = self.authorization or ""
        return value[4:] if value.startswith("Bot ") else None

    def matches(self, method: str | None, path_prefix: str | None) -> bool:
        return (method is None or self.method == method.upper()) and (
            path_prefix is None or self.path.startswith(path_prefix)
        )


class Recorder:
    """The request log, with waiting that wakes on each new request or answer."""

    def __init__(self, signal: Signal, *, limit: int | None = None) -> None:
        self._signal = signal
        self.limit = limit
        """Keep only the newest ``limit`` requests (a long-running playground); None: all.

        Trimming shifts indexes, so ``wait_for(since=...)`` is only exact without a limit.
        """
        self.requests: list[RecordedRequest] = []

    def add(self, request: RecordedRequest) -> RecordedRequest:
        self.requests.append(request)
        if self.limit is not None and len(self.requests) > self.limit:
            del self.requests[: len(self.requests) - self.limit]
        self._signal.notify()
        return request

    def answered(self, request: RecordedRequest, status: int) -> None:
        request.status = status
        self._signal.notify()

    def matching(
        self, method: str | None = None, path_prefix: str | None = None
    ) -> list[RecordedRequest]:
        """Requests with this method (any if None) whose path starts with ``path_prefix``."""
        return [r for r in self.requests if r.matches(method, path_prefix)]

    async def wait_for(
        self,
        method: str | None,
        path_prefix: str | None,
        predicate: Callable[[RecordedRequest], bool] | None = None,
        *,
        since: int = 0,
        answered: bool = True,
    ) -> RecordedRequest:
        """The first request from index ``since`` on that matches (and was answered)."""

        def probe() -> RecordedRequest | None:
            for request in self.requests[since:]:
                if not request.matches(method, path_prefix):
                    continue
                if answered and request.status is None:
                    continue
                if predicate is None or predicate(request):
                    return request
            return None

        return await self._signal.wait_for(probe)
