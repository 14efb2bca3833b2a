"""Which event types exist, what kind each is, and what its payload must hold.

The registry is the one place that decides whether an event may be appended:
:class:`core.sessions.log.SessionLog` validates every payload against the
model registered for its type and takes the event's kind from here, so a
caller can never store a ``user`` event with an assistant's payload. Later
features register their own types (``artifact.<type>``, ``handoff.<status>``)
at import time through :func:`register_event_type`.

Stored payloads are the models' JSON dumps (defaults filled in), so replaying
a log never needs the models again and old events stay readable when a type
gains an optional field.

Reading goes the other way: :func:`read_payload` turns a stored payload back
into its model (what :attr:`core.sessions.events.SessionEvent.data` returns),
tolerantly, since a log outlives the code that wrote it: keys a later version
dropped are ignored, and a payload no model can read (its type was registered
by a plugin that is gone, or it no longer fits) is an :class:`UnknownPayload`
rather than an error, so one old row never stops a reader.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from core.attachments import AttachmentRecord
from core.errors import SessionError

__all__ = [
    "ApprovalDecidedPayload",
    "ApprovalDecision",
    "ApprovalRequestedPayload",
    "AssistantMessagePayload",
    "BookmarkPayload",
    "BranchCreatedPayload",
    "BudgetStopPayload",
    "CompactionPayload",
    "DeliveryMode",
    "EventKind",
    "HeadMovedPayload",
    "MessageQueuedPayload",
    "ModelChangedPayload",
    "QueueClearedPayload",
    "QueueMovedPayload",
    "SteerInterruptionPayload",
    "SteerOrFollowUp",
    "ToolCallRecord",
    "ToolResultPayload",
    "TurnCancelledPayload",
    "TurnEndedPayload",
    "TurnInterruptedPayload",
    "TurnStartedPayload",
    "UnbookmarkPayload",
    "UnknownPayload",
    "UsagePayload",
    "UserMessagePayload",
    "event_kind",
    "event_type_of",
    "known_model",
    "payload_model",
    "read_payload",
    "register_event_type",
    "registered_types",
    "validate_payload",
]

EventKind = Literal["user", "assistant", "system", "tool_boundary"]
"""What an event is in the conversation; the type registry fixes it per event type."""

DeliveryMode = Literal["normal", "steer", "follow_up"]
"""How a user message reached the model: at once, into a running turn, or after it."""
SteerOrFollowUp = Literal["steer", "follow_up"]
"""How a person's message for a running agent is taken: into the turn, or after it (the
modes a person, a command or a thread's default chooses between)."""

_TYPE_NAME = re.compile(r"[a-z][a-z0-9_]*(?:[.-][a-z0-9_]+)*")
_MAX_TYPE_LENGTH = 100  # the width of session_events.type


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UserMessagePayload(_Payload):
    """A user's message. ``requested_mode`` is what the user asked for; the
    event's ``delivery_mode`` is how it was delivered (a steer while idle is
    delivered ``normal``). ``queue_item_id`` names the queued item it delivers."""

    text: str
    requested_mode: DeliveryMode = "normal"
    author_id: str | None = None
    queue_item_id: str | None = None
    author_name: str | None = None
    """The author's display name when the message was written (the model reads it when
    more than one person writes in the session)."""
    attachments: list[AttachmentRecord] = []
    """Files that reached the model with it (see :mod:`core.attachments`)."""
    inbound_id: str | None = None
    """The channel's id for the message it came from (see :mod:`core.inbox`): a message
    already in the log is never given to the session a second time."""


class ToolCallRecord(_Payload):
    """One tool call the model asked for; ``arguments`` is the provider's JSON text."""

    id: str
    name: str
    arguments: str


class AssistantMessagePayload(_Payload):
    turn_id: str
    text: str = ""
    tool_calls: list[ToolCallRecord] = []
    finish_reason: str | None = None


class ToolResultPayload(_Payload):
    """A tool's answer; ``skipped`` marks the synthetic result of a call a steer superseded."""

    turn_id: str
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    skipped: bool = False


class TurnStartedPayload(_Payload):
    turn_id: str
    trigger: DeliveryMode


class TurnEndedPayload(_Payload):
    """The end of a turn. ``rejected``: a person chose an external agent's reject option
    and the agent stopped there (``by_user_id``/``by_name`` who, ``option`` its label);
    not a failure."""

    turn_id: str
    reason: Literal["completed", "max_steps", "budget", "error", "rejected"]
    steps: int
    error: str | None = None
    by_user_id: str | None = None
    by_name: str | None = None
    option: str | None = None


class TurnCancelledPayload(_Payload):
    """A cancel; ``dropped_item_ids`` are the queued messages it discarded.

    ``by_user_id``/``by_name``: the person who cancelled (``/cancel``); None for a
    cancel of the bot's own, whose ``reason`` says why (``timed_out``, ``stopping``;
    see :mod:`core.agent.endings`). Older logs have neither: a cancel, by someone."""

    turn_id: str | None
    dropped_item_ids: list[str] = []
    by_user_id: str | None = None
    by_name: str | None = None
    reason: str | None = None


class TurnInterruptedPayload(_Payload):
    """Written at rehydration for a turn that was running when the process died."""

    turn_id: str


class SteerInterruptionPayload(_Payload):
    turn_id: str
    step: int
    skipped_tool_call_ids: list[str]
    steering_item_ids: list[str]


class MessageQueuedPayload(_Payload):
    item_id: str
    mode: SteerOrFollowUp
    text: str
    author_id: str | None = None
    author_name: str | None = None
    attachments: list[AttachmentRecord] = []
    inbound_id: str | None = None
    """As for :class:`UserMessagePayload`."""


class QueueMovedPayload(_Payload):
    """Steering left over at the end of a turn becomes follow-up, never stranded."""

    item_ids: list[str]
    from_mode: Literal["steer"]
    to_mode: Literal["follow_up"]


class QueueClearedPayload(_Payload):
    item_ids: list[str]
    reason: str


class UsagePayload(_Payload):
    """One model call's tokens; ``estimated`` when the server reported none and the bot
    counted (see :mod:`core.agent.usage`); ``cost_usd`` reported, or from the prices."""

    turn_id: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None = None
    cached_tokens: int = 0
    estimated: bool = False
    model: str | None = None
    purpose: Literal["turn", "compaction"] = "turn"
    """``compaction``: the call that wrote a summary (it says nothing of the context)."""


class BudgetStopPayload(_Payload):
    turn_id: str
    limit: str
    used: float


class HeadMovedPayload(_Payload):
    branch_id: str
    node_id: str | None
    from_node_id: str | None


class BranchCreatedPayload(_Payload):
    branch_id: str
    from_node_id: str | None


class BookmarkPayload(_Payload):
    node_id: str
    label: str


class UnbookmarkPayload(_Payload):
    label: str


class ApprovalOption(_Payload):
    """One answer an external agent offers for its permission request (its own words)."""

    option_id: str
    label: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class ApprovalRequestedPayload(_Payload):
    """A tool call under ``require_approval`` waits for a person; ``step`` lets a restarted
    process continue the turn at that call. ``options``: an external agent's own answers
    to choose from (none: Allow, Allow for the session, Deny)."""

    turn_id: str
    step: int
    tool_call_id: str
    name: str
    arguments: str
    options: list[ApprovalOption] = []


ApprovalDecision = Literal["allow", "allow_session", "deny", "timeout", "withdrawn"]


class ApprovalDecidedPayload(_Payload):
    """What became of an approval request, who decided (a user id, or None for the bot:
    a timeout, a steer, a restart) and, for a withdrawal, why. A withdrawal by a
    person's ``/cancel`` (``reason`` ``cancel``) names that person."""

    turn_id: str
    tool_call_id: str
    name: str
    decision: ApprovalDecision
    by_user_id: str | None = None
    by_name: str | None = None
    reason: str | None = None
    option_id: str | None = None
    """The external agent's option the person chose (its requests offer their own)."""


class CompactionPayload(_Payload):
    """The conversation before ``first_kept_node_id`` in a summary: what the model reads
    from now on in its place. The events themselves stay in the log."""

    summary: str
    first_kept_node_id: str | None
    tokens_before: int
    tokens_after: int
    reason: Literal["threshold", "overflow", "command"] = "threshold"
    instructions: str | None = None
    model: str | None = None


class ModelChangedPayload(_Payload):
    """``/model``: the session's next turns use ``model`` on provider ``provider``."""

    provider: str
    model: str
    by_user_id: str | None = None


class UnknownPayload(_Payload):
    """What :attr:`~core.sessions.events.SessionEvent.data` is for a stored payload no
    model reads: an event of a type nothing registered in this process (a plugin's that is
    not loaded, a later version's), or one that no longer fits its model (a field that
    became required). The event still loads and its ``payload`` keeps the stored JSON; a
    reader matching on models passes it by like any event it does not handle. Registered
    for no type, so it can never be appended."""

    type: str
    """The event's type."""
    reason: str
    """Why no model reads it, in words (for a log line or an export)."""


_REGISTRY: dict[str, tuple[EventKind, type[BaseModel]]] = {}
_TYPES_OF: dict[type[BaseModel], list[str]] = {}
"""The types registered for each model: :func:`event_type_of` runs at every append."""


def register_event_type(type: str, kind: EventKind, model: type[BaseModel]) -> None:
    """Make ``type`` appendable, as events of ``kind`` whose payload fits ``model``.

    Registering the same type again with the same kind and model does nothing
    (modules may be imported twice in tests); anything else is a clash between
    two features and raises.

    Raises:
        SessionError: the name is malformed, or the type is taken by another model or kind.
    """
    if len(type) > _MAX_TYPE_LENGTH or not _TYPE_NAME.fullmatch(type):
        raise SessionError(
            f"event type {type!r} is not a valid name; use lower-case words joined by "
            f"'_', '.' or '-' (at most {_MAX_TYPE_LENGTH} characters), like 'artifact.plan'",
            ref=type,
        )
    if kind not in ("user", "assistant", "system", "tool_boundary"):
        raise SessionError(f"event type {type!r} has unknown kind {kind!r}", ref=type)
    known = _REGISTRY.get(type)
    if known is not None and known != (kind, model):
        raise SessionError(
            f"event type {type!r} is already registered as {known[0]} with "
            f"{known[1].__qualname__}; pick another type name",
            ref=type,
        )
    if known is None:
        _TYPES_OF.setdefault(model, []).append(type)
    _REGISTRY[type] = (kind, model)


def _lookup(type: str) -> tuple[EventKind, type[BaseModel]]:
    try:
        return _REGISTRY[type]
    except KeyError:
        raise SessionError(
            f"unknown event type {type!r}; register it with register_event_type() "
            f"first (known: {', '.join(sorted(_REGISTRY))})",
            ref=type,
        ) from None


def event_type_of(payload: BaseModel) -> str:
    """The one event type whose model ``payload`` is: the name lives with the shape.

    Raises:
        SessionError: the model is registered for no type, or for several (then
            the caller must name the type).
    """
    names = _TYPES_OF.get(type(payload), ())
    if len(names) != 1:
        found = "no event type" if not names else f"several event types ({', '.join(names)})"
        raise SessionError(
            f"{type(payload).__name__} is the payload model of {found}; name the type",
            ref=type(payload).__name__,
        )
    return names[0]


def payload_model(type: str) -> type[BaseModel]:
    """The payload model of ``type``; :class:`SessionError` if it is not registered."""
    return _lookup(type)[1]


def event_kind(type: str) -> EventKind:
    """The kind every event of ``type`` has; :class:`SessionError` if it is not registered."""
    return _lookup(type)[0]


def registered_types() -> dict[str, EventKind]:
    """Every registered type with its kind (a copy)."""
    return {name: kind for name, (kind, _) in _REGISTRY.items()}


def validate_payload(type: str, payload: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """Check ``payload`` against the model of ``type``; return it as stored (JSON data).

    Raises:
        SessionError: unknown type, or a payload that does not fit; the message lists the fields.
    """
    model = payload_model(type)
    try:
        if isinstance(payload, model):
            value = payload
        elif isinstance(payload, BaseModel):
            value = model.model_validate(payload.model_dump())
        else:
            value = model.model_validate(payload)
    except ValidationError as exc:
        raise SessionError(
            f"payload of a {type!r} event does not fit {model.__name__}: {_problems(exc)}",
            ref=type,
        ) from exc
    return value.model_dump(mode="json")


def known_model(type: str) -> type[BaseModel] | None:
    """The payload model of ``type``, or None where it is not registered (never raises)."""
    known = _REGISTRY.get(type)
    return known[1] if known is not None else None


def read_payload(type: str, payload: Mapping[str, Any]) -> BaseModel:
    """A stored payload of a ``type`` event as its model; see the module doc.

    Keys the model does not know are ignored (at any depth): the payload was validated
    when it was written, and a key a later version dropped must not hide the rest.
    Never raises: an :class:`UnknownPayload` says why nothing reads it.
    """
    model = known_model(type)
    if model is None:
        return UnknownPayload(type=type, reason=f"no payload model is registered for {type!r}")
    try:
        return model.model_validate(payload, extra="ignore")
    except ValidationError as exc:
        return UnknownPayload(
            type=type, reason=f"the payload does not fit {model.__name__}: {_problems(exc)}"
        )


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or '<payload>'}: {error['msg']}"
        for error in exc.errors(include_url=False)
    )


_BUILT_INS: tuple[tuple[str, EventKind, type[BaseModel]], ...] = (
    ("user_message", "user", UserMessagePayload),
    ("assistant_message", "assistant", AssistantMessagePayload),
    ("tool_result", "tool_boundary", ToolResultPayload),
    ("turn_started", "system", TurnStartedPayload),
    ("turn_ended", "system", TurnEndedPayload),
    ("turn_cancelled", "system", TurnCancelledPayload),
    ("turn_interrupted", "system", TurnInterruptedPayload),
    ("steer_interruption", "system", SteerInterruptionPayload),
    ("message_queued", "system", MessageQueuedPayload),
    ("queue_moved", "system", QueueMovedPayload),
    ("queue_cleared", "system", QueueClearedPayload),
    ("usage", "system", UsagePayload),
    ("budget_stop", "system", BudgetStopPayload),
    ("head_moved", "system", HeadMovedPayload),
    ("branch_created", "system", BranchCreatedPayload),
    ("bookmark", "system", BookmarkPayload),
    ("unbookmark", "system", UnbookmarkPayload),
    ("approval.requested", "system", ApprovalRequestedPayload),
    ("approval.decided", "system", ApprovalDecidedPayload),
    ("model.changed", "system", ModelChangedPayload),
    ("compaction", "assistant", CompactionPayload),
)
for _name, _kind, _model in _BUILT_INS:
    register_event_type(_name, _kind, _model)
