"""BindingIndex: the in-memory indexes behind SessionBindingService's reads.

Why it exists: the router resolves bindings on every message, so every read
(by id, by conversation, by session) must be an O(1) dict lookup that never
touches the store. The indexes are rebuilt from the store once, at start-up,
and kept in step with it by the service after each committed change.

Records are frozen values: a change replaces a record in every index, it never
mutates one in place, so a tuple handed out by :meth:`list_by_session` stays a
consistent snapshot.
"""

from __future__ import annotations

from core.bindings.records import ConversationKey, SessionBindingRecord

__all__ = ["BindingIndex"]


class BindingIndex:
    """Live bindings by id, by conversation key and by target session key."""

    __slots__ = ("by_conversation", "by_id", "by_session")

    def __init__(self) -> None:
        self.by_id: dict[str, SessionBindingRecord] = {}
        self.by_conversation: dict[ConversationKey, str] = {}
        # One tuple per session, oldest first: the router reads it with a
        # single dict lookup and no copying.
        self.by_session: dict[str, tuple[SessionBindingRecord, ...]] = {}

    # -- reads -----------------------------------------------------------------

    def get(self, binding_id: str, /) -> SessionBindingRecord | None:
        return self.by_id.get(binding_id)

    def by_conversation_key(self, key: ConversationKey, /) -> SessionBindingRecord | None:
        binding_id = self.by_conversation.get(key)
        return self.by_id.get(binding_id) if binding_id else None

    def __len__(self) -> int:
        return len(self.by_id)

    # -- upkeep ----------------------------------------------------------------

    def rebuild(self, records: list[SessionBindingRecord]) -> None:
        """Replace every index with one built from ``records`` (start-up)."""
        self.by_id = {record.binding_id: record for record in records}
        self.by_conversation = {
            (conv.channel, conv.account_id, conv.conversation_id): record.binding_id
            for record in records
            for conv in (record.conversation,)
        }
        by_session: dict[str, tuple[SessionBindingRecord, ...]] = {}
        for record in records:
            key = record.target_session_key
            earlier = by_session.get(key)
            by_session[key] = (record,) if earlier is None else (*earlier, record)
        self.by_session = by_session

    def add(self, record: SessionBindingRecord) -> None:
        """Index a newly committed binding."""
        self.by_id[record.binding_id] = record
        self.by_conversation[record.conversation.key] = record.binding_id
        key = record.target_session_key
        self.by_session[key] = (*self.by_session.get(key, ()), record)

    def replace(self, record: SessionBindingRecord) -> None:
        """Swap in a new version of an indexed binding, keeping its place."""
        self.by_id[record.binding_id] = record
        key = record.target_session_key
        self.by_session[key] = tuple(
            record if r.binding_id == record.binding_id else r for r in self.by_session.get(key, ())
        )

    def remove(self, record: SessionBindingRecord) -> None:
        """Drop a binding from every index; a binding not indexed is ignored."""
        self.by_id.pop(record.binding_id, None)
        if self.by_conversation.get(record.conversation.key) == record.binding_id:
            del self.by_conversation[record.conversation.key]
        key = record.target_session_key
        remaining = tuple(
            r for r in self.by_session.get(key, ()) if r.binding_id != record.binding_id
        )
        if remaining:
            self.by_session[key] = remaining
        else:
            self.by_session.pop(key, None)
