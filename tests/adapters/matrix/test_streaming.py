"""adapters.matrix.streaming's events without a homeserver: their shape and their size.

The stream against a real Synapse is in tests/matrix/test_streaming.py.
"""

from __future__ import annotations

import json

from adapters.matrix.streaming import PART_LIMIT, edit_content, message_content

EVENT_LIMIT = 65_536
"""The most bytes a Matrix event may hold (the spec's limit, envelope included)."""
ENVELOPE = 2_000
"""Generous room for what the homeserver adds around the content (ids, keys, hashes)."""


class TestSize:
    def test_the_worst_edit_of_a_full_part_fits_in_an_event(self) -> None:
        """A full part of the costliest characters, as an edit under a persona, stays
        within an event's 65,536 bytes with room to spare for the envelope."""
        for worst in ("\x01", "&", "𝄞", "\n"):
            new = message_content(worst * PART_LIMIT, name="A Rather Long Persona Name")
            edit = edit_content("$" + "e" * 43, new)
            size = len(json.dumps(edit, ensure_ascii=False).encode())
            assert size + ENVELOPE < EVENT_LIMIT, worst


class TestContent:
    def test_the_persona_speaks_first_in_bold(self) -> None:
        """Without an appservice the persona's name opens the message, bold in HTML, and
        is the per-message profile's display name."""
        content = message_content("1 < 2\nyes", name="Scout & Co")
        assert content["body"] == "**Scout & Co**\n1 < 2\nyes"
        assert content["formatted_body"] == "<strong>Scout &amp; Co</strong><br>1 &lt; 2<br>yes"
        assert content["com.beeper.per_message_profile"]["displayname"] == "Scout & Co"

    def test_an_edit_replaces_its_message(self) -> None:
        """An edit is an m.replace of the first event, the new text in m.new_content."""
        edit = edit_content("$first", message_content("new"))
        assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$first"}
        assert edit["m.new_content"]["body"] == "new"
        assert edit["body"] == "* new"
