"""BoundDeliveryRouter: where a completion goes, decided apart from what it says.

The router only chooses a destination; rendering and sending are later,
separate steps (a routing invariant). It reads bindings through
``service.list_by_session`` alone, and it re-checks every binding it is
given: an ended, ending or expired binding never resolves, whatever the
service returned.

Resolution order and reason codes (SPEC.md):

1. no target session key                      -> fallback ``missing-target-session``
2. no live binding for the session            -> fallback ``no-active-binding``
3. no requester: exactly one live binding     -> bound    ``single-active-binding``
                 several                      -> fallback ``ambiguous-without-requester``
4. requester lacks channel/account/conversation -> fallback ``invalid-requester``
5. on the requester's channel + account: the binding of the requester's own
   conversation, else one whose parent is the requester (the most recently
   active if several), else the only binding on that channel + account
                                              -> bound    ``requester-match``
6. exactly one live binding elsewhere and not fail_closed
                                              -> bound    ``single-active-binding-fallback``
7. otherwise                                  -> fallback ``no-requester-match``
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal, NamedTuple, Protocol

from core import log_events
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.clock import Clock, SystemClock
from core.log_events import RouteMode
from core.logging import get_logger, is_enabled

__all__ = [
    "BindingLookup",
    "BoundDeliveryRouter",
    "DeliveryResolution",
    "ResolutionReason",
    "RouteMode",
]

ResolutionReason = Literal[
    "missing-target-session",
    "no-active-binding",
    "single-active-binding",
    "ambiguous-without-requester",
    "invalid-requester",
    "requester-match",
    "single-active-binding-fallback",
    "no-requester-match",
]

_log = get_logger("core.routing")

_UNBOUND_REASONS: frozenset[ResolutionReason] = frozenset(
    {"missing-target-session", "no-active-binding"}
)
"""Fallback reasons given only when the session has no live binding at all."""


class BindingLookup(Protocol):
    """The one read the router needs from a binding service."""

    def list_by_session(self, target_session_key: str, /) -> Sequence[SessionBindingRecord]: ...


class DeliveryResolution(NamedTuple):
    """The router's answer: a binding to deliver to (mode ``bound``) or none (``fallback``).

    An immutable named tuple rather than a pydantic model: it is built once per
    resolution on the hot path (at a third of a frozen dataclass's cost) and
    never validated from outside input.
    """

    binding: SessionBindingRecord | None
    mode: RouteMode
    reason: ResolutionReason

    @property
    def session_bound(self) -> bool:
        """Whether the session still has a live binding, even one this delivery may not use.

        A fallback for want of a matching requester leaves the session bound
        elsewhere; one for want of any live binding does not. What the fallback
        says about the session's thread must follow this, not the spawn mode.
        """
        return self.binding is not None or self.reason not in _UNBOUND_REASONS


class BoundDeliveryRouter:
    """Resolves the destination of a session's completion; pure apart from one log line."""

    def __init__(self, service: BindingLookup, *, clock: Clock | None = None) -> None:
        self._service = service
        self._clock: Clock = clock or SystemClock()

    def resolve_destination(
        self,
        *,
        target_session_key: str | None,
        requester: ConversationRef | None = None,
        fail_closed: bool = True,
        event_kind: Literal["task_completion"] = "task_completion",
        scope: str | None = None,
    ) -> DeliveryResolution:
        """Choose where a completion of ``target_session_key`` must be delivered.

        ``fail_closed=True`` forbids the last-resort jump to a single binding on
        another channel or account; the caller then delivers to the requester.
        ``scope`` (the guild the session was asked in) only goes into the log line,
        for a fallback, which has no binding to take its guild from.
        """
        resolution = self._resolve(target_session_key, requester, fail_closed)
        if is_enabled(logging.INFO):
            _log_resolution(
                resolution, event_kind, target_session_key, requester, fail_closed, scope
            )
        return resolution

    def _resolve(
        self,
        target_session_key: str | None,
        requester: ConversationRef | None,
        fail_closed: bool,
    ) -> DeliveryResolution:
        if not target_session_key:
            return DeliveryResolution(None, "fallback", "missing-target-session")
        live = self._live(self._service.list_by_session(target_session_key))
        if not live:
            return DeliveryResolution(None, "fallback", "no-active-binding")
        if requester is None:
            if len(live) == 1:
                return DeliveryResolution(live[0], "bound", "single-active-binding")
            return DeliveryResolution(None, "fallback", "ambiguous-without-requester")
        if not (requester.channel and requester.account_id and requester.conversation_id):
            return DeliveryResolution(None, "fallback", "invalid-requester")

        match = _match_requester(live, requester)
        if match is not None:
            return DeliveryResolution(match, "bound", "requester-match")
        if len(live) == 1 and not fail_closed:
            return DeliveryResolution(live[0], "bound", "single-active-binding-fallback")
        return DeliveryResolution(None, "fallback", "no-requester-match")

    def _live(self, bindings: Sequence[SessionBindingRecord]) -> Sequence[SessionBindingRecord]:
        """Active, unexpired bindings; the clock is read only if a deadline exists."""
        for binding in bindings:
            if binding.status != "active" or binding.expires_at is not None:
                break
        else:
            return bindings
        now = self._clock.now()
        return [b for b in bindings if b.is_live(now)]


def _match_requester(
    live: Sequence[SessionBindingRecord], requester: ConversationRef
) -> SessionBindingRecord | None:
    """Exact conversation, then a child of the requester, then the only one on its account.

    Several children of the requester (one session bound in two threads of the
    same channel) resolve to the most recently active one rather than to the
    requester: delivering to the parent there would hide a bound destination.
    """
    channel, account, wanted = requester.channel, requester.account_id, requester.conversation_id
    same_account: list[SessionBindingRecord] = []
    children: list[SessionBindingRecord] = []
    for binding in live:
        conv = binding.conversation
        if conv.channel != channel or conv.account_id != account:
            continue
        if conv.conversation_id == wanted:
            return binding
        same_account.append(binding)
        if conv.parent_conversation_id == wanted:
            children.append(binding)
    if children:
        return children[0] if len(children) == 1 else max(children, key=_recency)
    if len(same_account) == 1:
        return same_account[0]
    return None


def _recency(binding: SessionBindingRecord) -> tuple[object, ...]:
    return (binding.last_activity_at or binding.bound_at, binding.bound_at, binding.binding_id)


def _log_resolution(
    resolution: DeliveryResolution,
    event_kind: str,
    target_session_key: str | None,
    requester: ConversationRef | None,
    fail_closed: bool,
    scope: str | None,
) -> None:
    binding = resolution.binding
    where = binding.conversation if binding else requester
    guild = binding.scope if binding else scope
    log_events.emit(
        log_events.RoutingResolved(
            event_kind=event_kind,
            target_session_key=target_session_key,
            mode=resolution.mode,
            reason=resolution.reason,
            fail_closed=fail_closed,
            binding_id=binding.binding_id if binding else None,
            channel=where.channel if where else None,
            account=where.account_id if where else None,
            conversation_id=binding.conversation.conversation_id if binding else None,
            requester_conversation_id=requester.conversation_id if requester else None,
            guild=str(guild) if guild is not None else None,
        ),
        _log,
    )
