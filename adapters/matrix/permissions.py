"""Who counts as an administrator in a Matrix room: a power level at or above the account's
``admin_power_level``.

Matrix has no server-wide administrator: a room's ``m.room.power_levels`` state says
who may do what there, so "administrator" is read per room. The rule of who may
change a session (its owners, or an administrator) is core's
(:class:`core.subagents.owners.Owners`); only the administrator half is read here.
The state is read when asked, not cached: a power level changed a second ago counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import RoomID

from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from core.logging import get_logger
from core.subagents.owners import NOT_OWNER
from core.usecases import UseCases

__all__ = ["NOT_OWNER", "is_admin", "may_change", "power_level"]

_log = get_logger("adapters.matrix.permissions")


def power_level(levels: Mapping[str, Any], user_id: str) -> int:
    """``user_id``'s power level under the room's ``m.room.power_levels`` content (the
    spec's defaults where the content is silent)."""
    users = levels.get("users") or {}
    level = users.get(user_id, levels.get("users_default", 0))
    try:
        return int(level)
    except (TypeError, ValueError):
        return 0


async def is_admin(client: Client, room_id: str, user_id: str, *, level: int) -> bool:
    """Whether ``user_id`` is at ``level`` or above in ``room_id``. A room whose power
    levels cannot be read counts nobody as an administrator (logged)."""
    try:
        levels = await client.api.request(
            Method.GET, Path.v3.rooms[RoomID(room_id)].state["m.room.power_levels"]
        )
    except MATRIX_FAILURES as exc:
        _log.warning("matrix.power_levels_unread", room_id=room_id, error=matrix_said(exc))
        return False
    return power_level(levels, user_id) >= level


async def may_change(
    client: Client,
    uses: UseCases,
    session_key: str,
    *,
    room_id: str,
    user_id: str,
    level: int,
) -> bool:
    """Whether ``user_id`` may change ``session_key``: an owner, or an administrator of
    ``room_id``. Owners are asked first, so an owner costs the homeserver nothing."""
    if await uses.owners.may_change(session_key, user_id, admin=False):
        return True
    return await is_admin(client, room_id, user_id, level=level)
