"""Turning requested appends into events and rows, before anything is written.

Pure functions used by :class:`~core.sessions.log.SessionLog`: everything
here runs under the session's lock, before the write is submitted, so the
events it builds are exactly what the commit will store and the tree apply.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

from pydantic import BaseModel

from core.clock import Clock
from core.errors import SessionError
from core.sessions._group_commit import PendingWrite
from core.sessions.events import ADVANCING_KINDS, DeliveryMode, SessionEvent
from core.sessions.payloads import event_kind, event_type_of, validate_payload
from core.sessions.tree import SessionTree

__all__ = [
    "STRUCTURAL_TYPES",
    "AppendItem",
    "as_item",
    "check_delivery_mode",
    "envelope",
    "event_row",
    "prepare_write",
    "projection_rows",
]

AppendItem: TypeAlias = tuple[str, Mapping[str, Any] | BaseModel, DeliveryMode | None]
"""``(type, payload, delivery_mode)``: one event for :meth:`SessionLog.append_many`."""


def as_item(payload: BaseModel, delivery_mode: DeliveryMode | None = None) -> AppendItem:
    """One typed event for :meth:`SessionLog.append_many`: its model names its type."""
    return (event_type_of(payload), payload, delivery_mode)


STRUCTURAL_TYPES: Final = frozenset({"head_moved", "branch_created", "bookmark", "unbookmark"})
"""Written only by continue_from / bookmark / unbookmark, which check their references first."""


def prepare_write(
    tree: SessionTree, items: Sequence[AppendItem], now: datetime, *, internal: bool
) -> PendingWrite:
    """Turn requested appends into the events, rows and projection rows of one write.

    Validates every item (type, payload, delivery mode) before building
    anything, so a bad item anywhere means nothing is written. ``internal``
    admits the structural types that only SessionLog's own operations write.
    No items give a write without events, which is never submitted.
    """
    key = tree.session_key
    if now.tzinfo is None:
        raise SessionError("the clock returned a naive datetime; events need UTC times")
    seq, head, active = tree.last_seq, tree.head_id, tree.active_branch_id
    # Branch rows to write: the first event records the "main" branch, so the
    # projection always lists every branch the replay knows. The active branch's
    # row is not rewritten as its head moves (the head row says where it is, and
    # one upsert less per append is most of a step's store work); it is brought
    # up to date when the session leaves that branch.
    changed: dict[str, str | None] = {active: head} if seq == 0 else {}
    events: list[SessionEvent] = []
    for type_, payload, mode in items:
        if type_ in STRUCTURAL_TYPES and not internal:
            raise SessionError(
                f"{type_!r} events are written by continue_from(), bookmark() and "
                "unbookmark(), which check their references; call those instead",
                session_key=key,
                ref=type_,
            )
        kind = event_kind(type_)
        data = validate_payload(type_, payload)
        check_delivery_mode(key, type_, mode)
        seq += 1
        event = SessionEvent(
            session_key=key,
            node_id=uuid.uuid4().hex,
            parent_id=head,
            seq=seq,
            kind=kind,
            type=type_,
            payload=data,
            delivery_mode=mode,
            created_at=now,
        )
        events.append(event)
        if kind in ADVANCING_KINDS:
            head = event.node_id
            if active in changed:  # written anyway: with its head
                changed[active] = head
        elif type_ == "head_moved":
            if data["branch_id"] != active:
                changed[active] = head  # the branch left behind keeps this head
            active, head = data["branch_id"], data["node_id"]
            if active in changed:
                changed[active] = head
        elif type_ == "branch_created":
            changed[data["branch_id"]] = data["from_node_id"]
    head_row = {
        "session_key": key,
        "active_branch_id": active,
        "head_node_id": head,
        "last_seq": seq,
        "updated_at": now,
    }
    branch_rows = [
        {"session_key": key, "branch_id": branch, "head_node_id": node}
        for branch, node in changed.items()
    ]
    rows = [event_row(event) for event in events]
    return PendingWrite(tree, events, rows, head_row, branch_rows)


def check_delivery_mode(key: str, type_: str, mode: DeliveryMode | None) -> None:
    if type_ == "user_message":
        if mode not in ("normal", "steer", "follow_up"):
            raise SessionError(
                f"a user_message needs delivery_mode 'normal', 'steer' or 'follow_up', "
                f"not {mode!r}",
                session_key=key,
                ref=type_,
            )
    elif mode is not None:
        raise SessionError(
            f"delivery_mode is for user messages only; a {type_!r} event cannot have "
            f"delivery_mode {mode!r}",
            session_key=key,
            ref=type_,
        )


def event_row(event: SessionEvent) -> dict[str, Any]:
    return {
        "session_key": event.session_key,
        "seq": event.seq,
        "node_id": event.node_id,
        "parent_id": event.parent_id,
        "kind": event.kind,
        "type": event.type,
        "payload": event.payload,
        "delivery_mode": event.delivery_mode,
        "created_at": event.created_at,
        "envelope": envelope(event),
    }


def envelope(event: SessionEvent) -> str:
    """The event's JSON text up to its payload: ``{"session_key":...,"payload":``.

    Stored with the row, so a load joins it with the stored payload text and
    ``}`` instead of building each event's JSON in the query (see
    :mod:`core.sessions.repository`); what it parses back is this event.
    """
    dumps = json.dumps
    parent = "null" if event.parent_id is None else dumps(event.parent_id)
    mode = "null" if event.delivery_mode is None else dumps(event.delivery_mode)
    stamp = event.created_at.astimezone(UTC).isoformat()
    return (
        f'{{"session_key":{dumps(event.session_key)},"node_id":{dumps(event.node_id)},'
        f'"parent_id":{parent},"seq":{int(event.seq)},"kind":{dumps(event.kind)},'
        f'"type":{dumps(event.type)},"delivery_mode":{mode},"created_at":"{stamp}",'
        '"payload":'
    )


def projection_rows(
    tree: SessionTree, clock: Clock
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    key = tree.session_key
    if not len(tree):
        return None, []
    head = {
        "session_key": key,
        "active_branch_id": tree.active_branch_id,
        "head_node_id": tree.head_id,
        "last_seq": tree.last_seq,
        "updated_at": clock.now(),
    }
    branches = [
        {"session_key": key, "branch_id": branch, "head_node_id": node}
        for branch, node in tree.branches.items()
    ]
    return head, branches
