"""Matrix beside Discord: a streamed answer's added latency per edit, and a subagent's
whole-life CPU, on a real Synapse and on the fake Discord.

Run with ``python3 tb.py bench matrix``. Nothing here asserts; figures are printed
beside baselines measured in the same run. Both chat servers run in processes of
their own (Synapse as the tests start it, the fake Discord as bench_subagents starts
it), so this process's CPU time is the bot's alone. Both measure the bot's own cost:
Synapse's message rate limits and Discord's are lifted (the bot living with them is
what the tests and bench_popular show).

1. Added latency per edit: one streamed answer growing a word at a time, each edit
   awaited (``flush``) before the next word, spaced so that no pacer holds it; beside
   the same edit sent raw (Matrix: one ``PUT`` of the same ``m.replace`` content with
   aiohttp, of a message in the same thread; Discord: ``Webhook.edit_message`` through a
   bare discord.py webhook), the two interleaved, which goes first alternating (the
   second of two requests in a row is served faster). Added = median(streamed) -
   median(raw).
2. A subagent's whole life (spawn, thread opened and introduced, the answer streamed in
   three chunks, the announcement, the farewell), one after another: this process's CPU
   per life on each platform. Floor for Matrix: the same sends made raw (root, intro,
   answer, two edits, announcement, farewell: seven PUTs), CPU per life.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp  # noqa: E402
import discord  # noqa: E402
from bench_subagents import FakeProcess  # noqa: E402
from mautrix.types import RoomID  # noqa: E402

from adapters.discord.delivery import Persona  # noqa: E402
from adapters.discord.endpoints import use_endpoints  # noqa: E402
from adapters.discord.manager import ManagerRegistry  # noqa: E402
from adapters.discord.sinks import ThreadSink  # noqa: E402
from adapters.discord.streaming import StreamingMessage  # noqa: E402
from adapters.matrix.account import MatrixAccount  # noqa: E402
from adapters.matrix.ids import room_of  # noqa: E402
from adapters.matrix.replies import txn_id  # noqa: E402
from adapters.matrix.sending import MatrixSender  # noqa: E402
from adapters.matrix.streaming import MatrixStream, edit_content, message_content  # noqa: E402
from bot.client import ThreadboundClient  # noqa: E402
from bot.spawn import SpawnCommand, spawn  # noqa: E402
from bot.wiring import build_services  # noqa: E402
from core.bindings.records import ConversationRef  # noqa: E402
from core.clock import FakeClock, SystemClock  # noqa: E402
from core.config import parse_config  # noqa: E402
from core.logging import configure_logging  # noqa: E402
from core.providers.scripted import ScriptedProvider, Step  # noqa: E402
from core.subagents.service import SpawnRequest  # noqa: E402
from tests.matrix.synapse import Synapse, matrix_client, running_synapse  # noqa: E402

EDITS = 150
SPACING = 0.03
"""Seconds between two edits: above the webhook pacer's 1/50 s, so nothing waits on it."""
LIVES = 40
UNLIMITED = {"per_second": 100_000, "burst_count": 100_000}
SYNAPSE_LIMITS_OFF = {
    "rc_message": UNLIMITED,
    "rc_joins": {"local": UNLIMITED, "remote": UNLIMITED},
    "rc_invites": {"per_room": UNLIMITED, "per_user": UNLIMITED, "per_issuer": UNLIMITED},
    "rc_room_creation": UNLIMITED,
}
TOKEN_ENV = "MATRIX_ACCESS_TOKEN"


def med(values: list[float]) -> float:
    return statistics.median(values)


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


# -- Matrix -------------------------------------------------------------------------


async def matrix_edits(server: Synapse) -> tuple[list[float], list[float]]:
    """Per-edit round trips (ms): through a MatrixStream, and raw PUTs of the same edit."""
    async with (
        matrix_client(server, server.owner) as person,
        matrix_client(server, server.bot) as bot,
    ):
        room_id = await person.create_room(invitees=[server.bot.user_id])
        await bot.join_room_by_id(room_id)
        root = await person.send_text(room_id, "🧵 root")
        sender = MatrixSender(bot)
        stream = MatrixStream(sender, room_id, root, key="bench", name="Bench", min_interval=0)
        stream.append("start")
        await stream.flush()
        in_thread = {  # as the stream's own messages are: Synapse does more for a thread's
            "m.relates_to": {
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": root},
            }
        }
        raw_target = await sender.send(
            room_id, message_content("raw", name="Bench") | in_thread, txn=txn_id("bench", "raw")
        )
        url = bot.api.base_url / "_matrix/client/v3/rooms" / room_id / "send/m.room.message"
        headers = {"Authorization": f"Bearer {server.bot.access_token}"}
        streamed: list[float] = []
        raw: list[float] = []
        text = "start"
        async with aiohttp.ClientSession() as http:

            async def through_the_stream(i: int) -> None:
                stream.append(f" w{i}")
                started = time.perf_counter()
                await stream.flush()
                streamed.append((time.perf_counter() - started) * 1000)

            async def raw_put(i: int) -> None:
                nonlocal text
                text += f" w{i}"
                content = edit_content(raw_target, message_content(text, name="Bench"))
                started = time.perf_counter()
                async with http.put(
                    url / txn_id("bench-raw", str(i)), json=content, headers=headers
                ) as response:
                    await response.json()
                raw.append((time.perf_counter() - started) * 1000)

            for i in range(EDITS):  # which goes first alternates: neither gains by its place
                first, second = (
                    (through_the_stream, raw_put) if i % 2 else (raw_put, through_the_stream)
                )
                await first(i)
                await asyncio.sleep(SPACING)
                await second(i)
                await asyncio.sleep(SPACING)
        await stream.close()
        return streamed, raw


async def matrix_lives(server: Synapse, tmp: Path) -> float:
    """CPU (ms) per subagent life on Matrix, lives one after another."""
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp / 'matrix.db'}"},
            "channels": {
                "matrix": {
                    "threadBindings": {"spawnSubagentSessions": True},
                    "accounts": {
                        "default": {
                            "homeserver": server.base_url,
                            "user_id": server.bot.user_id,
                            "access_token_env": TOKEN_ENV,
                        }
                    },
                }
            },
            "agent": {"subagent_timeout_seconds": 0},
        },
        config_path=tmp / "config.toml",
        env={TOKEN_ENV: server.bot.access_token},
    )
    provider = ScriptedProvider(lambda _m: Step(text="done", chunks=3))
    services = await build_services(config, clock=FakeClock(), env={}, provider=provider)
    async with (
        aiohttp.ClientSession() as http,
        matrix_client(server, server.other) as person,
    ):
        room_id = await person.create_room(invitees=[server.bot.user_id])
        async with matrix_client(server, server.bot) as joining:
            await joining.join_room_by_id(room_id)
        account = MatrixAccount(
            "default", services, session=http, clock=SystemClock(), min_edit_interval=0
        )
        runner = asyncio.create_task(account.run())
        try:
            for i in range(3):  # warm up: first-use costs of each path
                await matrix_life(services, account, room_id, f"warm {i}")
            cpu = time.process_time()
            for i in range(LIVES):
                await matrix_life(services, account, room_id, f"task {i}")
            return (time.process_time() - cpu) * 1000 / LIVES
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await services.close()


async def matrix_life(services: Any, account: MatrixAccount, room_id: str, task: str) -> None:
    await services.subagents.spawn(
        SpawnRequest(
            task=task,
            thread=True,
            mode="run",
            requester=room_of("default", room_id),
            scope=room_id,
        )
    )
    await services.subagents.wait_settled()
    await account.drain()


async def matrix_floor(server: Synapse) -> float:
    """CPU (ms) per life for a life's Matrix sends made raw with aiohttp: root, intro,
    the answer and two edits, the announcement, the farewell."""
    async with matrix_client(server, server.owner) as person:
        room_id = await person.create_room(invitees=[server.bot.user_id])
    async with matrix_client(server, server.bot) as bot:
        await bot.join_room_by_id(RoomID(room_id))
    base = f"{server.base_url}/_matrix/client/v3/rooms/{room_id}/send/m.room.message"
    headers = {"Authorization": f"Bearer {server.bot.access_token}"}
    async with aiohttp.ClientSession() as http:

        async def put(txn: str, content: dict[str, Any]) -> str:
            async with http.put(f"{base}/{txn}", json=content, headers=headers) as response:
                return str((await response.json())["event_id"])

        async def life(n: str) -> None:
            root = await put(f"{n}-root", {"msgtype": "m.text", "body": f"🧵 **Agent** — {n}"})
            thread = {"rel_type": "m.thread", "event_id": root}
            await put(
                f"{n}-intro", {"msgtype": "m.notice", "body": "intro", "m.relates_to": thread}
            )
            answer = message_content("do", name="Agent") | {"m.relates_to": thread}
            said = await put(f"{n}-answer", answer)
            for k, text in enumerate(("don", "done")):
                await put(f"{n}-edit{k}", edit_content(said, message_content(text, name="Agent")))
            reply = {"m.in_reply_to": {"event_id": root}}
            await put(f"{n}-done", {"msgtype": "m.text", "body": "done", "m.relates_to": reply})
            await put(f"{n}-bye", {"msgtype": "m.notice", "body": "bye", "m.relates_to": thread})

        for i in range(3):
            await life(f"warm{i}")
        cpu = time.process_time()
        for i in range(LIVES):
            await life(f"life{i}")
        return (time.process_time() - cpu) * 1000 / LIVES


# -- Discord ------------------------------------------------------------------------


async def discord_side(tmp: Path) -> tuple[list[float], list[float], float]:
    """Per-edit round trips (ms) streamed and raw, and CPU (ms) per subagent life."""
    fake = await FakeProcess.start()
    seed = fake.seed
    use_endpoints(seed["api"], seed["gateway"])
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp / 'discord.db'}"},
            "channels": {"discord": {"threadBindings": {"spawnSubagentSessions": True}}},
            "discord": {"command_guild_ids": [seed["guild"]], "webhook_requests_per_second": 50},
            "agent": {"subagent_timeout_seconds": 0},
        },
        env={},
    )
    provider = ScriptedProvider(lambda _m: Step(text="done", chunks=3))
    services = await build_services(config, clock=FakeClock(), env={}, provider=provider)
    bot = ThreadboundClient("default", services, ManagerRegistry(), min_edit_interval=0)
    await bot.login(seed["token"])
    runner = asyncio.create_task(bot.connect())
    try:
        async with asyncio.timeout(60):
            await bot.wait_until_ready()
        record = await services.bindings.bind(
            "bench:stream",
            "session",
            ConversationRef(
                channel="discord",
                account_id="default",
                conversation_id="",
                parent_conversation_id=str(seed["channel"]),
            ),
        )
        thread = discord.Object(int(record.conversation.conversation_id))
        stream = StreamingMessage(
            ThreadSink(bot.account.delivery, record, Persona("Bench")), min_interval=0
        )
        stream.append("start")
        await stream.flush()
        pooled = await bot.account.webhooks.get(seed["channel"])
        streamed: list[float] = []
        raw: list[float] = []
        async with aiohttp.ClientSession() as http:
            bare = discord.Webhook.from_url(pooled.url, session=http)
            target = await bare.send("raw", username="Bench", thread=thread, wait=True)
            text = "start"

            async def through_the_stream(i: int) -> None:
                stream.append(f" w{i}")
                started = time.perf_counter()
                await stream.flush()
                streamed.append((time.perf_counter() - started) * 1000)

            async def raw_edit(i: int) -> None:
                nonlocal text
                text += f" w{i}"
                started = time.perf_counter()
                await bare.edit_message(target.id, content=text, thread=thread)
                raw.append((time.perf_counter() - started) * 1000)

            for i in range(EDITS):  # which goes first alternates, as on Matrix
                first, second = (
                    (through_the_stream, raw_edit) if i % 2 else (raw_edit, through_the_stream)
                )
                await first(i)
                await asyncio.sleep(SPACING)
                await second(i)
                await asyncio.sleep(SPACING)
        await stream.close()

        where = await bot.fetch_channel(seed["channel"])

        async def life(task: str) -> None:
            await spawn(bot.account, SpawnCommand(seed["guild"], where, seed["alice"], task))  # type: ignore[arg-type]
            await services.subagents.wait_settled()
            await bot.account.drain()

        for i in range(3):
            await life(f"warm {i}")
        cpu = time.process_time()
        for i in range(LIVES):
            await life(f"task {i}")
        per_life = (time.process_time() - cpu) * 1000 / LIVES
        return streamed, raw, per_life
    finally:
        await bot.close()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await services.close()
        await fake.stop()


async def main() -> None:
    configure_logging(enabled=False)
    with tempfile.TemporaryDirectory(prefix="tb-bench-matrix-") as tmp_name:
        tmp = Path(tmp_name)
        with running_synapse(tmp / "synapse", extra_config=SYNAPSE_LIMITS_OFF) as server:
            m_streamed, m_raw = await matrix_edits(server)
            m_life = await matrix_lives(server, tmp)
            m_floor = await matrix_floor(server)
        d_streamed, d_raw, d_life = await discord_side(tmp)

    m_added = med(m_streamed) - med(m_raw)
    d_added = med(d_streamed) - med(d_raw)
    print(f"\n[1] a streamed answer's added latency per edit ({EDITS} edits, each awaited)")
    print(
        f"    Matrix:  streamed median {med(m_streamed):.2f} ms (p90 {p90(m_streamed):.2f}), "
        f"raw PUT median {med(m_raw):.2f} ms (p90 {p90(m_raw):.2f}): added {m_added:.2f} ms"
    )
    print(
        f"    Discord: streamed median {med(d_streamed):.2f} ms (p90 {p90(d_streamed):.2f}), "
        f"raw webhook edit median {med(d_raw):.2f} ms (p90 {p90(d_raw):.2f}): "
        f"added {d_added:.2f} ms"
    )
    print(f"\n[2] a subagent's whole life, {LIVES} one after another: the bot's CPU per life")
    print(f"    Matrix:  {m_life:.2f} ms   (floor: the same seven sends raw, {m_floor:.2f} ms)")
    print(f"    Discord: {d_life:.2f} ms")
    print(f"    Matrix / Discord: {m_life / d_life:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
