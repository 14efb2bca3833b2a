"""A popular bot at a small scale, under Discord's real limits: 100 subagents streaming at once.

The invariants of ``tests/benchmarks/bench_popular.py`` (which measures the
1,000-stream scene), checked with the real discord.py client against the fake
Discord limiting as Discord does (``RateLimits.discord()``) and the bot's own
pacing defaults (45 requests a second with its token, one at a time per persona
webhook, 10 webhooks per channel):

- no 429 of global scope;
- every completion announced exactly once, in its own thread;
- every answer's final text whole in its thread;
- people's acknowledgements ahead of the rest: no request of the bot's token
  queued behind a 🧭 / 📥 reaction, or still waiting when the reaction was
  queued, is let go before it.

100 subagents are spawned at once over 5 channels (20 threads under each, so the
threads share webhooks). Every answer streams its first half, then waits for
the test (a gate, so nothing here sleeps): 10 people steer and 10 queue a
follow-up in the first threads while the rest of the spawns still flood the
bot's token; once each is acknowledged the gate opens, and each of those 20
subagents answers once more before it completes.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from adapters.discord.manager import ManagerRegistry
from adapters.discord.pacing import Lane, Pacer, current_lane
from bot.client import ThreadboundClient
from bot.wiring import Services, build_services
from core.clock import FakeClock
from core.config import parse_config
from core.providers.types import ChatMessage, ProviderEvent, StreamDone, TextDelta, ToolSpec
from fakediscord import FakeDiscord
from fakediscord.ratelimits import RateLimits
from tests.e2e.conftest import TOKEN, Clients, World
from tests.e2e.helpers import ANNOUNCED, persona_messages, thread_of
from tests.fakediscord.conftest import running_fake

SPAWNS = 100
CHANNELS = 5
STEERS = 10
FOLLOW_UPS = 10
CHUNKS = 8
HALF = CHUNKS // 2
WAIT = 60.0
"""Seconds any one wait may take: the whole scene is paced at Discord's rates (~30 s)."""

_TASK = re.compile(r"popular-task-(\d+)")


def chunk_text(task: int, call: int, index: int) -> str:
    text = f"⟦{task}.{call}.{index}⟧ the quick brown fox jumps over the lazy dog."
    return text if index == 0 else " " + text


def answer_text(task: int, call: int) -> str:
    return "".join(chunk_text(task, call, k) for k in range(CHUNKS))


class GatedModel:
    """Every answer streams its first :data:`HALF` chunks, then waits for ``gate`` (unless
    it is open already) before the rest; ``calls`` counts the answers by task."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls: Counter[int] = Counter()
        self._held: dict[int, asyncio.Event] = {}

    def held(self, task: int) -> asyncio.Event:
        """Set once ``task``'s first answer streams and waits at the gate."""
        return self._held.setdefault(task, asyncio.Event())

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        task = next(int(found[1]) for m in messages if (found := _TASK.search(m.content or "")))
        call = self.calls[task]
        self.calls[task] += 1
        for index in range(CHUNKS):
            if index == HALF and not self.gate.is_set():
                self.held(task).set()
                await self.gate.wait()
            yield TextDelta(text=chunk_text(task, call, index))
            await asyncio.sleep(0)  # a network's pause between chunks, not a timed one
        yield StreamDone(finish_reason="stop")


@dataclass
class Paced:
    """One request of the bot's token through its pacer: its lane, the grants counted
    when it was queued, and its rank among the requests sent (None: never sent itself)."""

    lane: Lane
    granted_before: int
    rank: int | None = None


def record_pacing(pacer: Pacer) -> list[Paced]:
    """Note every request ``pacer`` paces, in the order queued. The pacer grants one
    request at a time and each granted caller sends at once, so the order of sending
    is the order of granting: the ``rank``-th request sent was the ``rank``-th granted."""
    log: list[Paced] = []
    run = pacer.run
    sent = 0

    async def recorded(send: Callable[[], Awaitable[Any]], *, key: str | None = None) -> Any:
        entry = Paced(current_lane(), pacer.started)
        log.append(entry)

        def sending() -> Awaitable[Any]:
            nonlocal sent
            sent += 1
            entry.rank = sent
            return send()

        return await run(sending, key=key)

    pacer.run = recorded  # type: ignore[method-assign]
    return log


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The fake Discord limiting as Discord does."""
    async with running_fake(rate_limits=RateLimits.discord()) as server:
        server.wait_timeout = WAIT
        yield server


@pytest.fixture
async def services(tmp_path: Path, world: World) -> AsyncIterator[tuple[Services, GatedModel]]:
    model = GatedModel()
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'bot.db'}"},
            "channels": {"discord": {"threadBindings": {"spawnSubagentSessions": True}}},
            # the real pacing: no webhook_requests_per_second override
            "discord": {"command_guild_ids": [world.guild.id]},
            "agent": {"subagent_timeout_seconds": 0},
        },
        config_path=tmp_path / "config.toml",
        env={},
    )
    built = await build_services(config, clock=FakeClock(), env={}, provider=model)
    yield built, model
    await built.close()


async def test_100_streams_under_discord_limits_keep_the_invariants(
    fake: FakeDiscord,
    clients: Clients,
    world: World,
    services: tuple[Services, GatedModel],
) -> None:
    built, model = services
    channels = [world.channel] + [
        fake.add_text_channel(world.guild, f"busy-{c}") for c in range(1, CHANNELS)
    ]
    client = ThreadboundClient("default", built, ManagerRegistry(), min_edit_interval=0)
    pacing = record_pacing(client.pacer)
    await clients.start(client, TOKEN)

    handles = [
        await fake.invoke_command(
            world.guild,
            channels[task % CHANNELS],
            world.alice,
            "agents spawn",
            {"task": f"Write popular-task-{task}."},
        )
        for task in range(SPAWNS)
    ]

    # the first threads' people write while the other spawns still queue on the token
    people: list[tuple[int, int, str]] = []  # thread, message, mark expected
    async with asyncio.timeout(WAIT):
        for task in range(STEERS + FOLLOW_UPS):
            thread = thread_of(await handles[task].wait_followups(1))
            await model.held(task).wait()  # streaming, and waiting for the rest
            steer = task < STEERS
            text = "focus on the summary" if steer else ">> then list your sources"
            message = await fake.user_says(thread, world.alice, text)
            people.append((thread, message.id, "🧭" if steer else "📥"))
        marks = [
            unquote(
                (
                    await fake.wait_for_request(
                        "PUT",
                        f"/channels/{thread}/messages/{message_id}/reactions/",
                        lambda r: r.status is not None and r.status < 300,
                    )
                ).path
            ).split("/")[-2]
            for thread, message_id, _ in people
        ]
        model.gate.set()
        threads = [thread_of(await handle.wait_followups(1)) for handle in handles]
        await built.subagents.wait_settled()
        await client.account.drain()

    assert marks == [mark for _, _, mark in people]
    # the bot's token never went over Discord's 50 requests a second
    assert fake.rate_limits.counts_by_scope["global"] == 0, fake.rate_limits.counts_by_scope

    # every completion announced exactly once, in its own thread
    announced = [sum(ANNOUNCED in m.content for m in fake.messages_in(t)) for t in threads]
    assert announced == [1] * SPAWNS
    assert not [m for c in channels for m in fake.messages_in(c.id) if ANNOUNCED in m.content]

    # every answer whole: the people's subagents answered twice, the others once
    assert model.calls == {t: 2 if t < STEERS + FOLLOW_UPS else 1 for t in range(SPAWNS)}
    for task, thread in enumerate(threads):
        shown = [m.content for m in persona_messages(fake, thread)]
        for call in range(model.calls[task]):
            assert answer_text(task, call) in shown, (task, call, shown)

    # acknowledgements first: no request of a lower lane was let go between a reaction
    # being queued and the reaction being let go (one granted before it was queued aside)
    reactions = [(n, p) for n, p in enumerate(pacing) if p.lane is Lane.PEOPLE]
    assert len(reactions) >= len(people)
    overtaken = 0
    for n, reaction in reactions:
        assert reaction.rank is not None
        ahead = [
            p
            for p in pacing
            if p.lane > Lane.PEOPLE
            and p.rank is not None
            and reaction.granted_before < p.rank < reaction.rank
        ]
        assert not ahead, (reaction, ahead)
        overtaken += sum(
            1
            for p in pacing[:n]
            if p.lane > Lane.PEOPLE and p.rank is not None and p.rank > reaction.rank
        )
    # ... and it mattered: the reactions went ahead of requests queued before them
    assert overtaken > 0
