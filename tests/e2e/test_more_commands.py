"""More end-to-end cases: /cancel's report, spawning from a thread, two accounts at once, a
command that raises."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote

import pytest

from adapters.discord.delivery import Persona
from adapters.discord.manager import ManagerRegistry
from bot.client import ThreadboundClient
from bot.wiring import build_services
from core.bindings.records import BindingMetadata, BindingPersona
from core.clock import FakeClock
from core.config import parse_config
from core.providers.scripted import ScriptedProvider, Step
from core.providers.types import ToolCall
from fakediscord import FakeDiscord
from tests.e2e.conftest import TOKEN, Clients, StartBot, World
from tests.e2e.helpers import TIMEOUT, settle, spawn

SLEEP = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')


async def test_cancel_reports_what_it_dropped(start_bot: StartBot) -> None:
    """/cancel in the thread stops the turn and lists the queued messages it dropped."""
    bot = await start_bot([Step(tool_calls=(SLEEP,))])
    await spawn(bot, "long job", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
    await bot.fake.user_says(thread_id, bot.world.alice, ">> afterwards, summarise")
    await bot.fake.wait_for_request("PUT", f"/channels/{thread_id}/messages")
    handle = await bot.fake.invoke_command(bot.world.guild, thread_id, bot.world.alice, "cancel")
    async with asyncio.timeout(TIMEOUT):
        reply = await handle.wait_response()
    assert "Dropped 1 queued message(s)" in reply.body["data"]["content"]
    assert "(follow_up) afterwards, summarise" in reply.body["data"]["content"]
    agent = await bot.services.runtime.get(record.target_session_key)
    assert agent.running is False
    assert agent.snapshot().follow_up_queue == ()


async def test_a_cancel_mid_stream_marks_the_words_it_cut_off(start_bot: StartBot) -> None:
    """/cancel while the model streams: its partial answer ends with a mark saying it was
    cut off there and by whom, and the status line names who cancelled."""
    gate = asyncio.Event()  # never set: the stream stops after its first chunk
    bot = await start_bot([Step(text="Paris has three options worth", chunks=3, gate=gate)])
    await spawn(bot, "where to stay", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    async with asyncio.timeout(TIMEOUT):
        partial = await bot.fake.wait_for_message(
            thread_id, lambda m: m.webhook_id is not None and m.content.startswith("Paris")
        )
    handle = await bot.fake.invoke_command(bot.world.guild, thread_id, bot.world.alice, "cancel")
    async with asyncio.timeout(TIMEOUT):
        await handle.wait_response()
    await settle(bot, record.target_session_key)

    shown = bot.fake.message(partial.id).content
    assert shown == "Paris has \n-# ✂️ cut off here: cancelled by @alice"
    (status,) = [m for m in bot.fake.messages_in(thread_id) if m.content.startswith("Status:")]
    assert status.content.startswith("Status: ⏹️ Cancelled by @alice")


async def test_spawn_from_a_bound_thread_opens_in_the_parent(start_bot: StartBot) -> None:
    """Threads cannot nest: a spawn asked inside a thread opens its thread in the parent."""
    bot = await start_bot(lambda _messages: Step(text="ok"))
    await spawn(bot, "first", mode="session")
    first = bot.binding()
    w = bot.world
    handle = await bot.fake.invoke_command(
        w.guild,
        int(first.conversation.conversation_id),
        w.alice,
        "agents spawn",
        {"task": "second", "mode": "session"},
    )
    async with asyncio.timeout(TIMEOUT):
        await handle.wait_followups(1)
    second = next(r for r in bot.services.bindings.live() if r != first)
    assert second.conversation.parent_conversation_id == str(w.channel.id)
    assert bot.fake.channel(int(second.conversation.conversation_id)).parent_id == w.channel.id
    for record in (first, second):
        await settle(bot, record.target_session_key)


async def test_two_accounts_in_one_process(
    fake: FakeDiscord, clients: Clients, world: World, tmp_path: Path
) -> None:
    """Two bot accounts share the services; each binds threads under its own account id."""
    second_bot = fake.add_bot("second-token", "second")
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'two.db'}"},
            "channels": {
                "discord": {
                    "threadBindings": {"spawnSubagentSessions": True},
                    "accounts": {"main": {}, "second": {}},
                }
            },
            "discord": {"command_guild_ids": [world.guild.id]},
        },
        env={},
    )
    services = await build_services(
        config, clock=FakeClock(), env={}, provider=ScriptedProvider(lambda _m: Step(text="hi"))
    )
    try:
        managers = ManagerRegistry()
        main = ThreadboundClient("main", services, managers, min_edit_interval=0)
        second = ThreadboundClient("second", services, managers, min_edit_interval=0)
        await clients.start(main, TOKEN)
        await clients.start(second, "second-token")
        handle = await fake.invoke_command(
            world.guild, world.channel, world.alice, "agents spawn", {"task": "t"}, bot=second_bot
        )
        async with asyncio.timeout(TIMEOUT):
            await handle.wait_followups(1)
        (record,) = services.bindings.live()
        assert record.conversation.account_id == "second"
        (request,) = fake.requests_matching("POST", f"/channels/{world.channel.id}/threads")
        assert request.token == "second-token"
        agent = await services.runtime.get(record.target_session_key)
        await agent.wait_idle()
        await second.account.drain()
    finally:
        await services.close()


async def test_thread_can_default_to_follow_up(start_bot: StartBot) -> None:
    """/session mode default:follow_up makes plain messages queue; it survives in the store."""
    bot = await start_bot([Step(tool_calls=(SLEEP,)), Step(text="done"), Step(text="then")])
    await spawn(bot, "long job", mode="session")
    record = bot.binding()
    thread_id = int(record.conversation.conversation_id)
    handle = await bot.fake.invoke_command(
        bot.world.guild, thread_id, bot.world.alice, "session mode", {"default": "follow_up"}
    )
    async with asyncio.timeout(TIMEOUT):
        reply = await handle.wait_response()
    assert "follow up" in reply.body["data"]["content"]
    assert bot.binding().metadata["default_mode"] == "follow_up"
    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()
    message = await bot.fake.user_says(thread_id, bot.world.alice, "and then this")
    request = await bot.fake.wait_for_request(
        "PUT", f"/channels/{thread_id}/messages/{message.id}/reactions"
    )
    assert "📥" in unquote(request.path)
    await bot.clock.advance(5)
    await settle(bot, record.target_session_key)
    restarted = await bot.services.bindings.start()
    assert restarted == 1
    assert bot.binding().metadata["default_mode"] == "follow_up"


async def test_unknown_webhook_is_replaced_and_the_send_lands(start_bot: StartBot) -> None:
    """A webhook Discord no longer knows (10015) is looked up again once; the persona post lands."""
    bot = await start_bot([Step(text="hi")])
    await spawn(bot, "greet", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    channel_id = bot.world.channel.id
    lookups = len(bot.fake.requests_matching("GET", f"/channels/{channel_id}/webhooks"))
    bot.fake.fail_next("POST", "/webhooks/*", 404, code=10015)
    sent = await bot.client.account.delivery.send(record, Persona("Scout"), "still me")
    assert sent.path == "webhook"
    again = len(bot.fake.requests_matching("GET", f"/channels/{channel_id}/webhooks"))
    assert again == lookups + 1


async def test_agents_list_shows_threads_and_unbound_runs(start_bot: StartBot) -> None:
    """/agents list names bound threads with their state and runs that have no thread."""
    bot = await start_bot(lambda _messages: Step(text="ok"), spawn_threads=False)
    await spawn(bot, "legacy run")
    (key,) = bot.services.runtime.resident()
    await (await bot.services.runtime.get(key)).wait_idle()
    w = bot.world
    handle = await bot.fake.invoke_command(w.guild, w.channel, w.alice, "agents list")
    async with asyncio.timeout(TIMEOUT):
        reply = await handle.wait_response()
    assert f"unbound run `{key}` (idle)" in reply.body["data"]["content"]


PROFILES = {
    "scout": {"display_name": "Scout", "avatar_url": "https://example.org/scout.png"},
    "writer": {"display_name": "Writer", "user_startable": False},
}


async def test_spawn_uses_the_agent_profile_persona(start_bot: StartBot) -> None:
    """/agents spawn agent:scout speaks with the profile's display name and avatar."""
    bot = await start_bot([Step(text="on it")], agents=PROFILES)
    await spawn(bot, "look around", agent="scout", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    (message,) = [
        m
        for m in bot.fake.messages_in(int(record.conversation.conversation_id))
        if m.webhook_id is not None
    ]
    assert (message.username, message.avatar_url) == ("Scout", "https://example.org/scout.png")


async def test_a_persona_changed_in_the_store_is_what_the_thread_shows_next(
    start_bot: StartBot,
) -> None:
    """A binding's persona written (a handoff does it) is shown from the next message on,
    with nobody asking the thread to show it anew: the change itself is published."""
    bot = await start_bot([Step(text="on it"), Step(text="as the writer")], agents=PROFILES)
    await spawn(bot, "look around", agent="scout", mode="session")
    record = bot.binding()
    await settle(bot, record.target_session_key)
    thread_id = int(record.conversation.conversation_id)
    writer = BindingPersona(name="Writer", avatar_url="https://example.org/writer.png")
    await bot.services.bindings.update_metadata(record.binding_id, BindingMetadata(persona=writer))
    await bot.fake.user_says(thread_id, bot.world.alice, "go on")
    async with asyncio.timeout(TIMEOUT):
        message = await bot.fake.wait_for_message(
            thread_id, lambda m: m.webhook_id is not None and m.content == "as the writer"
        )
    assert (message.username, message.avatar_url) == ("Writer", "https://example.org/writer.png")


async def test_spawn_refuses_unknown_and_handoff_only_agents(start_bot: StartBot) -> None:
    """An unknown agent, or one that only starts through a handoff, is refused with the reason."""
    bot = await start_bot([], agents=PROFILES)
    (unknown,) = await spawn(bot, "x", agent="ghost")
    assert "there is no agent 'ghost'; configured agents: scout, writer" in unknown.body["content"]
    (handoff_only,) = await spawn(bot, "x", agent="writer")
    assert "starts only through an accepted handoff" in handoff_only.body["content"]
    assert list(bot.services.bindings.live()) == []


async def test_a_command_that_raises_is_answered_with_a_line_saying_so(
    start_bot: StartBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subcommand of a group (/agents list) or a top-level command (/tree) that raises is
    answered privately by the tree's one error handler, never left without an answer."""
    bot = await start_bot()

    def broken(*_args: object, **_kwargs: object) -> NoReturn:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(bot.services.subagents, "list", broken)
    monkeypatch.setattr(bot.services.bindings, "active_for_conversation", broken)
    for command in ("agents list", "tree"):
        handle = await bot.fake.invoke_command(
            bot.world.guild, bot.world.channel, bot.world.alice, command
        )
        async with asyncio.timeout(TIMEOUT):
            reply = await handle.wait_response()
        assert reply.body["data"]["content"] == (
            "⚠️ This command failed inside the bot (the details are in its logs)."
        )
        assert int(reply.body["data"]["flags"]) & 64
