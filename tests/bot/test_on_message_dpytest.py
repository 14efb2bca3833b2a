"""The plain message handler under dpytest (which cannot do threads, webhooks or commands)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import discord
import discord.ext.test as dpytest
import pytest

from adapters.discord.ids import conversation_for
from adapters.discord.manager import ManagerRegistry
from bot.client import ThreadboundClient
from bot.wiring import Services, build_services
from core.clock import FakeClock
from core.config import parse_config
from core.providers.scripted import ScriptedProvider, Step

Fixture = tuple[ThreadboundClient, Services]


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[tuple[ThreadboundClient, Services]]:
    config = parse_config({"store": {"url": f"sqlite:///{tmp_path / 'dpy.db'}"}}, env={})
    services = await build_services(
        config, clock=FakeClock(), env={}, provider=ScriptedProvider(lambda _m: Step(text="ok"))
    )
    # dpytest 0.7 builds its test members correctly only with every intent on
    # (with the bot's own, narrower intents its members have no user).
    bot = ThreadboundClient(
        "default", services, ManagerRegistry(), client_intents=discord.Intents.all()
    )
    await bot._async_setup_hook()  # dpytest drives the client without logging it in
    dpytest.configure(bot)
    yield bot, services
    await dpytest.empty_queue()
    await services.close()


async def test_message_in_an_unbound_channel_is_ignored(client: Fixture) -> None:
    """Nothing is bound here: no agent starts and the message gets no reaction."""
    _, services = client
    message = await dpytest.message("hello bot")
    assert services.runtime.resident() == []
    assert message.reactions == []


async def test_message_in_a_bound_channel_reaches_the_agent(client: Fixture) -> None:
    """A bound channel's message is delivered to its session without any mention."""
    _, services = client
    channel = dpytest.get_config().channels[0]
    await services.bindings.bind("agent:dpy", "session", conversation_for("default", channel.id))
    await dpytest.message("do the thing", channel=channel)
    agent = services.runtime.peek("agent:dpy")
    assert agent is not None
    await agent.wait_idle()
    texts = [e.payload["text"] for e in agent.tree.events if e.type == "user_message"]
    assert texts == ["do the thing"]
    # Reactions are checked over the fake Discord: dpytest 0.7 does not keep them.
