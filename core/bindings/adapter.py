"""The port a channel implements so the binding service can act on it.

The service owns records, indexes and persistence; an adapter owns the one
thing a bind needs of the channel: opening a conversation (a Discord thread)
when the caller did not name one. Keeping the two apart is what lets the core
stay free of any channel library.

What a channel says about a binding (the intro, the farewell) is no call of
this port: it reacts to the :class:`~core.bindings.records.BindingStarted` and
:class:`~core.bindings.records.BindingEnded` events, one fact told one way.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from core.bindings.records import ConversationRef
from core.registry import PerAccount

__all__ = ["AdapterRegistry", "ChannelAdapter"]


@runtime_checkable
class ChannelAdapter(Protocol):
    """Opens conversations for one (channel, account)."""

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


class AdapterRegistry(PerAccount[ChannelAdapter]):
    """Exactly one adapter per (channel, account_id); see :class:`core.registry.PerAccount`."""

    def __init__(self) -> None:
        super().__init__("channel adapter")
