"""The bot end to end over the fake Discord, including the seed's five required tests."""

from __future__ import annotations

import asyncio
from urllib.parse import unquote

import discord
import pytest

from adapters.discord.delivery import Persona
from adapters.discord.ids import conversation_for
from adapters.discord.manager import ManagerRegistry
from core.bindings.records import ConversationRef
from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS
from core.errors import DeliveryError
from core.providers.scripted import Step
from core.providers.types import ToolCall
from fakediscord import FakeDiscord
from tests.e2e.conftest import TOKEN, Clients, StartBot, World
from tests.e2e.helpers import (
    TIMEOUT,
    done,
    persona_messages,
    settle,
    spawn,
    status_line,
    text_messages,
)


class TestSpawn:
    async def test_spawn_binds_a_new_thread_and_speaks_as_the_persona(
        self, start_bot: StartBot
    ) -> None:
        """A spawn opens a thread, binds it, says hello, and streams the answer as the agent."""
        bot = await start_bot(
            [Step(text="Hello @everyone from the subagent")],
            agents={"scout": {"display_name": "Scout"}},
        )
        (reply,) = await spawn(bot, "say hello", agent="scout", mode="session")
        record = bot.binding()
        thread_id = int(record.conversation.conversation_id)
        assert f"<#{thread_id}>" in reply.body["content"]
        assert record.conversation.parent_conversation_id == str(bot.world.channel.id)
        assert bot.fake.channel(thread_id).parent_id == bot.world.channel.id
        await settle(bot, record.target_session_key)

        (answer,) = persona_messages(bot.fake, thread_id)
        assert (answer.username, answer.content) == (
            "Scout",
            "Hello @everyone from the subagent",
        )
        assert answer.allowed_mentions == {"parse": []}  # model output never pings
        intro = [m for m in bot.fake.messages_in(thread_id) if m.author_id == bot.world.bot.id]
        assert "**Scout** is working in this thread" in intro[0].content
        webhooks = bot.fake.webhooks_in(bot.world.channel.id)
        assert len(webhooks) == 1

    @pytest.mark.parametrize(("per_channel", "webhooks"), [(1, 1), (10, 2)])
    async def test_a_channel_s_threads_are_spread_over_its_webhooks(
        self, start_bot: StartBot, per_channel: int, webhooks: int
    ) -> None:
        """Two subagents under one channel: each thread gets a webhook of its own while the
        channel has room (``webhooks_per_channel``), else they share one; either way each
        speaks with its own persona, and a thread's binding records its webhook."""
        bot = await start_bot(
            lambda _messages: Step(text="done"),
            agents={name.lower(): {"display_name": name} for name in ("One", "Two")},
            discord_settings={"webhooks_per_channel": per_channel},
        )
        for name in ("One", "Two"):
            await spawn(bot, f"task for {name}", agent=name.lower(), mode="session")
        records = bot.services.bindings.live()
        for record in records:
            await settle(bot, record.target_session_key)
        hooks = bot.fake.webhooks_in(bot.world.channel.id)
        assert len(hooks) == webhooks
        recorded = {bot.services.bindings.get(r.binding_id).meta.webhook_id for r in records}
        assert recorded == {str(h.id) for h in hooks}
        for record in records:  # every persona message of a thread came through its webhook
            thread = int(record.conversation.conversation_id)
            hook = bot.services.bindings.get(record.binding_id).meta.webhook_id
            assert {str(m.webhook_id) for m in persona_messages(bot.fake, thread)} == {hook}
        names = sorted(
            {
                m.username
                for r in records
                for m in persona_messages(bot.fake, int(r.conversation.conversation_id))
            }
        )
        assert names == ["One", "Two"]


class TestThreadMessages:
    async def test_plain_message_steers_and_double_arrow_follows_up(
        self, start_bot: StartBot
    ) -> None:
        """While the agent sleeps in a tool, a message steers it and '>>' queues, both marked."""
        sleep = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')
        bot = await start_bot(
            [Step(tool_calls=(sleep,)), Step(text="changed course"), Step(text="sources: x")]
        )
        await spawn(bot, "research", mode="session")
        record = bot.binding()
        thread_id = int(record.conversation.conversation_id)
        async with asyncio.timeout(TIMEOUT):
            await bot.clock.wait_for_sleepers()
        steer = await bot.fake.user_says(thread_id, bot.world.alice, "focus on the summary")
        follow = await bot.fake.user_says(thread_id, bot.world.alice, ">> then list sources")
        for message, mark in ((steer, "🧭"), (follow, "📥")):
            request = await bot.fake.wait_for_request(
                "PUT", f"/channels/{thread_id}/messages/{message.id}/reactions"
            )
            assert mark in unquote(request.path)
        async with asyncio.timeout(TIMEOUT):
            await bot.client.account.drain()
        assert status_line(bot.fake, thread_id) == (
            "Status: ⏳ running · 1 steer pending · 1 follow-up queued"
        )
        await bot.clock.advance(5)
        await settle(bot, record.target_session_key)
        assert status_line(bot.fake, thread_id) == "Status: ✅ idle"

        agent = await bot.services.runtime.get(record.target_session_key)
        delivered = [
            (e.payload["text"], e.delivery_mode)
            for e in agent.tree.events
            if e.type == "user_message"
        ]
        assert delivered == [
            ("research", "normal"),
            ("focus on the summary", "steer"),
            ("then list sources", "follow_up"),
        ]
        assert "<steering" in bot.provider.calls[1][-1].content

    async def test_own_and_other_bots_messages_are_ignored(self, start_bot: StartBot) -> None:
        """A webhook echo or another bot in a bound thread does not reach the agent."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        other = bot.fake.add_bot("other-bot-token", "other bot")
        await bot.fake.user_says(int(record.conversation.conversation_id), other, "beep")
        await bot.fake.sync(bot.world.bot)
        agent = await bot.services.runtime.get(record.target_session_key)
        assert [e.payload["text"] for e in agent.tree.events if e.type == "user_message"] == [
            "greet"
        ]


class TestSeedRequirements:
    async def test_1_reused_manager_uses_the_newest_token(
        self, fake: FakeDiscord, clients: Clients, world: World
    ) -> None:
        """A manager reused with a new client calls Discord with the new token."""
        rotated = "bot-token-rotated"
        fake.add_bot(rotated, "threadbound rotated")
        old = await clients.start(discord.Client(intents=discord.Intents.default()), TOKEN)
        new = await clients.start(discord.Client(intents=discord.Intents.default()), rotated)
        registry = ManagerRegistry()
        manager = registry.get_or_create("main", old)
        assert registry.get_or_create("main", new) is manager
        await manager.create_conversation(
            ConversationRef(
                channel="discord",
                account_id="main",
                conversation_id="",
                parent_conversation_id=str(world.channel.id),
            ),
            target_session_key="s1",
            metadata={},
        )
        (request,) = fake.requests_matching("POST", f"/channels/{world.channel.id}/threads")
        assert request.token == rotated

    async def test_2_webhook_sends_update_activity(self, start_bot: StartBot) -> None:
        """Sending through the webhook moves the binding's last_activity_at."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        await bot.clock.advance(600)
        sent = await bot.client.account.delivery.send(record, Persona("Scout"), "still here")
        assert sent.path == "webhook"
        assert bot.binding().last_activity_at == bot.clock.now()

    async def test_3_two_sessions_in_one_channel_never_reach_the_parent(
        self, start_bot: StartBot
    ) -> None:
        """Completions of two sessions spawned from one channel land in their own threads only."""
        bot = await start_bot(lambda _messages: Step(text="working"))
        await asyncio.gather(
            spawn(bot, "task A", mode="session"), spawn(bot, "task B", mode="session")
        )
        records = list(bot.services.bindings.live())
        for record in records:
            await settle(bot, record.target_session_key)
        await done(bot)  # their announcements too: a late one would come after the sends below
        parent = bot.world.channel.id
        before = len(text_messages(bot.fake, parent))
        requester = conversation_for("default", parent)
        for record in records:
            resolution = bot.services.router.resolve_destination(
                target_session_key=record.target_session_key, requester=requester
            )
            assert resolution.mode == "bound"
            assert resolution.binding.binding_id == record.binding_id
            await bot.client.account.delivery.send(
                resolution.binding, Persona("Done"), f"completed {record.target_session_key}"
            )
        for record in records:
            thread = int(record.conversation.conversation_id)
            contents = [m.content for m in persona_messages(bot.fake, thread)]
            assert contents[-1] == f"completed {record.target_session_key}"
        assert len(text_messages(bot.fake, parent)) == before
        assert persona_messages(bot.fake, parent) == []

    async def test_4_session_completion_resolves_only_to_its_thread(
        self, start_bot: StartBot
    ) -> None:
        """From the parent or from the thread itself, a session's completion goes to its thread."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        thread = record.conversation
        for requester in (
            conversation_for("default", bot.world.channel.id),
            conversation_for("default", thread.conversation_id, bot.world.channel.id),
        ):
            resolution = bot.services.router.resolve_destination(
                target_session_key=record.target_session_key, requester=requester
            )
            assert resolution.mode == "bound"
            assert resolution.binding.conversation == thread

    async def test_5_flag_off_keeps_the_legacy_behaviour(self, start_bot: StartBot) -> None:
        """spawnSubagentSessions off: no thread, the answer in the channel; a session is refused."""
        bot = await start_bot([Step(text="legacy answer")], spawn_threads=False)
        (reply,) = await spawn(bot, "answer here")
        assert "answer will be posted here" in reply.body["content"]
        answer = await bot.fake.wait_for_message(
            bot.world.channel.id, lambda m: m.content == "legacy answer"
        )
        assert answer.webhook_id is None
        assert bot.fake.requests_matching("POST", f"/channels/{bot.world.channel.id}/threads") == []
        assert list(bot.services.bindings.live()) == []

        (refused,) = await spawn(bot, "stay with me", mode="session")
        assert FLAG_SPAWN_SUBAGENT_SESSIONS in refused.body["content"]
        assert refused.body.get("flags", 0) & 64  # ephemeral


class TestThreadTrouble:
    async def test_archived_thread_is_reopened_by_the_next_send(self, start_bot: StartBot) -> None:
        """An archived, unlocked thread keeps its binding: the webhook post reopens it."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        thread_id = int(record.conversation.conversation_id)
        await bot.fake.archive_thread(thread_id)
        await bot.client.account.delivery.send(record, Persona("Scout"), "back again")
        assert bot.fake.channel(thread_id).archived is False
        assert bot.services.bindings.get(record.binding_id) is not None

    async def test_locked_thread_ends_the_binding(self, start_bot: StartBot) -> None:
        """A locked thread ends the binding with reason thread-archived, and says so."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        await bot.fake.archive_thread(int(record.conversation.conversation_id), locked=True)
        with pytest.raises(DeliveryError, match="locked"):
            await bot.client.account.delivery.send(record, Persona("Scout"), "anyone?")
        assert bot.services.bindings.get(record.binding_id) is None

    async def test_deleted_thread_ends_the_binding_without_farewell(
        self, start_bot: StartBot
    ) -> None:
        """A deleted thread ends the binding (thread-deleted); nothing is posted anywhere."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        await done(bot)  # the task's announcement is in the thread, not racing the delete
        parent_before = len(text_messages(bot.fake, bot.world.channel.id))
        await bot.fake.delete_channel(int(record.conversation.conversation_id))
        with pytest.raises(DeliveryError, match="gone"):
            await bot.client.account.delivery.send(record, Persona("Scout"), "hello?")
        assert bot.services.bindings.get(record.binding_id) is None
        assert len(text_messages(bot.fake, bot.world.channel.id)) == parent_before

    async def test_webhook_failure_falls_back_to_the_same_thread(self, start_bot: StartBot) -> None:
        """A webhook that refuses is replaced by a bot post in the same thread, never the parent."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        parent_before = len(text_messages(bot.fake, bot.world.channel.id))
        bot.fake.fail_next("POST", "/webhooks/*", 403, code=50013)
        sent = await bot.client.account.delivery.send(record, Persona("Scout"), "via the bot")
        assert sent.path == "bot"
        thread_id = int(record.conversation.conversation_id)
        assert bot.fake.message(int(sent.message_id)).channel_id == thread_id
        assert len(text_messages(bot.fake, bot.world.channel.id)) == parent_before

    async def test_5xx_on_the_webhook_is_survived(self, start_bot: StartBot) -> None:
        """One 502 is retried by discord.py (after its own 1 s pause) and the persona post lands."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        bot.fake.fail_next("POST", "/webhooks/*", 502)
        sent = await bot.client.account.delivery.send(record, Persona("Scout"), "after a hiccup")
        assert sent.path == "webhook"
        assert bot.services.bindings.get(record.binding_id) is not None

    async def test_429_on_the_webhook_is_survived(self, start_bot: StartBot) -> None:
        """A rate-limited webhook post is retried by discord.py and still lands as the persona."""
        bot = await start_bot([Step(text="hi")])
        await spawn(bot, "greet", mode="session")
        record = bot.binding()
        await settle(bot, record.target_session_key)
        bot.fake.fail_next("POST", "/webhooks/*", 429, retry_after=0.01)
        sent = await bot.client.account.delivery.send(record, Persona("Scout"), "after a pause")
        assert sent.path == "webhook"


async def test_status_turns_idle_only_after_the_last_words_landed(start_bot: StartBot) -> None:
    """The idle status edit reaches Discord after the turn's final text, never before it.

    The status line was last edited long ago (its edit is due at once) while the
    answer's last edit still waits out the interval: the status must wait too.
    """
    sleep = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')
    bot = await start_bot(
        [Step(tool_calls=(sleep,)), Step(text="one two three four five six", chunks=6)],
        min_edit_interval=1,
    )
    await spawn(bot, "count", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
    await bot.clock.advance(5)  # the tool ends; the answer streams at t=5
    agent = await bot.services.runtime.get(record.target_session_key)
    async with asyncio.timeout(TIMEOUT):
        await agent.wait_idle()
        await bot.clock.wait_for_sleepers()  # the answer's last edit, due at t=6
    await bot.clock.advance(1)
    await settle(bot, record.target_session_key)
    requests = bot.fake.requests
    idle = max(
        i
        for i, r in enumerate(requests)
        if r.method == "PATCH"
        and r.path.startswith(f"/channels/{thread_id}/messages/")
        and "idle" in (r.json or {}).get("content", "")
    )
    last_text = max(i for i, r in enumerate(requests) if r.path.startswith("/webhooks/"))
    assert last_text < idle


async def test_one_status_line_survives_a_rebuilt_agent(start_bot: StartBot) -> None:
    """After the agent is rebuilt (eviction, restart, handoff) the same status line is edited."""
    bot = await start_bot([Step(text="first"), Step(text="second")])
    await spawn(bot, "begin", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    await settle(bot, record.target_session_key)
    await bot.services.subagents.wait_settled()  # the task's announcement is out
    await bot.services.runtime.reload(record.target_session_key)  # a new agent instance

    await bot.fake.user_says(thread_id, bot.world.alice, "go on")
    async with asyncio.timeout(TIMEOUT):
        await bot.provider.wait_calls(2)
    await settle(bot, record.target_session_key)
    assert status_line(bot.fake, thread_id) == "Status: ✅ idle"  # exactly one such message
    assert [m.content for m in persona_messages(bot.fake, thread_id)][-1] == "second"
