"""Encrypted rooms: the bot cannot read them, and says so once in each.

The bot has no end-to-end encryption, so an encrypted room's messages reach it as
``m.room.encrypted`` events, which nothing here reads: no command is answered and no
message goes to a session. A room that shows its ``m.room.encryption`` state in a
sync batch (the first sync, a join, or encryption switched on) is told once, as a
plain ``m.notice``: before telling, the bot's own recent messages there are looked
through for the notice, so neither a repeated batch nor a restart says it twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from adapters.matrix.completions import MatrixCompletionSink
from adapters.matrix.ids import room_of
from core.errors import DeliveryError
from core.logging import get_logger

__all__ = ["ENCRYPTED_TEXT", "EncryptedRooms", "is_encrypted"]

_log = get_logger("adapters.matrix")

ENCRYPTED_TEXT: Final = (
    "🔒 This room is encrypted, and the bot cannot read encrypted rooms: nothing written "
    "here reaches its agents, and its commands are not answered here. Use a room "
    "without encryption."
)


def is_encrypted(room: Mapping[str, Any]) -> bool:
    """Whether a joined room's part of a batch carries its ``m.room.encryption`` state."""
    for section in ("state", "timeline"):
        for event in (room.get(section) or {}).get("events") or ():
            if event.get("type") == "m.room.encryption" and event.get("state_key") == "":
                return True
    return False


class EncryptedRooms:
    """One account's encrypted rooms, each told once that the bot cannot read it."""

    def __init__(self, sink: MatrixCompletionSink) -> None:
        self._sink = sink
        self.told: set[str] = set()
        """Rooms known to be told (by this process, or found told before)."""

    async def check(self, rooms: Mapping[str, Any]) -> None:
        """Tell every encrypted room of the batch that has not been told yet."""
        for room_id, room in (rooms.get("join") or {}).items():
            if room_id in self.told or not is_encrypted(room):
                continue
            try:
                if not await self._told_before(room_id):
                    ref = room_of(self._sink.account_id, room_id)
                    await self._sink.send(ref, ENCRYPTED_TEXT, notice=True)
                    _log.info("matrix.encrypted_room", room_id=room_id)
            except DeliveryError as exc:
                _log.warning("matrix.encrypted_notice_failed", room_id=room_id, error=str(exc))
                continue
            self.told.add(room_id)

    async def _told_before(self, room_id: str) -> bool:
        return any(
            (event.get("content") or {}).get("body") == ENCRYPTED_TEXT
            for event in await self._sink.own_messages(room_id)
        )
