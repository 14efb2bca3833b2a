"""A persistent button's custom id: written once, parsed by the template made from it."""

from __future__ import annotations

import re

import pytest

from bot.handoffs.ui import BRIEF_ID, HANDOFF_ID, brief_button, handoff_button

HEX = "0123456789abcdef" * 2


class TestButtonId:
    def test_the_id_a_view_sends_is_the_one_its_template_parses(self) -> None:
        """What the button carries comes back from the template's named groups."""
        sent = handoff_button("reject", HEX).custom_id
        assert sent == f"tb:handoff:reject:{HEX}"
        match = re.fullmatch(HANDOFF_ID.template, sent or "")
        assert match is not None
        assert match.groupdict() == {"action": "reject", "handoff_id": HEX}
        brief = re.fullmatch(BRIEF_ID.template, brief_button(HEX).custom_id or "")
        assert brief is not None
        assert brief.groupdict() == {"binding_id": HEX}

    def test_the_templates_are_the_ones_restarted_buttons_carry(self) -> None:
        """Buttons sent before this release still parse: the ids did not change."""
        assert HANDOFF_ID.template == (
            r"tb:handoff:(?P<action>accept|reject):(?P<handoff_id>[0-9a-f]{32})"
        )
        assert BRIEF_ID.template == r"tb:brief:(?P<binding_id>[0-9a-f]{32})"

    def test_a_value_its_template_would_not_parse_is_refused(self) -> None:
        """A button no press could be understood from is never sent."""
        with pytest.raises(ValueError, match="not a handoff button's id"):
            HANDOFF_ID.format(action="maybe", handoff_id=HEX)
