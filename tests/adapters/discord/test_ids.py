"""Ids at the adapter edge: prefixes stripped, garbage refused."""

from __future__ import annotations

import pytest

from adapters.discord.ids import conversation_for, snowflake
from core.errors import BindingError

ID = 1234567890123456789


class TestSnowflake:
    @pytest.mark.parametrize(
        "value",
        [ID, str(ID), f"channel:{ID}", f"thread:{ID}", f"discord:channel:{ID}", f"<#{ID}>"],
    )
    def test_prefixes_are_stripped(self, value: str | int) -> None:
        """Every spelling of an id reaches the API as the bare number."""
        assert snowflake(value) == ID

    @pytest.mark.parametrize("value", ["", "general", "channel:", "12", "slack:C0123"])
    def test_not_an_id_is_refused(self, value: str) -> None:
        """A value that is not a snowflake is an error naming the value."""
        with pytest.raises(BindingError, match="is not a Discord id"):
            snowflake(value)


def test_conversation_for_thread() -> None:
    """A thread's ref carries its parent channel, ids as bare strings."""
    ref = conversation_for("main", f"thread:{ID}", parent_id=f"channel:{ID - 1}")
    assert (ref.channel, ref.account_id, ref.conversation_id, ref.parent_conversation_id) == (
        "discord",
        "main",
        str(ID),
        str(ID - 1),
    )
