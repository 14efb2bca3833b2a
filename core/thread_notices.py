"""A conversation's hello and goodbye: what a bound or released conversation is told.

When a binding starts, its conversation gets the intro; when it ends, the farewell
naming why (:mod:`core.bindings.notices` has the words), except where the end left
nothing to speak in (a deleted thread). Which event earns which notice is the same on
every platform, so it is decided here; each account only says it, as its bot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from core.bindings.notices import farewell, intro
from core.bindings.records import SessionBindingRecord
from core.events import BindingEnded, BindingStarted, DomainEvent
from core.logging import get_logger

__all__ = ["NOWHERE_TO_SAY", "notice_for", "tell_thread"]

_log = get_logger("core.bindings")

NOWHERE_TO_SAY = frozenset({"thread-deleted"})
"""Ends after which the conversation is not there to be told."""


def notice_for(event: DomainEvent) -> tuple[str, SessionBindingRecord, str] | None:
    """What a conversation is told when ``event`` binds or lets it go: ``("intro",
    record, text)`` or ``("farewell", record, text)``; None for anything else, or an
    end that left nowhere to say it."""
    match event:
        case BindingStarted(record=record):
            name = record.meta.persona.name or record.target_session_key
            return "intro", record, intro(record, name)
        case BindingEnded(record=record, reason=reason) if reason not in NOWHERE_TO_SAY:
            return "farewell", record, farewell(record, reason)
        case _:
            return None


async def tell_thread(
    step: str,
    record: SessionBindingRecord,
    text: str,
    say: Callable[[SessionBindingRecord, str], Awaitable[None]],
) -> None:
    """Say a binding's notice with ``say``; a failure is logged and never undoes the
    binding's change (the bind or unbind that published it stands)."""
    try:
        await say(record, text)
    except Exception:
        _log.warning(
            "binding.adapter_failed",
            step=step,
            binding_id=record.binding_id,
            channel=record.conversation.channel,
            account=record.conversation.account_id,
            exc_info=True,
        )
