"""Focus: an existing session bound to one more conversation, speaking there as it does
elsewhere.

``/focus`` in a thread names a session (its key, or the persona a live binding
of it speaks under) and binds the thread to it, for one of the session's owners
or an administrator only: a conversation bound to a session shows it, so binding
someone else's would hand it over. Two calls, with the channel's acknowledgement
between them: :meth:`Focus.find` (which session, and whether the person may),
then :meth:`Focus.focus`. The new binding carries the persona the session
already has (the first of its bindings), where it is (its scope), and the
message from which it reads (``read_after``): what was written in the
conversation before the focus is not the session's to answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.bindings.records import (
    BindingMetadata,
    BindingPersona,
    ConversationRef,
    SessionBindingRecord,
)
from core.bindings.service import SessionBindingService
from core.config import DEFAULT_DISPLAY_NAME
from core.sessions import repository as sessions_repository
from core.store.database import Database

__all__ = ["Focus", "Found", "NoSuchSession", "NotOwner", "OwnerRule", "persona_name"]


class OwnerRule(Protocol):
    """Who may change a session (:class:`core.subagents.owners.Owners`)."""

    async def may_change(self, session_key: str, user_id: str, /, *, admin: bool) -> bool: ...


@dataclass(frozen=True, slots=True)
class Found:
    """The session a name means, which the person may bind."""

    session_key: str


@dataclass(frozen=True, slots=True)
class NoSuchSession:
    """No session has that key, nor does one live binding's persona have that name."""


@dataclass(frozen=True, slots=True)
class NotOwner:
    """The session exists, but the person is neither one of its owners nor an admin."""


def persona_name(record: SessionBindingRecord) -> str:
    """The name a binding's session speaks under there."""
    return record.meta.persona.name or DEFAULT_DISPLAY_NAME


class Focus:
    """Which session a name means, and its binding to one more conversation.

    Args:
        bindings: the live bindings (a persona's session, the new binding).
        database: the store (whether a session key names a session with a log).
        owners: who may change (and so bind) a session.
    """

    def __init__(
        self, bindings: SessionBindingService, database: Database, owners: OwnerRule
    ) -> None:
        self._bindings = bindings
        self._db = database
        self._owners = owners

    async def find(
        self, target: str, /, *, account_id: str, user_id: str, admin: bool
    ) -> Found | NoSuchSession | NotOwner:
        """The session ``target`` means, if ``user_id`` may bind it (``admin``: they are an
        administrator where the conversation is)."""
        session_key = await self._session_named(target.strip(), account_id)
        if session_key is None:
            return NoSuchSession()
        if not await self._owners.may_change(session_key, user_id, admin=admin):
            return NotOwner()
        return Found(session_key)

    async def _session_named(self, target: str, account_id: str) -> str | None:
        """``target`` as a session key (one with a log), or the session of the one live
        binding of this account whose persona is called ``target``; None otherwise."""
        if target:
            logged: bool = await self._db.run(sessions_repository.has_events, target)
            if logged:
                return target
        named = {
            r.target_session_key
            for r in self._bindings.live()
            if r.conversation.account_id == account_id
            and persona_name(r).casefold() == target.casefold()
        }
        return named.pop() if len(named) == 1 else None

    async def focus(
        self,
        found: Found,
        conversation: ConversationRef,
        /,
        *,
        scope: str | None,
        by: str,
        read_after: str,
    ) -> SessionBindingRecord:
        """Bind ``conversation`` to the session found, under the persona it already has
        (its name and avatar, as its first binding shows them).

        Raises:
            ConversationAlreadyBound: the conversation is bound already.
            BindingError: the binding could not be made.
        """
        earlier = self._bindings.list_by_session(found.session_key)
        persona = earlier[0].meta.persona if earlier else BindingPersona()
        if not persona.name:
            persona = BindingPersona(name=DEFAULT_DISPLAY_NAME, avatar_url=persona.avatar_url)
        return await self._bindings.bind(
            found.session_key,
            "session",
            conversation,
            metadata=BindingMetadata(persona=persona, read_after=read_after),
            bound_by=by,
            scope=scope,
        )
