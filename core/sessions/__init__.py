"""Session event trees: the append-only log of a session, its branches and queues.

- :mod:`~core.sessions.events`: the event value and its kinds.
- :mod:`~core.sessions.payloads`: the registry of event types and their payloads.
- :mod:`~core.sessions.tree`: :class:`SessionTree`, the pure in-memory projection.
- :mod:`~core.sessions.log`: :class:`SessionLog`, durable appends and navigation.
- :mod:`~core.sessions.export`: the whole tree as JSON or one HTML page.
"""

from __future__ import annotations

from core.sessions.events import ADVANCING_KINDS, DeliveryMode, EventKind, SessionEvent
from core.sessions.export import export_html, export_json, import_into, import_json
from core.sessions.log import AppendItem, SessionLog
from core.sessions.payloads import (
    AssistantMessagePayload,
    ToolCallRecord,
    ToolResultPayload,
    UserMessagePayload,
    event_kind,
    payload_model,
    register_event_type,
    registered_types,
)
from core.sessions.snapshot import (
    QueuedMessage,
    SessionSnapshot,
    SteerInterruption,
    TreeNode,
    UsageTotals,
)
from core.sessions.tree import MAIN_BRANCH, SessionTree

__all__ = [
    "ADVANCING_KINDS",
    "MAIN_BRANCH",
    "AppendItem",
    "AssistantMessagePayload",
    "DeliveryMode",
    "EventKind",
    "QueuedMessage",
    "SessionEvent",
    "SessionLog",
    "SessionSnapshot",
    "SessionTree",
    "SteerInterruption",
    "ToolCallRecord",
    "ToolResultPayload",
    "TreeNode",
    "UsageTotals",
    "UserMessagePayload",
    "event_kind",
    "export_html",
    "export_json",
    "import_into",
    "import_json",
    "payload_model",
    "register_event_type",
    "registered_types",
]
