"""A whole session tree out of the store and back: JSON for tools, HTML for people.

The JSON export carries every event (conversation and system) plus the
derived state (head, branches, bookmarks) as a check: importing replays the
events and refuses a file whose declared state the replay does not reproduce,
so a hand-edited export cannot smuggle in a head that the log never moved to.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

from core.errors import SessionError
from core.sessions._html import render_html
from core.sessions.events import SessionEvent
from core.sessions.log import SessionLog
from core.sessions.payloads import event_kind, validate_payload
from core.sessions.tree import SessionTree

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "export_html",
    "export_json",
    "import_into",
    "import_json",
]

EXPORT_FORMAT: Final = "threadbound.session-tree"
EXPORT_VERSION: Final = 1

_EVENTS = TypeAdapter(list[SessionEvent])

# Payload fields of built-in types that hold node ids; re-keying an import
# gives every node a new id (node ids are unique across the whole store).
_NODE_REFS: Final[dict[str, tuple[str, ...]]] = {
    "head_moved": ("node_id", "from_node_id"),
    "branch_created": ("from_node_id",),
    "bookmark": ("node_id",),
}


def export_json(tree: SessionTree) -> str:
    """The whole tree as JSON text; :func:`import_json` turns it back into an equal tree."""
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session_key": tree.session_key,
        "active_branch_id": tree.active_branch_id,
        "head_node_id": tree.head_id,
        "branches": tree.branches,
        "bookmarks": tree.bookmarks,
        "events": [event.model_dump(mode="json") for event in tree.events],
    }
    return json.dumps(document, ensure_ascii=False, indent=1)


def export_html(tree: SessionTree) -> str:
    """One self-contained HTML page showing the tree (no network, all content escaped).

    Every artifact (an ``artifact.<type>`` event) is also shown on each node of
    its ``origin``, so a reader sees what was derived from which messages.
    """
    return render_html(tree)


def import_json(text: str) -> SessionTree:
    """Rebuild a tree from :func:`export_json` output, checking every event on the way.

    Raises:
        SessionError: not an export of this format and version, an event that
            does not fit its registered type, or a declared state the replay
            does not reproduce.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionError(f"the session export is not JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise SessionError(f"not a session export: the format must be {EXPORT_FORMAT!r}")
    if document.get("version") != EXPORT_VERSION:
        raise SessionError(
            f"session export version {document.get('version')!r} is not supported; "
            f"this threadbound reads version {EXPORT_VERSION}"
        )
    key = document.get("session_key")
    if not isinstance(key, str) or not key:
        raise SessionError("the session export has no session_key")
    try:
        events = _EVENTS.validate_python(document.get("events"))
    except ValidationError as exc:
        raise SessionError(
            f"the export of session {key!r} has malformed events: {exc.error_count()} errors, "
            f"first: {exc.errors(include_url=False)[0]['msg']}",
            session_key=key,
        ) from exc
    for event in events:
        _check_event(key, event)
    tree = SessionTree.from_events(key, events)
    declared = (
        document.get("active_branch_id"),
        document.get("head_node_id"),
        document.get("branches"),
        document.get("bookmarks"),
    )
    if declared != (tree.active_branch_id, tree.head_id, tree.branches, tree.bookmarks):
        raise SessionError(
            f"the export of session {key!r} declares a head, branches or bookmarks that its "
            "events do not produce; it was edited or is damaged",
            session_key=key,
        )
    return tree


async def import_into(log: SessionLog, text: str, *, session_key: str | None = None) -> SessionTree:
    """Store an exported tree, under its own key or ``session_key``; returns the stored tree.

    Under a new key every node gets a new id (node ids are unique in the
    store), rewritten in ``parent_id`` and in the built-in payloads that name
    nodes. The target session must have no events yet.
    """
    tree = import_json(text)
    if session_key is not None and session_key != tree.session_key:
        tree = _rekeyed(tree, session_key)
    await log.import_tree(tree)
    return tree


def _check_event(key: str, event: SessionEvent) -> None:
    if event.session_key != key:
        raise SessionError(
            f"event seq {event.seq} of the export belongs to {event.session_key!r}, not {key!r}",
            session_key=key,
            ref=event.node_id,
        )
    kind = event_kind(event.type)
    if kind != event.kind:
        raise SessionError(
            f"event seq {event.seq} of the export has kind {event.kind!r}, but {event.type!r} "
            f"events are {kind!r}",
            session_key=key,
            ref=event.node_id,
        )
    if validate_payload(event.type, event.payload) != event.payload:
        raise SessionError(
            f"event seq {event.seq} of the export has a payload that is not in stored form",
            session_key=key,
            ref=event.node_id,
        )
    if (event.type == "user_message") != (event.delivery_mode is not None):
        raise SessionError(
            f"event seq {event.seq} of the export: delivery_mode is set on user messages only",
            session_key=key,
            ref=event.node_id,
        )


def _rekeyed(tree: SessionTree, session_key: str) -> SessionTree:
    new_ids = {event.node_id: uuid.uuid4().hex for event in tree.events}

    def remap(node_id: Any) -> Any:
        return new_ids.get(node_id, node_id) if isinstance(node_id, str) else node_id

    events = []
    for event in tree.events:
        payload = dict(event.payload)
        for name in _NODE_REFS.get(event.type, ()):
            payload[name] = remap(payload.get(name))
        events.append(
            event.model_copy(
                update={
                    "session_key": session_key,
                    "node_id": new_ids[event.node_id],
                    "parent_id": remap(event.parent_id),
                    "payload": payload,
                }
            )
        )
    return SessionTree.from_events(session_key, events)
