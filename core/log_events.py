"""The log event vocabulary: one frozen dataclass per stable event, one :func:`emit`.

An event's name, level and fields are written once, in its class; the field
lists the canary report (:mod:`core.canary`) and ``docs/log-events.md`` rely on
(:data:`EVENT_FIELDS`) are derived from the classes, so they cannot drift.
Every field is always written (``None`` when not applicable, never missing),
except ``guild``, written only when given (:data:`OPTIONAL_FIELDS`). Names and
fields are a contract with operators: add fields freely, rename or remove only
with a migration note in ``docs/log-events.md``.

Context fields (``session_key``, ``binding_id``, ``account``, ``guild``) come
from :func:`core.logging.bind_context` (an agent's task runs with its session
key bound); a field an event carries wins over the context. The events are
documented one by one in ``docs/log-events.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal, Protocol

from core.logging import REDACTED, get_logger, is_secret_key, write_event

__all__ = [
    "EVENT_FIELDS",
    "EVENT_TYPES",
    "OPTIONAL_FIELDS",
    "BindingBound",
    "BindingExpired",
    "BindingLifetimeChanged",
    "BindingUnbound",
    "ConfigChanged",
    "DeliveryFailed",
    "DeliveryFallback",
    "DeliverySent",
    "DiscordRateLimited",
    "Event",
    "EventLogger",
    "LogEvent",
    "RoutingResolved",
    "SchedulerRunFinished",
    "SchedulerRunMissed",
    "SchedulerRunSkipped",
    "SchedulerRunStarted",
    "SubagentCompleted",
    "emit",
]

DeliveryPath = Literal["webhook", "bot"]
RouteMode = Literal["bound", "fallback"]
ExpiryReason = Literal["idle-expired", "max-age-expired"]
Level = Literal["info", "warning", "error"]

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
    SUBAGENT_COMPLETED = "subagent.completed"
    SCHEDULER_RUN_STARTED = "scheduler.run.started"
    SCHEDULER_RUN_FINISHED = "scheduler.run.finished"
    SCHEDULER_RUN_SKIPPED = "scheduler.run.skipped"
    SCHEDULER_RUN_MISSED = "scheduler.run.missed"
    DISCORD_RATE_LIMITED = "discord.rate_limited"


class EventLogger(Protocol):
    """What :func:`emit` needs from a logger: any structlog bound logger fits."""

    def info(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def error(self, event: str, *args: Any, **kw: Any) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event: ``name`` and ``level`` are the class's, the fields its own."""

    name: ClassVar[str]
    level: ClassVar[Level] = "info"

    guild: str | None = None
    """Written only when given: callers outside a bound block name the guild here."""

    def severity(self) -> Level:
        return self.level

    def log_fields(self) -> dict[str, Any]:
        """The fields as written, in a new dict: every field, ``guild`` only when set."""
        return _fields_writer(type(self))(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingResolved(Event):
    """One line per router decision, so it does no other work.

    ``channel``/``account`` are the chosen binding's, else the requester's;
    ``binding_id`` and ``conversation_id`` are the chosen binding's (``None`` on fallback).
    """

    name: ClassVar[str] = LogEvent.ROUTING_RESOLVED.value

    event_kind: str
    target_session_key: str | None
    mode: RouteMode
    reason: str
    fail_closed: bool
    binding_id: str | None
    channel: str | None
    account: str | None
    conversation_id: str | None
    requester_conversation_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliverySent(Event):
    """A completion was delivered, once: two with one ``completion_id`` are a duplicate."""

    name: ClassVar[str] = LogEvent.DELIVERY_SENT.value

    completion_id: str
    path: DeliveryPath
    mode: RouteMode
    binding_id: str | None
    target_session_key: str | None
    channel: str | None
    account: str | None
    destination: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryFallback(Event):
    """A completion goes to a fallback destination; explicit, so a hidden one shows."""

    name: ClassVar[str] = LogEvent.DELIVERY_FALLBACK.value
    level: ClassVar[Level] = "warning"

    completion_id: str
    reason: str
    target_session_key: str | None
    channel: str | None
    account: str | None
    requester_conversation_id: str | None
    destination: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryFailed(Event):
    """A send or edit failed on ``path``; ``error`` is one short line, ``code`` Discord's.

    ``completion_id`` is None for what is not a completion (a streamed answer);
    a warning while something still takes over (``retryable``), else an error.
    """

    name: ClassVar[str] = LogEvent.DELIVERY_FAILED.value

    completion_id: str | None
    path: DeliveryPath
    destination: str | None
    binding_id: str | None
    error: BaseException | str
    code: int | None = None
    retryable: bool
    account: str | None = None
    """The account that sent it (the canary groups by it); ``None`` when not known."""

    def severity(self) -> Level:
        return "warning" if self.retryable else "error"

    def log_fields(self) -> dict[str, Any]:
        return {**Event.log_fields(self), "error": _short_error(self.error)}


@dataclass(frozen=True, slots=True, kw_only=True)
class _BindingEvent(Event):
    """The identity every ``binding.*`` event carries (``SessionBindingRecord.log_fields``)."""

    binding_id: str
    target_session_key: str
    channel: str
    account: str
    conversation_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingBound(_BindingEvent):
    """A new active binding; ``expires_at`` as ISO-8601 or ``None``."""

    name: ClassVar[str] = LogEvent.BINDING_BOUND.value

    target_kind: str
    parent_conversation_id: str | None
    bound_by: str | None
    expires_at: datetime | str | None

    def log_fields(self) -> dict[str, Any]:
        return {**Event.log_fields(self), "expires_at": _iso(self.expires_at)}


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingUnbound(_BindingEvent):
    """A binding ended for any reason but expiry."""

    name: ClassVar[str] = LogEvent.BINDING_UNBOUND.value

    parent_conversation_id: str | None
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingExpired(_BindingEvent):
    """The sweeper ended an idle or too old binding."""

    name: ClassVar[str] = LogEvent.BINDING_EXPIRED.value

    reason: ExpiryReason


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingLifetimeChanged(_BindingEvent):
    """Who changed a binding's idle or max-age window, and to what."""

    name: ClassVar[str] = LogEvent.BINDING_LIFETIME_CHANGED.value

    idle_timeout_ms: int
    max_age_ms: int
    expires_at: datetime | str | None
    actor: str | None

    def log_fields(self) -> dict[str, Any]:
        return {**Event.log_fields(self), "expires_at": _iso(self.expires_at)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChanged(Event):
    """The audit line of a runtime override.

    When the last part of ``key`` looks secret (``...token``), ``old`` and ``new``
    are written as ``"[redacted]"``: the redaction processor only sees the
    field names ``old``/``new``, which say nothing.
    """

    name: ClassVar[str] = LogEvent.CONFIG_CHANGED.value

    key: str
    old: Any
    new: Any
    actor: str
    scope: str

    def log_fields(self) -> dict[str, Any]:
        data = Event.log_fields(self)
        if is_secret_key(self.key.rsplit(".", 1)[-1]):
            data["old"] = REDACTED if self.old is not None else None
            data["new"] = REDACTED if self.new is not None else None
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentCompleted(Event):
    """A subagent's task ended (once per completion; ``recorded`` False when an earlier
    pass had already recorded it). ``outcome``: ``completed``, ``failed``,
    ``timed_out``, or a person's doing (``cancelled``, ``rejected``), which the canary
    never counts as a failure. ``account`` is the requester's."""

    name: ClassVar[str] = LogEvent.SUBAGENT_COMPLETED.value

    session_key: str
    outcome: str
    completion_id: str
    recorded: bool
    account: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _SchedulerRunEvent(Event):
    """One run of a scheduled job, named by ``run_key`` (``<job>@<due epoch>``)."""

    job_id: str
    run_key: str
    due_at: str
    kind: str
    account: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerRunStarted(_SchedulerRunEvent):
    """A claimed run was started: its turn queued in the thread's session, or its
    subagent spawned. Written once per run; a second one for the same ``run_key`` is
    a duplicate, which the canary counts (it must stay 0). ``due_count`` > 1: a
    catch-up after a downtime, standing for that many due times; ``late``: paced."""

    name: ClassVar[str] = LogEvent.SCHEDULER_RUN_STARTED.value

    due_count: int
    late: bool
    session_key: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerRunFinished(_SchedulerRunEvent):
    """A started run ended: ``result`` is ``finished`` for a thread's turn, the
    subagent's outcome for a channel job, or ``failed: …`` when it could not start."""

    name: ClassVar[str] = LogEvent.SCHEDULER_RUN_FINISHED.value

    result: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerRunSkipped(_SchedulerRunEvent):
    """A due run was not started: the previous run of the job was still working, or
    the scheduler is off there (``reason``)."""

    name: ClassVar[str] = LogEvent.SCHEDULER_RUN_SKIPPED.value

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerRunMissed(_SchedulerRunEvent):
    """Due times passed while the bot was down, longer ago than
    ``misfire_grace_seconds``: recorded, not run (``due_count`` of them)."""

    name: ClassVar[str] = LogEvent.SCHEDULER_RUN_MISSED.value
    level: ClassVar[Level] = "warning"

    due_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscordRateLimited(Event):
    """Discord answered 429 anyway (the bot paces itself to avoid it): one line per
    incident, its first 429; the 429s that follow within its ``retry_after`` on the same
    scope and bucket are that incident. ``scope``: ``global``, ``user`` (a route's or a
    webhook's bucket) or ``shared``; the request was waited out and sent again."""

    name: ClassVar[str] = LogEvent.DISCORD_RATE_LIMITED.value
    level: ClassVar[Level] = "warning"

    scope: str
    method: str
    route: str
    bucket: str | None
    retry_after: float | None
    account: str | None


EVENT_TYPES: Final[tuple[type[Event], ...]] = (
    RoutingResolved,
    DeliverySent,
    DeliveryFallback,
    DeliveryFailed,
    BindingBound,
    BindingUnbound,
    BindingExpired,
    BindingLifetimeChanged,
    ConfigChanged,
    SubagentCompleted,
    SchedulerRunStarted,
    SchedulerRunFinished,
    SchedulerRunSkipped,
    SchedulerRunMissed,
    DiscordRateLimited,
)

OPTIONAL_FIELDS: Final = frozenset({"guild"})
"""Fields an event writes only when the caller gives them."""

EVENT_FIELDS: Final[dict[str, frozenset[str]]] = {
    cls.name: frozenset(f.name for f in fields(cls)) - OPTIONAL_FIELDS for cls in EVENT_TYPES
}
"""The fields each event always carries, besides the envelope and bound context."""

_LOG: Final = get_logger("threadbound.events")


def emit(event: Event, logger: EventLogger | None = None) -> None:
    """Write ``event`` at its level, through ``logger`` (default: ``threadbound.events``).

    Callers on a hot path (the router) build the event only when
    :func:`core.logging.is_enabled` says its level is on; the fields dict the
    event builds is handed to the processors as it is (:func:`core.logging.write_event`).
    """
    write_event(logger or _LOG, event.severity(), event.name, event.log_fields())


_FieldsWriter = Callable[[Event], dict[str, Any]]
_FIELDS_WRITERS: dict[type[Event], _FieldsWriter] = {}


def _fields_writer(event_type: type[Event]) -> _FieldsWriter:
    """Per class, once: the function that reads an event's fields into a new dict.

    The router logs on its hot path, and a dict display naming each attribute
    (``{"mode": self.mode, ...}``) builds in a third of the time a loop of
    ``getattr`` calls takes. The source is generated from the class's own field
    names, as :mod:`dataclasses` generates ``__init__``; optional fields come
    last, each only when set.
    """
    writer = _FIELDS_WRITERS.get(event_type)
    if writer is None:
        names = [f.name for f in fields(event_type)]
        always = ", ".join(
            f"{name!r}: self.{name}" for name in names if name not in OPTIONAL_FIELDS
        )
        lines = ["def log_fields(self):", f"    data = {{{always}}}"]
        for name in names:
            if name in OPTIONAL_FIELDS:
                lines += [
                    f"    if self.{name} is not None:",
                    f"        data[{name!r}] = self.{name}",
                ]
        lines.append("    return data")
        namespace: dict[str, Any] = {}
        exec("\n".join(lines), namespace)  # noqa: S102 - field names of our own classes only
        writer = _FIELDS_WRITERS[event_type] = namespace["log_fields"]
    return writer


def _iso(value: datetime | str | None) -> str | None:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def _short_error(error: BaseException | str) -> str:
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
    text = " ".join(text.split())
    return text if len(text) <= ERROR_TEXT_LIMIT else text[: ERROR_TEXT_LIMIT - 1] + "…"
