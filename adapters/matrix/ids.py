"""Where a Matrix event is, as the core names conversations.

A room is a conversation (its id); a thread in it is one too: the ``m.thread``
relation's root event id, the room as its parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from core.bindings.records import ConversationRef

__all__ = ["CHANNEL", "room_of", "thread_of", "thread_root"]

CHANNEL: Final = "matrix"


def room_of(account_id: str, room_id: str) -> ConversationRef:
    """The room ``room_id``'s main timeline."""
    return ConversationRef(channel=CHANNEL, account_id=account_id, conversation_id=room_id)


def thread_of(account_id: str, room_id: str, root_id: str) -> ConversationRef:
    """The thread on ``root_id`` in ``room_id``."""
    return ConversationRef(
        channel=CHANNEL,
        account_id=account_id,
        conversation_id=root_id,
        parent_conversation_id=room_id,
    )


def thread_root(event: Mapping[str, Any]) -> str | None:
    """The root of the thread ``event`` was written in; None outside a thread."""
    relates = (event.get("content") or {}).get("m.relates_to") or {}
    if relates.get("rel_type") != "m.thread":
        return None
    root = relates.get("event_id")
    return root if isinstance(root, str) else None
