"""Sending events to a room so that each lands once, and at the pace the homeserver asks.

Every send names its transaction id, and a retry reuses it: the homeserver keeps one
event per transaction id and access token, so a send retried after a 5xx or a dropped
connection (which may have landed before the answer was lost) posts once.

``M_LIMIT_EXCEEDED`` is honoured with the ``retry_after_ms`` of the answer (read here:
mautrix's ``MLimitExceeded`` drops it), or its ``Retry-After`` header: the account
sends nothing more, whatever it is about, before that time has passed. Waiting for a
rate limit is not a failure and never uses up the attempts a failure has.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

import aiohttp
from mautrix.client import Client

from core.clock import Clock, SystemClock
from core.errors import DeliveryError
from core.logging import get_logger

__all__ = ["EventSender", "MatrixSender"]

_log = get_logger("adapters.matrix.sending")

ATTEMPTS: Final = 5
"""Tries of one send against 5xx answers and dropped connections."""
RATE_LIMITED_WAITS: Final = 100
"""Rate-limit waits of one send before it gives up (a homeserver that never lets it)."""
FIRST_BACKOFF: Final = 0.5
MAX_BACKOFF: Final = 30.0
DEFAULT_RETRY_AFTER: Final = 1.0
"""Seconds to wait on ``M_LIMIT_EXCEEDED`` when the answer says not how long."""


class EventSender(Protocol):
    """What sends a room event once: the bot's :class:`MatrixSender`, or a persona's."""

    async def send(
        self, room_id: str, content: Mapping[str, Any], /, *, txn: str, event_type: str = ""
    ) -> str: ...


class MatrixSender:
    """One account's sends: idempotent by transaction id, paced by the homeserver."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        attempts: int = ATTEMPTS,
        first_backoff: float = FIRST_BACKOFF,
        token: str | None = None,
        as_user: str | None = None,
    ) -> None:
        """``token`` and ``as_user``: send with an application service's token as one of
        its users (:mod:`adapters.matrix.personas`) instead of as the client's account."""
        self._client = client
        self._token = token
        self._as_user = as_user
        self._clock: Clock = clock or SystemClock()
        self._attempts = attempts
        self._first_backoff = first_backoff
        self._not_before: datetime | None = None
        """Nothing is sent before this time: the homeserver's last ``retry_after_ms``."""

    @property
    def client(self) -> Client:
        """The account's client (uploads, reads)."""
        return self._client

    async def send(
        self, room_id: str, content: Mapping[str, Any], /, *, txn: str, event_type: str = ""
    ) -> str:
        """Send ``content`` (an ``m.room.message`` unless ``event_type``); returns its event id.

        Raises:
            DeliveryError: the homeserver refused it (a 4xx other than a rate limit), or
                failed every attempt; ``code`` is the HTTP status when there was one.
        """
        kind = event_type or "m.room.message"
        url = self._client.api.base_url / "_matrix/client/v3/rooms" / room_id / "send" / kind / txn
        return await self._until_taken(room_id, url, content)

    async def redact(
        self, room_id: str, event_id: str, /, *, txn: str, reason: str | None = None
    ) -> str:
        """Redact ``event_id`` (its content removed for everyone), paced and retried as a
        send is; returns the redaction's event id.

        Raises:
            DeliveryError: as :meth:`send` (a 403: the account may not redact it).
        """
        base = self._client.api.base_url / "_matrix/client/v3/rooms" / room_id
        url = base / "redact" / event_id / txn
        return await self._until_taken(room_id, url, {"reason": reason} if reason else {})

    async def _until_taken(self, room_id: str, url: Any, content: Mapping[str, Any]) -> str:
        """PUT ``content`` at ``url`` until the homeserver takes it (rate limits waited
        out, 5xx and dropped connections retried with the same transaction id)."""
        failures = waits = 0
        backoff = self._first_backoff
        while True:
            await self._wait_turn()
            if self._client.api.session.closed:  # the account has stopped: nothing to retry
                raise DeliveryError(
                    f"the Matrix client is closed; nothing more is sent to {room_id}", path="bot"
                )
            try:
                status, body, retry_after = await self._put(url, content)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                status, body, retry_after = 0, {"error": f"{type(exc).__name__}: {exc}"}, None
            if status == 200 and isinstance(body.get("event_id"), str):
                return str(body["event_id"])
            if status == 429:
                waits += 1
                wait = retry_after if retry_after is not None else DEFAULT_RETRY_AFTER
                self._hold(wait)
                _log.info("matrix.rate_limited", room_id=room_id, wait_s=wait, waits=waits)
                if waits < RATE_LIMITED_WAITS:
                    continue
            elif status == 0 or status >= 500:
                failures += 1
                _log.warning("matrix.send_retry", room_id=room_id, status=status, attempt=failures)
                if failures < self._attempts:
                    await self._clock.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF)
                    continue
            said = ", ".join(str(v) for v in (body.get("errcode"), body.get("error")) if v)
            raise DeliveryError(
                f"the homeserver did not take the message in {room_id} "
                f"(HTTP {status or 'none'}{', ' + said if said else ''})",
                path="bot",
                code=status or None,
            )

    async def _put(
        self, url: Any, content: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any], float | None]:
        """One PUT: the status, the JSON answer, and the rate limit's wait in seconds."""
        api = self._client.api
        headers = {"Authorization": f"Bearer {self._token or api.token}"}
        if self._as_user is not None:
            url = url.with_query(user_id=self._as_user)
        async with api.session.put(url, json=dict(content), headers=headers) as response:
            body: dict[str, Any] = {}
            with contextlib.suppress(ValueError, aiohttp.ContentTypeError):
                answer = await response.json()
                body = answer if isinstance(answer, dict) else {}
            return response.status, body, _retry_after(body, response.headers)

    async def _wait_turn(self) -> None:
        while self._not_before is not None:
            left = (self._not_before - self._clock.now()).total_seconds()
            if left <= 0:
                return
            await self._clock.sleep(left)

    def _hold(self, seconds: float) -> None:
        until = self._clock.now() + timedelta(seconds=seconds)
        if self._not_before is None or until > self._not_before:
            self._not_before = until


def _retry_after(body: Mapping[str, Any], headers: Mapping[str, str]) -> float | None:
    """Seconds the homeserver asks to wait: ``retry_after_ms``, else ``Retry-After``."""
    millis = body.get("retry_after_ms")
    if isinstance(millis, int | float) and millis >= 0:
        return float(millis) / 1000
    header = headers.get("Retry-After")
    if header is not None:
        with contextlib.suppress(ValueError):
            return max(float(header), 0.0)
    return None
