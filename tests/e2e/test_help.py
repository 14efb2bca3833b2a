"""``/help`` says how a conversation starts, then lists the commands (fake Discord)."""

from __future__ import annotations

from bot.commands.help import DESCRIPTION, help_text
from tests.e2e.conftest import StartBot
from tests.e2e.helpers import content, ephemeral, run


class TestHelp:
    async def test_help_says_how_to_start_and_lists_the_commands(self, start_bot: StartBot) -> None:
        """A member's /help: mention the bot or /agents spawn first, then every command."""
        bot = await start_bot()
        reply = await run(bot, bot.world.alice, "help")
        text = content(reply)
        assert ephemeral(reply)
        first = text.splitlines()[0]
        assert "mention me in a channel" in first
        assert "`/agents spawn`" in first
        assert "`/agents spawn` — Start a subagent on a task." in text
        assert "`/config get` —" in text
        assert "`/help` —" in text

    async def test_the_command_list_shows_how_to_start(self, start_bot: StartBot) -> None:
        """What a client lists under /help before it is run says how to start."""
        bot = await start_bot()
        command = bot.client.tree.get_command("help")
        assert command is not None
        assert command.description == DESCRIPTION
        assert "@mention" in DESCRIPTION
        assert len(DESCRIPTION) <= 100


def test_a_long_command_list_is_cut_to_one_message() -> None:
    """Commands that would not fit one Discord message are left out, the start kept."""
    text = help_text([(f"cmd{i:03}", "x" * 80) for i in range(100)])
    assert len(text) <= 2000
    assert text.startswith("**To start a conversation**")
