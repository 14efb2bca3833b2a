"""Seeing the 429s Discord answers despite the pacing: one log line per incident.

discord.py waits a 429 out and sends the request again by itself, so the bot
would never know; an aiohttp trace on the client's session (which its webhooks
share) sees every answer. The first 429 of an incident is logged with its scope
(``discord.rate_limited``, which the canary report counts by scope); more 429s
on the same scope and bucket before its ``retry_after`` has passed are that
same incident.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import aiohttp

from core import log_events

__all__ = ["RateLimitWatch", "route_of"]

_IDS = re.compile(r"/\d{15,21}")
_WEBHOOK_TOKEN = re.compile(r"(/webhooks/\{id\})/[^/?]+")


def route_of(path: str) -> str:
    """The route without its ids and tokens (``/channels/{id}/messages``): no secret and
    no id reaches the log."""
    route = _IDS.sub("/{id}", path.split("?", 1)[0])
    route = route.split("/api/v10", 1)[-1]
    return _WEBHOOK_TOKEN.sub(r"\1/{token}", route)


class RateLimitWatch:
    """An aiohttp trace that logs each 429 incident once (give :attr:`trace` to the
    client as ``http_trace``)."""

    def __init__(self, account_id: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.account_id = account_id
        self._clock = clock
        self._until: dict[tuple[str, str], float] = {}
        self.incidents = 0
        self.limited = 0
        """429 answers seen in all (an incident may have several)."""
        self.trace = aiohttp.TraceConfig()
        self.trace.on_request_end.append(self._ended)

    async def _ended(
        self, _session: aiohttp.ClientSession, _context: SimpleNamespace, params: Any
    ) -> None:
        response = params.response
        if response.status != 429:
            return
        headers = response.headers
        self.limited += 1
        scope = headers.get("X-RateLimit-Scope") or (
            "global" if headers.get("X-RateLimit-Global") else "user"
        )
        bucket = headers.get("X-RateLimit-Bucket")
        retry_after = _seconds(headers.get("Retry-After"))
        key = (scope, bucket or route_of(params.url.path))
        now = self._clock()
        if self._until.get(key, 0.0) > now:
            return  # the same incident
        self._until[key] = now + (retry_after or 1.0)
        self.incidents += 1
        log_events.emit(
            log_events.DiscordRateLimited(
                scope=scope,
                method=params.method,
                route=route_of(params.url.path),
                bucket=bucket,
                retry_after=retry_after,
                account=self.account_id,
            )
        )


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
