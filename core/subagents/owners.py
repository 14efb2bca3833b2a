"""Who may change a session: one of its owners, or an administrator of where it is.

Every command and button that changes a session (steer, cancel, rewind, a
handoff's Accept, an approval's Allow …) asks :meth:`Owners.may_change`, so the
rule lives in one place. Reading stays open: a bound conversation is a
conversation, and whoever is in it sees it anyway.

The owners of a session, from what the store keeps:

* who started it: the subagent record's ``requested_by`` (a person's spawn; a
  child spawned by a model inherits its parent's), kept after every
  conversation of the session is let go, so the owner can bind it again;
* who bound one of its live conversations: a binding's ``bound_by``. Only an
  owner or an administrator may bind, so this hands a session to nobody new; it
  covers sessions that are not subagents.

A session with neither is for administrators only. Whether the person is an
administrator is the channel's to say (Discord's server permission): the
caller passes it in.
"""

from __future__ import annotations

from typing import Final

from core.bindings.service import SessionBindingService
from core.subagents.service import SubagentService

__all__ = ["NOT_OWNER", "Owners"]

NOT_OWNER: Final = "Only the person who started this session, or an administrator, can do that."
"""The one refusal every owner-only command and button answers with, on every platform."""


class Owners:
    """The owner rule over the live bindings and the subagent records."""

    def __init__(self, bindings: SessionBindingService, subagents: SubagentService) -> None:
        self._bindings = bindings
        self._subagents = subagents

    async def may_change(self, session_key: str, user_id: str, /, *, admin: bool) -> bool:
        """Whether ``user_id`` may change ``session_key``: an owner, or ``admin``.

        Memory first (the administrator flag, then the live bindings); the store is
        read only for a person who is neither, so a chat's answer stays well in time.
        """
        if admin:
            return True
        if any(r.bound_by == user_id for r in self._bindings.list_by_session(session_key)):
            return True
        started = await self._subagents.get(session_key)
        return started is not None and started.requested_by == user_id
