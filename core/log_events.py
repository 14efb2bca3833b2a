"""The log event vocabulary: stable dotted names and one typed emitter per event.

Every caller logs an event through its emitter, so a given event always carries
exactly the same fields (``None`` when not applicable, never missing) and the
canary report (:mod:`core.canary`) can rely on them. Names and fields are a
contract with operators: add fields freely, rename or remove only with a
migration note in ``docs/log-events.md``.

Context fields (``session_key``, ``binding_id``, ``account``, ``guild``) come
from :func:`core.logging.bind_context`; a field passed to an emitter wins over
the context. Emitters accept an optional ``guild`` for callers outside a bound
block; it is written only when given.

Events (fields in :data:`EVENT_FIELDS`):

``routing.resolved`` (info)
    The router chose a destination for an event of a session: ``mode`` is
    ``bound`` or ``fallback``, ``reason`` the router's reason
    (``requester-match``, ``no-active-binding``...). ``binding_id`` and
    ``conversation_id`` describe the chosen binding (``None`` on fallback);
    ``requester_conversation_id`` is where the request came from.
``delivery.sent`` (info)
    A completion was delivered once: ``path`` ``webhook`` or ``bot``,
    ``destination`` the conversation id it went to. Two of these with one
    ``completion_id`` is a duplicate delivery, a canary violation.
``delivery.fallback`` (warning)
    A completion went to ``destination`` (the requester's conversation) because
    no bound destination was chosen, with the router's ``reason``. Explicit on
    purpose: a fallback while a matching binding was active is a hidden
    fallback, a canary violation.
``delivery.failed`` (warning if ``retryable`` else error)
    A send or edit failed on ``path`` (``webhook`` or ``bot``); ``error`` is short
    text (exception type and message, cut to 200 characters, redacted), ``code``
    Discord's error code (or ``None``). ``completion_id`` is ``None`` for what is
    not a completion (a streamed answer). ``retryable`` says whether something
    still takes over (the bot path, a later retry). Webhook failures are counted
    by the canary.
``binding.bound`` / ``binding.unbound`` (info)
    A binding started / ended; the canary replays these to know which bindings
    were active when a fallback happened.
``binding.expired`` (info)
    The sweeper ended a binding: ``reason`` ``idle-expired`` or ``max-age-expired``.
``config.changed`` (info)
    A runtime override was set: ``key`` (dotted), ``old``/``new`` values (redacted
    when the key looks secret), ``actor`` who changed it, ``scope`` (``global``
    or an account id).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal, Protocol

from core.logging import REDACTED, get_logger, is_secret_key

__all__ = [
    "EVENT_FIELDS",
    "OPTIONAL_FIELDS",
    "EventLogger",
    "LogEvent",
    "binding_bound",
    "binding_expired",
    "binding_lifetime_changed",
    "binding_unbound",
    "config_changed",
    "delivery_failed",
    "delivery_fallback",
    "delivery_sent",
    "routing_resolved",
]

DeliveryPath = Literal["webhook", "bot"]
RouteMode = Literal["bound", "fallback"]
ExpiryReason = Literal["idle-expired", "max-age-expired"]

ERROR_TEXT_LIMIT: Final = 200


class LogEvent(StrEnum):
    """The stable event names; the string values are what the JSON lines carry."""

    ROUTING_RESOLVED = "routing.resolved"
    DELIVERY_SENT = "delivery.sent"
    DELIVERY_FALLBACK = "delivery.fallback"
    DELIVERY_FAILED = "delivery.failed"
    BINDING_BOUND = "binding.bound"
    BINDING_UNBOUND = "binding.unbound"
    BINDING_EXPIRED = "binding.expired"
    BINDING_LIFETIME_CHANGED = "binding.lifetime_changed"
    CONFIG_CHANGED = "config.changed"


EVENT_FIELDS: Final[dict[str, frozenset[str]]] = {
    LogEvent.ROUTING_RESOLVED: frozenset(
        {
            "event_kind",
            "target_session_key",
            "mode",
            "reason",
            "fail_closed",
            "binding_id",
            "channel",
            "account",
            "conversation_id",
            "requester_conversation_id",
        }
    ),
    LogEvent.DELIVERY_SENT: frozenset(
        {
            "completion_id",
            "path",
            "mode",
            "binding_id",
            "target_session_key",
            "channel",
            "account",
            "destination",
        }
    ),
    LogEvent.DELIVERY_FALLBACK: frozenset(
        {
            "completion_id",
            "reason",
            "target_session_key",
            "channel",
            "account",
            "requester_conversation_id",
            "destination",
        }
    ),
    LogEvent.DELIVERY_FAILED: frozenset(
        {"completion_id", "path", "destination", "binding_id", "error", "code", "retryable"}
    ),
    LogEvent.BINDING_BOUND: frozenset(
        {
            "binding_id",
            "target_session_key",
            "target_kind",
            "channel",
            "account",
            "conversation_id",
            "parent_conversation_id",
            "bound_by",
            "expires_at",
        }
    ),
    LogEvent.BINDING_UNBOUND: frozenset(
        {
            "binding_id",
            "target_session_key",
            "channel",
            "account",
            "conversation_id",
            "parent_conversation_id",
            "reason",
        }
    ),
    LogEvent.BINDING_EXPIRED: frozenset(
        {"binding_id", "target_session_key", "channel", "account", "conversation_id", "reason"}
    ),
    LogEvent.BINDING_LIFETIME_CHANGED: frozenset(
        {
            "binding_id",
            "target_session_key",
            "channel",
            "account",
            "conversation_id",
            "idle_timeout_ms",
            "max_age_ms",
            "expires_at",
            "actor",
        }
    ),
    LogEvent.CONFIG_CHANGED: frozenset({"key", "old", "new", "actor", "scope"}),
}
"""The fields each event always carries, besides the envelope and bound context."""

OPTIONAL_FIELDS: Final = frozenset({"guild"})
"""Fields any emitter writes only when the caller passes them."""


class EventLogger(Protocol):
    """What an emitter needs from a logger: any structlog bound logger fits."""

    def info(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def error(self, event: str, *args: Any, **kw: Any) -> Any: ...


_LOG: Final = get_logger("threadbound.events")

# Plain str values: the JSON stays a plain string and the hot path skips enum lookups.
_ROUTING_RESOLVED: Final = LogEvent.ROUTING_RESOLVED.value
_DELIVERY_SENT: Final = LogEvent.DELIVERY_SENT.value
_DELIVERY_FALLBACK: Final = LogEvent.DELIVERY_FALLBACK.value
_DELIVERY_FAILED: Final = LogEvent.DELIVERY_FAILED.value
_BINDING_BOUND: Final = LogEvent.BINDING_BOUND.value
_BINDING_UNBOUND: Final = LogEvent.BINDING_UNBOUND.value
_BINDING_EXPIRED: Final = LogEvent.BINDING_EXPIRED.value
_BINDING_LIFETIME_CHANGED: Final = LogEvent.BINDING_LIFETIME_CHANGED.value
_CONFIG_CHANGED: Final = LogEvent.CONFIG_CHANGED.value


def _iso(value: datetime | str | None) -> str | None:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def _short_error(error: BaseException | str) -> str:
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
    text = " ".join(text.split())
    return text if len(text) <= ERROR_TEXT_LIMIT else text[: ERROR_TEXT_LIMIT - 1] + "…"


def routing_resolved(
    logger: EventLogger | None = None,
    /,
    *,
    event_kind: str,
    target_session_key: str | None,
    mode: RouteMode,
    reason: str,
    fail_closed: bool,
    binding_id: str | None,
    channel: str | None,
    account: str | None,
    conversation_id: str | None,
    requester_conversation_id: str | None,
    guild: str | None = None,
) -> None:
    """Log ``routing.resolved``: one line per router decision, so it does no other work.

    ``channel``/``account`` are the chosen binding's, else the requester's;
    ``binding_id`` and ``conversation_id`` are the chosen binding's (``None`` on fallback).
    """
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).info(
        _ROUTING_RESOLVED,
        event_kind=event_kind,
        target_session_key=target_session_key,
        mode=mode,
        reason=reason,
        fail_closed=fail_closed,
        binding_id=binding_id,
        channel=channel,
        account=account,
        conversation_id=conversation_id,
        requester_conversation_id=requester_conversation_id,
        **extra,
    )


def delivery_sent(
    logger: EventLogger | None = None,
    /,
    *,
    completion_id: str,
    path: DeliveryPath,
    mode: RouteMode,
    binding_id: str | None,
    target_session_key: str | None,
    channel: str | None,
    account: str | None,
    destination: str,
    guild: str | None = None,
) -> None:
    """Log ``delivery.sent`` after a completion was delivered (once per completion)."""
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).info(
        _DELIVERY_SENT,
        completion_id=completion_id,
        path=path,
        mode=mode,
        binding_id=binding_id,
        target_session_key=target_session_key,
        channel=channel,
        account=account,
        destination=destination,
        **extra,
    )


def delivery_fallback(
    logger: EventLogger | None = None,
    /,
    *,
    completion_id: str,
    reason: str,
    target_session_key: str | None,
    channel: str | None,
    account: str | None,
    requester_conversation_id: str | None,
    destination: str | None,
    guild: str | None = None,
) -> None:
    """Log ``delivery.fallback``: a completion is delivered to a fallback destination."""
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).warning(
        _DELIVERY_FALLBACK,
        completion_id=completion_id,
        reason=reason,
        target_session_key=target_session_key,
        channel=channel,
        account=account,
        requester_conversation_id=requester_conversation_id,
        destination=destination,
        **extra,
    )


def delivery_failed(
    logger: EventLogger | None = None,
    /,
    *,
    completion_id: str | None,
    path: DeliveryPath,
    destination: str | None,
    binding_id: str | None,
    error: BaseException | str,
    retryable: bool,
    code: int | None = None,
    guild: str | None = None,
) -> None:
    """Log ``delivery.failed``; ``error`` is shortened to one line of 200 characters.

    ``completion_id`` is None for a message that is not a completion (a streamed
    answer, a notice); ``code`` is Discord's error code when it gave one.
    """
    extra = {"guild": guild} if guild is not None else {}
    method = (logger or _LOG).warning if retryable else (logger or _LOG).error
    method(
        _DELIVERY_FAILED,
        completion_id=completion_id,
        path=path,
        destination=destination,
        binding_id=binding_id,
        error=_short_error(error),
        code=code,
        retryable=retryable,
        **extra,
    )


def binding_bound(
    logger: EventLogger | None = None,
    /,
    *,
    binding_id: str,
    target_session_key: str,
    target_kind: str,
    channel: str,
    account: str,
    conversation_id: str,
    parent_conversation_id: str | None,
    bound_by: str | None,
    expires_at: datetime | str | None,
    guild: str | None = None,
) -> None:
    """Log ``binding.bound`` for a new active binding; ``expires_at`` as ISO-8601 or ``None``."""
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).info(
        _BINDING_BOUND,
        binding_id=binding_id,
        target_session_key=target_session_key,
        target_kind=target_kind,
        channel=channel,
        account=account,
        conversation_id=conversation_id,
        parent_conversation_id=parent_conversation_id,
        bound_by=bound_by,
        expires_at=_iso(expires_at),
        **extra,
    )


def binding_unbound(
    logger: EventLogger | None = None,
    /,
    *,
    binding_id: str,
    target_session_key: str,
    channel: str,
    account: str,
    conversation_id: str,
    parent_conversation_id: str | None,
    reason: str,
    guild: str | None = None,
) -> None:
    """Log ``binding.unbound`` when a binding ends for any reason but expiry."""
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).info(
        _BINDING_UNBOUND,
        binding_id=binding_id,
        target_session_key=target_session_key,
        channel=channel,
        account=account,
        conversation_id=conversation_id,
        parent_conversation_id=parent_conversation_id,
        reason=reason,
        **extra,
    )


def binding_expired(
    logger: EventLogger | None = None,
    /,
    *,
    binding_id: str,
    target_session_key: str,
    channel: str,
    account: str,
    conversation_id: str,
    reason: ExpiryReason,
    guild: str | None = None,
) -> None:
    """Log ``binding.expired`` when the sweeper ends an idle or too old binding."""
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).info(
        _BINDING_EXPIRED,
        binding_id=binding_id,
        target_session_key=target_session_key,
        channel=channel,
        account=account,
        conversation_id=conversation_id,
        reason=reason,
        **extra,
    )


def binding_lifetime_changed(
    logger: EventLogger | None = None,
    /,
    *,
    binding_id: str,
    target_session_key: str,
    channel: str,
    account: str,
    conversation_id: str,
    idle_timeout_ms: int,
    max_age_ms: int,
    expires_at: datetime | str | None,
    actor: str | None,
    guild: str | None = None,
) -> None:
    """Log ``binding.lifetime_changed``: who changed a binding's idle or max-age window."""
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).info(
        _BINDING_LIFETIME_CHANGED,
        binding_id=binding_id,
        target_session_key=target_session_key,
        channel=channel,
        account=account,
        conversation_id=conversation_id,
        idle_timeout_ms=idle_timeout_ms,
        max_age_ms=max_age_ms,
        expires_at=_iso(expires_at),
        actor=actor,
        **extra,
    )


def config_changed(
    logger: EventLogger | None = None,
    /,
    *,
    key: str,
    old: Any,
    new: Any,
    actor: str,
    scope: str,
    guild: str | None = None,
) -> None:
    """Log ``config.changed`` (the audit line of a runtime override).

    When the last part of ``key`` looks secret (``...token``), ``old`` and ``new``
    are written as ``"[redacted]"``: the redaction processor only sees the
    field names ``old``/``new``, which say nothing.
    """
    if is_secret_key(key.rsplit(".", 1)[-1]):
        old = REDACTED if old is not None else None
        new = REDACTED if new is not None else None
    extra = {"guild": guild} if guild is not None else {}
    (logger or _LOG).info(
        _CONFIG_CHANGED, key=key, old=old, new=new, actor=actor, scope=scope, **extra
    )
