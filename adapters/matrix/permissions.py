"""Who counts as an administrator in a Matrix room: a power level at or above the account's
``admin_power_level``.

Matrix has no server-wide administrator: a room's ``m.room.power_levels`` state says
who may do what there, so "administrator" is read per room. The rule of who may
change a session (its owners, or an administrator) is core's
(:class:`core.subagents.owners.Owners`); only the administrator half is read here.
The state is read when asked, not cached: a power level changed a second ago counts.

From room version 12 on, a room's creators are above every power level and are not
listed in ``users`` (privileged creators): they count as administrators there, read
from the room's ``m.room.create`` event.
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

__all__ = ["NOT_OWNER", "creators", "is_admin", "may_change", "power_level"]

PRIVILEGED_CREATORS_FROM = 12
"""The first numbered room version whose creators outrank every power level."""

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


def creators(create_event: Mapping[str, Any]) -> frozenset[str]:
    """The privileged creators of a room by its ``m.room.create`` event: its sender and
    ``additional_creators``, in a room version that has them (12 on); else none."""
    content = create_event.get("content") or {}
    version = str(content.get("room_version") or "1")
    privileged = version.startswith("org.matrix.hydra.") or (
        version.isdigit() and int(version) >= PRIVILEGED_CREATORS_FROM
    )
    if not privileged:
        return frozenset()
    more = content.get("additional_creators") or []
    return frozenset({str(create_event.get("sender") or ""), *(str(u) for u in more)})


async def is_admin(client: Client, room_id: str, user_id: str, *, level: int) -> bool:
    """Whether ``user_id`` is at ``level`` or above in ``room_id`` (or, from room version
    12 on, one of its creators). A room whose state cannot be read counts nobody as an
    administrator (logged)."""
    state = Path.v3.rooms[RoomID(room_id)].state
    try:
        levels = await client.api.request(Method.GET, state["m.room.power_levels"])
        if power_level(levels, user_id) >= level:
            return True
        create = await client.api.request(
            Method.GET, state["m.room.create"], query_params={"format": "event"}
        )
    except MATRIX_FAILURES as exc:
        _log.warning("matrix.power_levels_unread", room_id=room_id, error=matrix_said(exc))
        return False
    return user_id in creators(create)


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
