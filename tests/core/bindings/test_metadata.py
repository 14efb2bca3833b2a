"""A binding's metadata read through its typed model (``record.meta``)."""

from __future__ import annotations

from tests.fixtures.bindings import binding, conv


class TestBindingMetadata:
    def test_the_keys_the_bot_writes_read_typed(self) -> None:
        """Persona, agent, mode, status line and brief list come back as typed fields."""
        record = binding(
            "agent:1",
            conv("t1", "100"),
            metadata={
                "persona": {"name": "Scout", "avatar_url": "https://example.org/s.png"},
                "agent": "scout",
                "default_mode": "follow_up",
                "status_message_id": "42",
                "brief_prompted": ["scout"],
                "read_after": "7",
            },
        )
        meta = record.meta
        assert (meta.persona.name, meta.persona.avatar_url) == (
            "Scout",
            "https://example.org/s.png",
        )
        assert (meta.agent, meta.default_mode, meta.status_message_id) == (
            "scout",
            "follow_up",
            "42",
        )
        assert meta.brief_prompted == ("scout",)
        assert meta.read_after == "7"

    def test_an_empty_metadata_has_defaults_and_a_callers_own_keys_are_kept(self) -> None:
        record = binding("agent:1", conv("t1", "100"), metadata={"ticket": "T-9"})
        assert record.meta.persona.name is None
        assert record.meta.default_mode is None
        assert record.meta.brief_prompted == ()
        assert record.meta.model_extra == {"ticket": "T-9"}

    def test_a_copy_with_new_metadata_reads_the_new_values(self) -> None:
        """Records are copied, never changed: the typed view follows the copy."""
        record = binding("agent:1", conv("t1", "100"), metadata={"agent": "scout"})
        moved = record.model_copy(update={"metadata": {"agent": "writer"}})
        assert record.meta.agent == "scout"
        assert moved.meta.agent == "writer"
