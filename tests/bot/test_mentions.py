"""What counts as mentioning the bot, and what the task is (discord.py objects, no gateway)."""

from __future__ import annotations

import re
from typing import Any
from unittest.mock import create_autospec

import discord

from bot.mentions import is_mentioned, task_of

BOT_ID = 1001
ROLE_ID = 2002


def client() -> Any:
    fake = create_autospec(discord.Client, instance=True)
    fake.user = create_autospec(discord.ClientUser, instance=True)
    fake.user.id = BOT_ID
    return fake


def message(content: str, *, replying_to_the_bot: bool = False) -> Any:
    """A guild message; a reply to the bot lists it in ``mentions`` as Discord does."""
    fake = create_autospec(discord.Message, instance=True)
    fake.content = content
    fake.raw_mentions = [int(i) for i in re.findall(r"<@!?(\d+)>", content)]
    fake.raw_role_mentions = [int(i) for i in re.findall(r"<@&(\d+)>", content)]
    role = create_autospec(discord.Role, instance=True)
    role.id = ROLE_ID
    fake.guild = create_autospec(discord.Guild, instance=True)
    fake.guild.self_role = role
    bot = create_autospec(discord.Member, instance=True)
    bot.id = BOT_ID
    fake.mentions = [bot] if replying_to_the_bot or BOT_ID in fake.raw_mentions else []
    return fake


class TestIsMentioned:
    def test_the_bots_user_or_role_in_the_text(self) -> None:
        """<@id>, <@!id> and the bot's own role all name it."""
        for text in (f"<@{BOT_ID}> hi", f"hi <@!{BOT_ID}>", f"<@&{ROLE_ID}> hi"):
            assert is_mentioned(client(), message(text)), text

    def test_a_reply_to_the_bot_is_not_a_request(self) -> None:
        """Discord lists a reply's author in mentions; without the mention typed, no session."""
        assert not is_mentioned(client(), message("thanks!", replying_to_the_bot=True))

    def test_everyone_and_other_people_are_not_the_bot(self) -> None:
        assert not is_mentioned(client(), message("@everyone <@42> look"))


class TestTaskOf:
    def test_the_mentions_go_and_the_words_stay(self) -> None:
        text = f"<@{BOT_ID}>  compare   <@42> and me <@&{ROLE_ID}>\n  second line "
        assert task_of(client(), message(text)) == "compare <@42> and me\nsecond line"

    def test_a_mention_alone_is_an_empty_task(self) -> None:
        assert task_of(client(), message(f" <@!{BOT_ID}> ")) == ""
