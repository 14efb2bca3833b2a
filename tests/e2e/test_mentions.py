"""An @mention of the bot in a channel starts a session, as /agents spawn mode:session does.

The real discord.py client against the fake Discord: a person's mention opens a
thread with the default agent on the message's words, owned by its author; the
flag, the right to use the bot's commands and an empty message each get a reply
saying why nothing started; a message without a mention gets nothing at all.
"""

from __future__ import annotations

from typing import Any

from bot.mentions import IN_A_THREAD, NO_RIGHT
from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS
from core.providers.scripted import Step
from fakediscord.permissions import EVERYONE_DEFAULT, USE_APPLICATION_COMMANDS
from tests.e2e.conftest import Bot, StartBot, World
from tests.e2e.helpers import (
    bound_thread,
    done,
    handlers_done,
    persona_messages,
    settle,
)


def answers(messages: Any) -> Step:
    """The model answers by quoting the task it was given."""
    said = [m.content for m in messages if m.role == "user"]
    return Step(text=f"on it: {said[-1]}")


def mention(bot: Bot) -> str:
    return f"<@{bot.world.bot.id}>"


async def reply_to(bot: Bot, message: Any) -> Any:
    """The bot's reply to ``message`` in its channel."""

    def replying(m: Any) -> bool:
        reference = m.message_reference or {}
        return str(reference.get("message_id")) == str(message.id)

    return await bot.fake.wait_for_message(message.channel_id, replying)


async def handled(bot: Bot) -> None:
    """Every message sent so far was parsed by the client and its handler has returned."""
    await bot.fake.sync(bot.world.bot)
    await handlers_done("message")


def bot_posts(bot: Bot, channel_id: int) -> list[str]:
    return [m.content for m in bot.fake.messages_in(channel_id) if m.author_id == bot.world.bot.id]


class TestMentionStarts:
    async def test_a_mention_starts_a_session_in_a_new_thread_owned_by_its_author(
        self, start_bot: StartBot
    ) -> None:
        """The reply links the new thread; the agent answers there the message minus the mention."""
        bot = await start_bot(answers)
        w = bot.world
        said = await bot.fake.user_says(
            w.channel, w.alice, f"{mention(bot)} compare three sorting algorithms"
        )
        reply = await reply_to(bot, said)
        record = bot.binding()
        thread_id = int(record.conversation.conversation_id)
        assert f"<#{thread_id}>" in reply.content
        assert reply.content.startswith("Started **")
        assert reply.allowed_mentions == {"parse": [], "replied_user": False}
        assert bot.fake.channel(thread_id).parent_id == w.channel.id
        await settle(bot, record.target_session_key)

        (answer,) = persona_messages(bot.fake, thread_id)
        assert answer.content == "on it: compare three sorting algorithms"
        subagent = await bot.services.subagents.get(record.target_session_key)
        assert subagent is not None
        assert (subagent.mode, subagent.requested_by) == ("session", str(w.alice.id))
        assert record.bound_by == str(w.alice.id)
        await done(bot)

    async def test_the_owner_talks_on_in_the_thread(self, start_bot: StartBot) -> None:
        """The session a mention started is an ordinary bound thread: the next message is a turn."""
        bot = await start_bot(answers)
        w = bot.world
        said = await bot.fake.user_says(w.channel, w.alice, f"{mention(bot)} hello bot")
        await reply_to(bot, said)
        record = bot.binding()
        await settle(bot, record.target_session_key)
        thread_id = int(record.conversation.conversation_id)
        await bot.fake.user_says(thread_id, w.alice, f"{mention(bot)} and now?")
        await bot.fake.wait_for_message(
            thread_id, lambda m: m.content == f"on it: {mention(bot)} and now?"
        )
        assert len(list(bot.services.bindings.live())) == 1  # no second session
        await done(bot)


class TestMentionRefused:
    async def test_flag_off_answers_with_the_commands_refusal(self, start_bot: StartBot) -> None:
        """spawnSubagentSessions off: a reply naming the flag; no thread, no binding."""
        bot = await start_bot(answers, spawn_threads=False)
        w = bot.world
        said = await bot.fake.user_says(w.channel, w.alice, f"{mention(bot)} hello bot")
        reply = await reply_to(bot, said)
        assert FLAG_SPAWN_SUBAGENT_SESSIONS in reply.content
        assert "an admin can turn it on" in reply.content
        assert list(bot.services.bindings.live()) == []
        assert bot.fake.requests_matching("POST", f"/channels/{w.channel.id}/threads") == []
        assert bot.provider.calls == []

    async def test_a_member_without_the_right_to_use_commands_is_refused(
        self, start_bot: StartBot, world: World
    ) -> None:
        """Without Use Application Commands in the channel (the slash command's gate): refused."""
        everyone = world.guild.roles[world.guild.id]  # before the bot's GUILD_CREATE
        everyone.permissions = EVERYONE_DEFAULT & ~USE_APPLICATION_COMMANDS
        bot = await start_bot(answers)
        said = await bot.fake.user_says(world.channel, world.alice, f"{mention(bot)} hello bot")
        reply = await reply_to(bot, said)
        assert reply.content == NO_RIGHT
        assert list(bot.services.bindings.live()) == []
        assert bot.provider.calls == []

        said = await bot.fake.user_says(world.channel, world.admin, f"{mention(bot)} hello bot")
        reply = await reply_to(bot, said)  # an administrator has every permission
        assert reply.content.startswith("Started **")
        await done(bot)

    async def test_a_mention_alone_says_how_to_start(self, start_bot: StartBot) -> None:
        """Nothing but the mention: a reply saying how to start, and no session."""
        bot = await start_bot(answers)
        w = bot.world
        said = await bot.fake.user_says(w.channel, w.alice, f"  {mention(bot)}  ")
        reply = await reply_to(bot, said)
        assert "mention me together with what you would like" in reply.content
        assert list(bot.services.bindings.live()) == []

    async def test_a_failed_thread_is_a_visible_reply(self, start_bot: StartBot) -> None:
        """Discord refusing the thread: the reply says no session started and why."""
        bot = await start_bot(answers)
        w = bot.world
        bot.fake.fail_next("POST", f"/channels/{w.channel.id}/threads", status=403, code=50013)
        said = await bot.fake.user_says(w.channel, w.alice, f"{mention(bot)} hello bot")
        reply = await reply_to(bot, said)
        assert reply.content.startswith("⚠️ No session was started:")
        assert list(bot.services.bindings.live()) == []
        assert await bot.services.subagents.list() == []


class TestNoMention:
    async def test_a_plain_channel_message_gets_nothing(self, start_bot: StartBot) -> None:
        """Without a mention the channel is the people's: no reply, no reaction, no session."""
        bot = await start_bot(answers)
        w = bot.world
        said = await bot.fake.user_says(w.channel, w.alice, "hello everyone, threadbound is here")
        await handled(bot)
        assert bot_posts(bot, w.channel.id) == []
        assert bot.fake.message(said.id).reactions == []
        assert list(bot.services.bindings.live()) == []
        assert bot.provider.calls == []

    async def test_another_bots_mention_is_not_a_request(self, start_bot: StartBot) -> None:
        """A bot mentioning the bot starts nothing (bots are not people unless allowed)."""
        bot = await start_bot(answers)
        other = bot.fake.add_bot("other-bot-token", "other bot")
        await bot.fake.user_says(bot.world.channel, other, f"{mention(bot)} beep")
        await handled(bot)
        assert bot_posts(bot, bot.world.channel.id) == []
        assert list(bot.services.bindings.live()) == []

    async def test_a_mention_in_a_bound_thread_is_a_message_to_its_session(
        self, start_bot: StartBot
    ) -> None:
        """In a bound thread the mention goes to the session, as any message there; no spawn."""
        bot = await start_bot(answers)
        record, thread = await bound_thread(bot)
        await bot.fake.user_says(thread, bot.world.alice, f"{mention(bot)} one more thing")
        await handled(bot)
        await settle(bot, record.target_session_key)
        agent = await bot.services.runtime.get(record.target_session_key)
        texts = [e.payload["text"] for e in agent.tree.events if e.type == "user_message"]
        assert texts[-1] == f"{mention(bot)} one more thing"
        assert len(list(bot.services.bindings.live())) == 1
        await done(bot)

    async def test_a_mention_in_an_unbound_thread_says_where_to_start(
        self, start_bot: StartBot
    ) -> None:
        """A thread nobody's session reads: the reply says how a conversation starts."""
        bot = await start_bot(answers)
        w = bot.world
        thread = bot.fake.add_thread(w.channel, "chat", owner=w.alice)
        await bot.fake.sync(bot.world.bot)
        said = await bot.fake.user_says(thread, w.alice, f"{mention(bot)} hello?")
        reply = await reply_to(bot, said)
        assert reply.content == IN_A_THREAD
        assert list(bot.services.bindings.live()) == []
