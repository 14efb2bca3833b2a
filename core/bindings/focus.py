"""Focus: an existing session bound to one more conversation, speaking there as it does
elsewhere.

``/focus`` in a thread names a session (its key, or the persona a live binding
of it speaks under) and binds the thread to it. The new binding carries the
persona the session already has (the first of its bindings), where it is (its
scope), and the message from which it reads (``read_after``): what was written
in the conversation before the focus is not the session's to answer.
"""

from __future__ import annotations

from core.bindings.records import (
    BindingMetadata,
    BindingPersona,
    ConversationRef,
    SessionBindingRecord,
)
from core.bindings.service import SessionBindingService
from core.config import DEFAULT_DISPLAY_NAME

__all__ = ["find_session", "focus", "persona_name"]


def persona_name(record: SessionBindingRecord) -> str:
    """The name a binding's session speaks under there."""
    return record.meta.persona.name or DEFAULT_DISPLAY_NAME


def find_session(
    bindings: SessionBindingService, known: set[str], target: str, *, account_id: str
) -> str | None:
    """``target`` as a session key (one of ``known``), or the session of the one live
    binding of this account whose persona is called ``target``; None otherwise."""
    if target in known:
        return target
    named = {
        r.target_session_key
        for r in bindings.live()
        if r.conversation.account_id == account_id
        and persona_name(r).casefold() == target.casefold()
    }
    return named.pop() if len(named) == 1 else None


async def focus(
    bindings: SessionBindingService,
    session_key: str,
    conversation: ConversationRef,
    *,
    scope: str | None,
    by: str,
    read_after: str,
) -> SessionBindingRecord:
    """Bind ``conversation`` to the session, under the persona it already has (its name
    and avatar, as its first binding shows them).

    Raises:
        ConversationAlreadyBound: the conversation is bound already.
        BindingError: the binding could not be made.
    """
    earlier = bindings.list_by_session(session_key)
    persona = earlier[0].meta.persona if earlier else BindingPersona()
    if not persona.name:
        persona = BindingPersona(name=DEFAULT_DISPLAY_NAME, avatar_url=persona.avatar_url)
    return await bindings.bind(
        session_key,
        "session",
        conversation,
        metadata=BindingMetadata(persona=persona, read_after=read_after),
        bound_by=by,
        scope=scope,
    )
