"""Injected failures and held routes, so tests exercise discord.py's retry paths.

A fault answers the next matching request(s) in place of the route. A 429 comes in the
two shapes discord.py tells apart (``http.py``): with ``Via: 1.1 google`` and a JSON
``retry_after`` it is Discord's rate limit, which discord.py sleeps out and retries;
without ``Via`` it is a Cloudflare ban (a plain-text page), which discord.py raises as
``HTTPException`` at once. A gate holds matching requests until the test releases
them: a deterministic "slow response" without any sleep.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from dataclasses import dataclass
from fnmatch import fnmatchcase

from aiohttp import web

from fakediscord._signal import Signal
from fakediscord.errors import default_message

__all__ = ["Fault", "Faults", "Gate", "PathPattern"]

PathPattern = str | re.Pattern[str]
"""A glob over the API path (``/channels/*/messages``) or a regex that must fullmatch."""


def _matches(method: str, pattern: PathPattern, want_method: str, path: str) -> bool:
    if method not in ("*", want_method):
        return False
    if isinstance(pattern, re.Pattern):
        return pattern.fullmatch(path) is not None
    return fnmatchcase(path, pattern)


@dataclass(slots=True)
class Fault:
    """An error response for the next ``remaining`` matching requests."""

    method: str
    pattern: PathPattern
    status: int
    code: int | None
    remaining: int
    retry_after: float | None
    global_: bool
    via_header: bool
    message: str | None = None

    def response(self) -> web.Response:
        if self.status == 429:
            return self._rate_limited()
        code = self.code or 0
        body = {"message": self.message or default_message(self.status, code), "code": code}
        return _json(self.status, body)

    def _rate_limited(self) -> web.Response:
        retry_after = 0.001 if self.retry_after is None else self.retry_after
        headers = {"Retry-After": str(max(1, math.ceil(retry_after)))}
        if not self.via_header:
            # Cloudflare's ban page: no Via, no JSON. discord.py must not retry it.
            return web.Response(
                status=429, text="error code: 1015", content_type="text/plain", headers=headers
            )
        headers |= {
            "Via": "1.1 google",
            "X-RateLimit-Limit": "1",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Scope": "global" if self.global_ else "user",
        }
        if self.global_:
            headers["X-RateLimit-Global"] = "true"
        body = {
            "message": self.message or "You are being rate limited.",
            "retry_after": retry_after,
            "global": self.global_,
            "code": self.code or 0,
        }
        return _json(429, body, headers)


def _json(status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    # body= (not text=) so aiohttp appends no charset: discord.py only parses JSON when
    # the content type is exactly "application/json".
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        content_type="application/json",
        headers=headers,
    )


class Gate:
    """Holds matching requests until released; see :meth:`FakeDiscord.hold`."""

    def __init__(self, method: str, pattern: PathPattern, *, wait_timeout: float) -> None:
        self.method = method
        self.wait_timeout = wait_timeout
        self.pattern = pattern
        self.entered = 0
        """Requests that reached the gate so far (held or passed)."""
        self.waiting = 0
        """Requests held right now."""
        self._permits = 0
        self._open = False
        self._signal = Signal()

    @property
    def is_open(self) -> bool:
        return self._open

    def release(self, count: int | None = None) -> None:
        """Let ``count`` held-or-future requests through, or open the gate for good."""
        if count is None:
            self._open = True
        else:
            self._permits += count
        self._signal.notify()

    async def wait_entered(self, count: int = 1) -> None:
        """Wait (at most ``wait_timeout`` seconds) until ``count`` requests reached the gate."""
        async with asyncio.timeout(self.wait_timeout):
            await self._signal.wait_for(lambda: True if self.entered >= count else None)

    async def pass_through(self) -> None:
        """Called by the server for a matching request: wait for a permit."""
        self.entered += 1
        self.waiting += 1
        self._signal.notify()
        try:
            await self._signal.wait_for(self._take_permit)
        finally:
            self.waiting -= 1

    def _take_permit(self) -> bool | None:
        if self._open:
            return True
        if self._permits > 0:
            self._permits -= 1
            return True
        return None


class Faults:
    """The armed faults and gates of one fake Discord."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.gates: list[Gate] = []

    def take(self, method: str, path: str) -> Fault | None:
        """The fault that answers this request, consuming one of its uses."""
        for fault in self.faults:
            if _matches(fault.method, fault.pattern, method, path):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def gate(self, method: str, path: str) -> Gate | None:
        self.gates = [g for g in self.gates if not g.is_open]
        for gate in self.gates:
            if _matches(gate.method, gate.pattern, method, path):
                return gate
        return None
