"""The port a channel implements so the binding service can act on it.

The service owns records, indexes and persistence; an adapter owns what
happens in the channel: opening a conversation (a Discord thread) when the
caller did not name one, and the intro / farewell messages. Keeping the two
apart is what lets the core stay free of any channel library.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from core.bindings.records import ConversationRef, SessionBindingRecord
from core.registry import PerAccount

__all__ = ["AdapterRegistry", "ChannelAdapter"]


@runtime_checkable
class ChannelAdapter(Protocol):
    """Channel side effects for one (channel, account)."""

    @property
    def channel(self) -> str: ...

    @property
    def account_id(self) -> str: ...

    async def create_conversation(
        self,
        requested: ConversationRef,
        *,
        target_session_key: str,
        metadata: dict[str, Any],
    ) -> ConversationRef:
        """Open a new conversation under ``requested.parent_conversation_id``.

        Called only when ``requested.conversation_id`` is empty. Returns the ref
        of what was created; raising aborts the bind with nothing recorded.
        """
        ...

    async def on_bound(self, record: SessionBindingRecord) -> None:
        """Announce the binding in the conversation (the intro). Failures are logged, not fatal."""
        ...

    async def on_unbound(self, record: SessionBindingRecord, reason: str) -> None:
        """Say goodbye in the conversation, with the reason. Failures are logged, not fatal."""
        ...


class AdapterRegistry(PerAccount[ChannelAdapter]):
    """Exactly one adapter per (channel, account_id); see :class:`core.registry.PerAccount`."""

    def __init__(self) -> None:
        super().__init__("channel adapter")
