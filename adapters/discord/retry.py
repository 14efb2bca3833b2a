"""Retrying a Discord call that failed for a reason that passes.

discord.py already sleeps out Discord's own rate limits and retries some 5xx
answers, but it raises at once for a 429 without a ``Via`` header (a
Cloudflare-style ban), for a 503 on the bot's REST path, for a timeout and for
a reset connection; and after its own retries it raises too. Those failures
pass within seconds, and giving up on them would cut an agent's answer short.
:func:`retrying` waits them out on the bot's clock (so tests drive it with a
fake one), honouring ``Retry-After`` when Discord gives one, bounded both in
attempts and in total time. Anything else is raised at once: the caller
decides whether it can repair it (a deleted webhook, an archived thread) or
must give up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
import discord

from core.clock import Clock

__all__ = ["DEFAULT_POLICY", "RetryPolicy", "retry_after", "retrying", "transient"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a transient failure is waited out before it counts as a failure."""

    attempts: int = 6
    """Calls in all, the first one included."""
    first_delay: float = 1.0
    """Wait before the second call when Discord says nothing; doubled after each failure."""
    max_delay: float = 30.0
    deadline: float = 120.0
    """Total seconds of waiting; a retry that would pass it is not made."""


DEFAULT_POLICY = RetryPolicy()


def transient(exc: BaseException) -> bool:
    """A failure that passes by itself: rate limits, server errors, timeouts, resets."""
    if isinstance(exc, discord.HTTPException):
        return exc.status == 429 or exc.status >= 500
    return isinstance(exc, asyncio.TimeoutError | aiohttp.ClientConnectionError | ConnectionError)
    # (Other DISCORD_FAILURES, a malformed answer say, do not pass by waiting.)


def retry_after(exc: BaseException) -> float | None:
    """The wait Discord asked for (``Retry-After``, seconds), if it named one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = float(headers.get("Retry-After", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    clock: Clock,
    policy: RetryPolicy = DEFAULT_POLICY,
    on_retry: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """``await call()``, calling it again after a transient failure.

    Raises:
        the last exception, when it is not transient or the policy is spent.
    """
    waited = 0.0
    delay = policy.first_delay
    for attempt in range(1, policy.attempts + 1):
        try:
            return await call()
        except Exception as exc:
            if not transient(exc) or attempt == policy.attempts:
                raise
            asked = retry_after(exc)
            wait = min(delay if asked is None else asked, policy.max_delay)
            if waited + wait > policy.deadline:
                raise
            if on_retry is not None:
                on_retry(exc, attempt, wait)
            await clock.sleep(wait)
            waited += wait
            delay = min(delay * 2, policy.max_delay)
    raise AssertionError("unreachable: the last attempt returns or raises")
