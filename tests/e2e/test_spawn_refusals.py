"""/agents spawn refusals over the fake Discord: seen by the requester only, nothing left behind.

A refusal known before the command acknowledges comes as an ephemeral defer and
its followup. One known only later (Discord refusing the thread) replaces the
public "thinking…" by deleting it, then arrives as an ephemeral followup.
"""

from __future__ import annotations

import asyncio

import pytest

from core.config import FLAG_SPAWN_SUBAGENT_SESSIONS
from core.providers.scripted import Step
from fakediscord import InteractionHandle
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import TIMEOUT

EPHEMERAL = 64
DEFERRED = 5
PROFILES = {"scout": {"display_name": "Scout"}}


async def ask(bot: Bot, task: str, **options: str) -> InteractionHandle:
    """Run /agents spawn in the channel and wait for its (single) answer."""
    w = bot.world
    handle = await bot.fake.invoke_command(
        w.guild, w.channel, w.alice, "agents spawn", {"task": task, **options}
    )
    async with asyncio.timeout(TIMEOUT):
        await handle.wait_followups(1)
    return handle


def answer(handle: InteractionHandle) -> str:
    (followup,) = handle.followups
    assert followup.body.get("flags", 0) & EPHEMERAL
    return followup.body["content"]


def public_traces(bot: Bot, handle: InteractionHandle) -> list[str]:
    """Everything this interaction left that the channel's members can see."""
    return [
        m.content
        for m in bot.fake.messages_in(bot.world.channel.id)
        if m.interaction_id == handle.id
    ]


def refused_before_acknowledging(bot: Bot, handle: InteractionHandle) -> str:
    """The refusal's text, after checking nobody but the requester ever saw anything."""
    callback = handle.callback
    assert callback is not None
    assert callback.callback_type == DEFERRED
    assert callback.body["data"]["flags"] & EPHEMERAL
    assert public_traces(bot, handle) == []
    return answer(handle)


async def nothing_left(bot: Bot) -> None:
    """No binding, no subagent row, no session log, no webhook, no model call."""
    assert list(bot.services.bindings.live()) == []
    assert await bot.services.subagents.list() == []
    assert await bot.services.sessions.session_keys() == []
    assert bot.fake.webhooks_in(bot.world.channel.id) == []
    assert bot.provider.calls == []


def no_thread_asked(bot: Bot) -> bool:
    return bot.fake.requests_matching("POST", f"/channels/{bot.world.channel.id}/threads") == []


class TestPersonaNames:
    @pytest.mark.parametrize("agent", ["alice", "@everyone"])
    async def test_without_profiles_a_named_agent_is_refused_privately(
        self, start_bot: StartBot, agent: str
    ) -> None:
        """No [agents]: agent:alice would post as "alice"; it is refused, to the requester."""
        bot = await start_bot([Step(text="I am totally alice")])
        handle = await ask(bot, "say hi", agent=agent)
        assert "no agent profiles are configured" in refused_before_acknowledging(bot, handle)
        await nothing_left(bot)
        assert no_thread_asked(bot)
        assert bot.fake.requests_matching("POST", "/webhooks/*") == []

    async def test_with_profiles_an_unknown_name_is_refused_privately(
        self, start_bot: StartBot
    ) -> None:
        bot = await start_bot([], agents=PROFILES)
        handle = await ask(bot, "say hi", agent="@everyone")
        text = refused_before_acknowledging(bot, handle)
        assert "there is no agent '@everyone'; configured agents: scout" in text
        (followup,) = handle.followups
        assert followup.body["allowed_mentions"] == {"parse": []}
        await nothing_left(bot)

    async def test_the_public_start_message_names_the_profile(self, start_bot: StartBot) -> None:
        """A start is public and names the configured persona, never pinging anyone."""
        bot = await start_bot([Step(text="on it")], agents=PROFILES)
        handle = await ask(bot, "look around", agent="scout")
        (started,) = public_traces(bot, handle)
        assert started.startswith("Started **Scout** in <#")
        assert handle.followups[0].body["allowed_mentions"] == {"parse": []}
        async with asyncio.timeout(TIMEOUT):
            await bot.services.subagents.wait_settled()
            await bot.client.account.drain()


class TestEarlyRefusals:
    @pytest.mark.parametrize(
        "task", [" ", "\u200b", "\u200b\u200c\u200d\u2060\ufeff", "\u2060 \u200b\u00a0"]
    )
    async def test_a_blank_or_invisible_task_is_refused_privately(
        self, start_bot: StartBot, task: str
    ) -> None:
        """Only invisible characters: the same refusal as an empty task, and no thread."""
        bot = await start_bot([Step(text="nothing to do")])
        handle = await ask(bot, task)
        assert "the task is empty" in refused_before_acknowledging(bot, handle)
        await nothing_left(bot)
        assert no_thread_asked(bot)

    async def test_an_invisible_task_is_refused_on_the_legacy_path_too(
        self, start_bot: StartBot
    ) -> None:
        bot = await start_bot([Step(text="nothing to do")], spawn_threads=False)
        handle = await ask(bot, "\u200b\u200b")
        assert "the task is empty" in refused_before_acknowledging(bot, handle)
        assert list(bot.services.runtime.resident()) == []
        assert bot.provider.calls == []

    async def test_a_session_while_threads_are_off_is_refused_privately(
        self, start_bot: StartBot
    ) -> None:
        bot = await start_bot([], spawn_threads=False)
        handle = await ask(bot, "stay with me", mode="session")
        assert FLAG_SPAWN_SUBAGENT_SESSIONS in refused_before_acknowledging(bot, handle)
        await nothing_left(bot)
        assert no_thread_asked(bot)


class TestDiscordRefusesTheThread:
    @pytest.mark.parametrize(
        ("code", "said"), [(50013, "Missing Permissions"), (50001, "Missing Access")]
    )
    async def test_a_403_is_explained_privately_and_leaves_nothing(
        self, start_bot: StartBot, code: int, said: str
    ) -> None:
        """Forbidden on thread creation: the permissions to grant, to the requester only."""
        bot = await start_bot([Step(text="never said")])
        channel = bot.world.channel.id
        bot.fake.fail_next("POST", f"/channels/{channel}/threads", 403, code=code)
        handle = await ask(bot, "work")
        text = answer(handle)
        assert f"I can't create threads in <#{channel}>" in text
        assert "Create Public Threads" in text
        assert "Send Messages in Threads" in text
        assert said in text
        assert [r.kind for r in handle.responses] == ["callback", "delete_original", "followup"]
        assert public_traces(bot, handle) == []
        await nothing_left(bot)

    async def test_a_server_error_is_explained_privately_and_leaves_nothing(
        self, start_bot: StartBot
    ) -> None:
        """A 503 (not retried by discord.py) on thread creation: a clear message, no hang."""
        bot = await start_bot([Step(text="never said")])
        channel = bot.world.channel.id
        bot.fake.fail_next("POST", f"/channels/{channel}/threads", 503)
        handle = await ask(bot, "work")
        text = answer(handle)
        assert f"Discord could not create a thread in <#{channel}> (HTTP 503" in text
        assert "try again" in text
        assert public_traces(bot, handle) == []
        await nothing_left(bot)
