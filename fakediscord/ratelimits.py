"""Discord's REST rate limits, as the fake enforces them, and the count of what it refused.

Three limits, as https://discord.com/developers/docs/topics/rate-limits describes them:

* **per-route buckets**: ``limit`` requests per ``per`` seconds for each top-level
  resource in the path (a channel, a guild, a webhook id + token) and each bot token.
  Every answer carries the bucket's ``X-RateLimit-*`` headers; the request past the
  limit is a 429 with ``X-RateLimit-Scope: user`` (or ``shared`` for a per-resource
  bucket that all callers share);
* the **global limit**: 50 requests per second per bot token (per "IP", here: all
  requests without a token together) over every route except interaction callbacks and
  webhook-token requests (those are still limited by their own bucket);
* the **invalid request limit**: 10,000 answers of 401, 403 or 429 per 10 minutes (429s of
  scope ``shared`` excepted) and Cloudflare bans the caller: a plain-text 429 without
  ``Via``, which discord.py raises instead of retrying.

Buckets are fixed windows, as Discord's are: the first request after a window ended
opens the next one (``Reset-After`` = ``per``), and ``Remaining`` comes back to
``limit`` only when it ends. Windows run on a monotonic clock, injectable for tests;
``X-RateLimit-Reset`` is that moment as epoch seconds on the (also injectable) wall clock.

Where Discord documents a number it is used; elsewhere the size is the one commonly
observed in the headers, and each entry of :data:`DISCORD_BUCKETS` names its source.
Discord says sizes change without notice: these are realistic, not authoritative.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self

__all__ = [
    "DISCORD_BUCKETS",
    "Bucket",
    "Decision",
    "RateLimiter",
    "RateLimits",
    "Scope",
]

Scope = Literal["user", "global", "shared"]

GLOBAL_PER_SECOND = 50
"""Discord's documentation, "Global Rate Limit": "All bots can make up to 50 requests per
second to our API"."""
INVALID_REQUEST_LIMIT = 10_000
INVALID_REQUEST_WINDOW = 600.0
"""Discord's documentation, "Invalid Request Limit aka Cloudflare bans": "Currently, this
limit is 10,000 per 10 minutes. An invalid request is one that results in 401, 403, or 429
statuses." and "429 errors returned with X-RateLimit-Scope: shared are not counted"."""
INVALID_STATUSES = frozenset({401, 403, 429})
LIMITED = "You are being rate limited."
RESOURCE_LIMITED = "The resource is being rate limited."
"""The two messages of the documentation's example 429 bodies (user/global, shared)."""
CLOUDFLARE_BAN = "error code: 1015"
"""Cloudflare's rate-limit page, as :class:`fakediscord.faults.Fault` imitates it too."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """One per-route limit: ``limit`` requests per ``per`` seconds.

    ``routes`` are API paths with ``{placeholders}`` (``/channels/{channel_id}/messages``)
    for the ``methods`` given; the routes of one bucket share it (and its
    ``X-RateLimit-Bucket`` hash), as Discord's shared buckets do. A bucket counts per top-level
    resource of the path (channel, guild, webhook id + token) and, for scope ``user``, per
    bot token; a ``shared`` bucket is the resource's, whoever calls. Webhook-token routes
    count per webhook whatever the Authorization header says.
    """

    name: str
    methods: tuple[str, ...]
    routes: tuple[str, ...]
    limit: int
    per: float
    scope: Literal["user", "shared"] = "user"
    source: str = ""
    """Where the size comes from (documentation or observed headers)."""

    @property
    def hash(self) -> str:
        """The ``X-RateLimit-Bucket`` value: stable, and like Discord's, it names the
        bucket without its top-level resource (two channels' buckets share the hash)."""
        return _hash(self.name)


DISCORD_BUCKETS: tuple[Bucket, ...] = (
    Bucket(
        "message create",
        ("POST",),
        ("/channels/{channel_id}/messages",),
        limit=5,
        per=5.0,
        source="Discord's documentation's limit table until 2017 ('POST Message 5/5s "
        "per-channel'); still observed as 5/5 (discord/discord-api-docs#2761, #8073)",
    ),
    Bucket(
        "message edit",
        ("PATCH",),
        ("/channels/{channel_id}/messages/{message_id}",),
        limit=5,
        per=5.0,
        source="observed headers: PATCH message is a 5/5 bucket of its own "
        "(discord/discord-api-docs#2761, #8073)",
    ),
    Bucket(
        "message delete",
        ("DELETE",),
        ("/channels/{channel_id}/messages/{message_id}",),
        limit=5,
        per=1.0,
        source="Discord's documentation's limit table until 2017 ('DELETE Message 5/1s "
        "per-channel')",
    ),
    Bucket(
        "reaction",
        ("PUT", "DELETE"),
        ("/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/{user}",),
        limit=1,
        per=0.25,
        source="Discord's documentation's limit table until 2017 ('PUT/DELETE Reaction "
        "1/0.25s per-channel'); still observed as 1/0.25",
    ),
    Bucket(
        "thread create",
        ("POST",),
        (
            "/channels/{channel_id}/threads",
            "/channels/{channel_id}/messages/{message_id}/threads",
        ),
        limit=10,
        per=10.0,
        source="assumed: no published size found (Discord adds hidden 'shared' limits "
        "here, discord/discord-api-docs#7816); 10/10 like channel create",
    ),
    Bucket(
        "channel create",
        ("POST",),
        ("/guilds/{guild_id}/channels",),
        limit=10,
        per=10.0,
        source="assumed: the size commonly quoted for guild-scoped creates (the 2017 "
        "table's 'PATCH Member 10/10s per-guild' is the documented neighbour)",
    ),
    Bucket(
        "channel edit",
        ("PATCH",),
        ("/channels/{channel_id}",),
        limit=10,
        per=15.0,
        source="observed headers: 'any changes except name or topic => 10 every 15 "
        "seconds' (discord/discord-api-docs#2190); the 2 per 10 minutes sub-limit on "
        "name/topic changes is not modelled",
    ),
    Bucket(
        "webhook",
        ("GET", "POST", "PATCH", "DELETE"),
        (
            "/webhooks/{webhook_id}/{webhook_token}",
            "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}",
        ),
        limit=5,
        per=2.0,
        source="observed headers: '5 requests per 2 seconds per webhook, failed requests "
        "count' (birdie0's Discord Webhooks Guide, 'Rate Limits')",
    ),
)
"""The buckets of :meth:`RateLimits.discord`; any other route gets the default bucket."""

DEFAULT_LIMIT, DEFAULT_PER = 50, 1.0
"""The default bucket, per method + route + top-level resource: generous (the global rate),
so only the buckets above and the global limit bite."""


@dataclass(frozen=True, slots=True)
class RateLimits:
    """How the fake limits: off (:meth:`off`, every answer as without limits) or as
    Discord does (:meth:`discord`), with any size changed for a fast test::

        RateLimits.discord(global_per_second=5).resized("message create", 5, per=0.5)
    """

    enabled: bool
    global_per_second: int = GLOBAL_PER_SECOND
    buckets: tuple[Bucket, ...] = DISCORD_BUCKETS
    default_limit: int = DEFAULT_LIMIT
    default_per: float = DEFAULT_PER
    invalid_request_limit: int | None = INVALID_REQUEST_LIMIT
    """Invalid answers per :data:`INVALID_REQUEST_WINDOW` before the Cloudflare ban; None:
    never banned."""

    @classmethod
    def off(cls) -> Self:
        """No limits: no ``X-RateLimit-*`` headers and no 429 (answers are still counted)."""
        return cls(enabled=False)

    @classmethod
    def discord(cls, **changes: Any) -> Self:
        """Discord's sizes (``changes`` as for the fields, e.g. ``global_per_second=5``)."""
        return cls(enabled=True, **changes)

    def resized(self, name: str, limit: int | None = None, *, per: float | None = None) -> Self:
        """The same limits with bucket ``name`` holding ``limit`` requests per ``per`` s."""
        if name not in {b.name for b in self.buckets}:
            raise KeyError(f"no bucket named {name!r}")
        buckets = tuple(
            replace(b, limit=b.limit if limit is None else limit, per=b.per if per is None else per)
            if b.name == name
            else b
            for b in self.buckets
        )
        return replace(self, buckets=buckets)

    def bucket(self, name: str) -> Bucket:
        return next(b for b in self.buckets if b.name == name)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one request: let it through with ``headers`` added to its answer,
    or answer ``status`` (429) with ``body`` and ``headers`` instead."""

    allowed: bool
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200
    body: dict[str, Any] | str | None = None
    """The JSON body of a 429, or the plain text of the Cloudflare ban."""
    scope: Scope | None = None
    """The scope of a limiter 429; None when allowed and for the Cloudflare ban."""


@dataclass(slots=True)
class _Window:
    """A fixed window: ``used`` of ``limit`` requests until ``ends`` (monotonic seconds)."""

    limit: int
    per: float
    ends: float = -math.inf
    used: int = 0

    def roll(self, now: float) -> None:
        if now >= self.ends:
            self.ends, self.used = now + self.per, 0

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


@dataclass(frozen=True, slots=True)
class _Route:
    """A request's path read as Discord reads it."""

    template: str
    """The path with ids as placeholders (``/channels/{channel_id}/messages``)."""
    major: str
    """Its top-level resource (``channel:1``, ``webhook:1/token``), or ``""``."""
    webhook_token: bool
    """A ``/webhooks/{id}/{token}`` path: authenticated by the token, outside the global limit."""
    interaction: bool
    """An interaction callback: outside the global limit."""


class RateLimiter:
    """Decides, request by request, whether Discord would answer or refuse with a 429, and
    counts the answers that matter: 429s by scope and invalid requests (401/403/429).

    ``clock`` is monotonic seconds (windows), ``wall`` epoch seconds (``X-RateLimit-Reset``);
    inject both in tests. Counting goes on when the limits are off, so a test can assert
    on a bot's 401s and 403s without turning limits on.
    """

    _SWEEP_AT = 4096
    """Windows kept before expired ones are dropped (a playground runs for hours)."""

    def __init__(
        self,
        config: RateLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self.config = RateLimits.off() if config is None else config
        self.counts_by_scope: Counter[str] = Counter()
        """429s the fake answered, by ``X-RateLimit-Scope`` (``user``, ``global``, ``shared``):
        its own and injected ones (:meth:`FakeDiscord.fail_next`)."""
        self.total_429 = 0
        """Every 429 answered, including Cloudflare-style ones (no scope)."""
        self._invalid: deque[float] = deque()
        self._windows: dict[tuple[str, ...], _Window] = {}
        self._compiled = self._compile(self.config)

    def configure(self, config: RateLimits) -> None:
        """Limit differently from now on; every window starts afresh (counts are kept)."""
        self.config = config
        self._windows.clear()
        self._compiled = self._compile(config)

    # deciding

    def check(
        self, token: str | None, method: str, path: str, now: float | None = None
    ) -> Decision:
        """Whether the request of bot ``token`` (None: no bot token) for ``method path``
        (the API path, without ``/api/v10``) goes through, and with which headers."""
        if not self.config.enabled:
            return Decision(allowed=True)
        now = self.clock() if now is None else now
        if self._banned(now):
            headers = {"Retry-After": str(max(1, math.ceil(self._ban_lifts_in(now))))}
            return Decision(allowed=False, headers=headers, status=429, body=CLOUDFLARE_BAN)
        route = _parse(path)
        bucket = self._bucket(method.upper(), path)
        if not (route.webhook_token or route.interaction):
            limited = self._take_global(token, now)
            if limited is not None:
                return limited
        name = bucket.name if bucket else f"{method.upper()} {route.template}"
        limit = bucket.limit if bucket else self.config.default_limit
        per = bucket.per if bucket else self.config.default_per
        scope: Scope = bucket.scope if bucket else "user"
        who = "" if scope == "shared" or route.webhook_token else f"bot:{token}"
        window = self._window(("route", name, route.major, who), limit, per, now)
        if window.used >= window.limit:
            return self._limited(scope, window, _hash(name), now)
        window.used += 1
        return Decision(allowed=True, headers=self._bucket_headers(window, _hash(name), now))

    def _take_global(self, token: str | None, now: float) -> Decision | None:
        window = self._window(("global", token or ""), self.config.global_per_second, 1.0, now)
        if window.used < window.limit:
            window.used += 1
            return None
        retry_after = _ceil_ms(window.ends - now)
        headers = {
            "Retry-After": str(max(1, math.ceil(retry_after))),
            "Via": "1.1 google",
            "X-RateLimit-Global": "true",
            "X-RateLimit-Scope": "global",
        }
        body = {"message": LIMITED, "retry_after": retry_after, "global": True}
        return Decision(False, headers, 429, body, "global")

    def _limited(self, scope: Scope, window: _Window, bucket_hash: str, now: float) -> Decision:
        retry_after = _ceil_ms(window.ends - now)
        headers = self._bucket_headers(window, bucket_hash, now) | {
            "Retry-After": str(max(1, math.ceil(retry_after))),
            # discord.py retries a 429 only with Via (Discord's proxy) and a JSON body
            "Via": "1.1 google",
            "X-RateLimit-Scope": scope,
        }
        message = RESOURCE_LIMITED if scope == "shared" else LIMITED
        body = {"message": message, "retry_after": retry_after, "global": False}
        return Decision(False, headers, 429, body, scope)

    def _bucket_headers(self, window: _Window, bucket_hash: str, now: float) -> dict[str, str]:
        reset_after = _ceil_ms(window.ends - now)
        return {
            "X-RateLimit-Limit": str(window.limit),
            "X-RateLimit-Remaining": str(window.remaining),
            "X-RateLimit-Reset": f"{self.wall() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": bucket_hash,
        }

    def _window(self, key: tuple[str, ...], limit: int, per: float, now: float) -> _Window:
        window = self._windows.get(key)
        if window is None:
            if len(self._windows) >= self._SWEEP_AT:
                self._windows = {k: w for k, w in self._windows.items() if w.ends > now}
            window = self._windows[key] = _Window(limit, per)
        window.roll(now)
        return window

    def _bucket(self, method: str, path: str) -> Bucket | None:
        for bucket, pattern in self._compiled:
            if method in bucket.methods and pattern.fullmatch(path):
                return bucket
        return None

    @staticmethod
    def _compile(config: RateLimits) -> list[tuple[Bucket, re.Pattern[str]]]:
        def pattern(route: str) -> str:
            return re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(route))

        return [
            (b, re.compile("|".join(f"(?:{pattern(r)})" for r in b.routes))) for b in config.buckets
        ]

    # counting

    def count(
        self, status: int, scope: str | None = None, *, ban: bool = False, now: float | None = None
    ) -> None:
        """Note one answer the fake sent (every REST answer, whatever decided it):
        ``scope`` is its ``X-RateLimit-Scope`` header, if any; ``ban``: the limiter's own
        Cloudflare ban, which is not counted as invalid again (else it would never lift)."""
        if status == 429:
            self.total_429 += 1
            if scope:
                self.counts_by_scope[scope] += 1
        if status in INVALID_STATUSES and scope != "shared" and not ban:
            now = self.clock() if now is None else now
            self._invalid.append(now)
            self._forget(now)

    def invalid_requests(self, window_seconds: float = INVALID_REQUEST_WINDOW) -> int:
        """401, 403 and 429 answers (but 429s of scope ``shared``) in the last
        ``window_seconds`` (at most 10 minutes are remembered)."""
        now = self.clock()
        self._forget(now)
        return sum(1 for at in self._invalid if at > now - window_seconds)

    def _forget(self, now: float) -> None:
        while self._invalid and self._invalid[0] <= now - INVALID_REQUEST_WINDOW:
            self._invalid.popleft()

    def _banned(self, now: float) -> bool:
        limit = self.config.invalid_request_limit
        if limit is None:
            return False
        self._forget(now)
        return len(self._invalid) >= limit

    def _ban_lifts_in(self, now: float) -> float:
        """Seconds until the invalid requests in the window drop below the limit."""
        limit = self.config.invalid_request_limit or 0
        excess = len(self._invalid) - limit
        return self._invalid[excess] + INVALID_REQUEST_WINDOW - now


def _parse(path: str) -> _Route:
    parts = path.strip("/").split("/")
    head = parts[0]
    tokened = head in ("webhooks", "interactions")
    major = ""
    template: list[str] = []
    for i, part in enumerate(parts):
        kind = parts[i - 1][:-1] if i else ""
        if (i == 1 and tokened) or (not major and kind in ("channel", "guild") and part.isdigit()):
            # the first channel, guild, webhook or interaction id is the top-level resource
            major = f"{kind}:{part}"
            template.append(f"{{{kind}_id}}")
        elif i == 2 and tokened:
            # a webhook counts per id + token; an interaction per id (its token is one-use)
            major += f"/{part}" if head == "webhooks" else ""
            template.append("{token}")
        elif i and parts[i - 1] == "reactions":
            template.append("{emoji}")
        elif part.isdigit():
            template.append("{id}")
        else:
            template.append(part)
    return _Route(
        template="/" + "/".join(template),
        major=major,
        webhook_token=head == "webhooks" and len(parts) >= 3,
        interaction=head == "interactions",
    )


def _hash(name: str) -> str:
    return hashlib.blake2b(name.encode(), digest_size=16).hexdigest()


def _ceil_ms(seconds: float) -> float:
    """Seconds rounded up to the millisecond: a client that sleeps this long after the
    answer arrives is never early (rounding down would earn it a 429)."""
    return max(0.0, math.ceil(round(seconds * 1000, 6)) / 1000)
