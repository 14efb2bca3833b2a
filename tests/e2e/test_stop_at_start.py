"""Stopping the bot while it starts: discord.py's start-up wait ends with the client.

After ``READY`` discord.py waits for the guilds in a task of its own
(``_delay_ready``, up to ``guild_ready_timeout``) before it dispatches
``ready``. A stop in that window used to leave the task running: it then
dispatched ``ready`` on the closed client, failed, and asyncio logged "Task
exception was never retrieved … _delay_ready" (the playground, whose loop
outlives the bot, showed it a second or two after every early stop).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from adapters.discord.manager import ManagerRegistry
from bot.app import shut_down
from bot.client import ShardedThreadboundClient, client_for
from fakediscord import FakeDiscord
from tests.e2e.conftest import TOKEN, Clients, StartBot
from tests.e2e.helpers import TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
STARTING_TOKEN = "stopped-while-starting-token"


def delay_ready_tasks() -> list[asyncio.Task[Any]]:
    return [
        t
        for t in asyncio.all_tasks()
        if getattr(t.get_coro(), "__name__", "") == "_delay_ready" and not t.done()
    ]


async def test_a_stop_before_ready_ends_the_wait_with_no_unretrieved_exception(
    start_bot: StartBot,
) -> None:
    """Stopped between READY and on_ready: the wait ends at once, without an exception,
    and nothing reaches the loop's exception handler."""
    bot = await start_bot()
    (waiting,) = delay_ready_tasks()  # READY parsed, on_ready not yet dispatched
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        await shut_down(bot.services, [bot.client], drain_seconds=1)
        async with asyncio.timeout(TIMEOUT):
            await asyncio.wait([waiting])
    finally:
        loop.set_exception_handler(previous)
    assert waiting.cancelled() or waiting.exception() is None
    assert bot.client.is_closed()
    assert reported == []


async def test_the_sharded_client_ends_its_waits_too(start_bot: StartBot, clients: Clients) -> None:
    """The sharded bot waits per shard, then for all of them: every wait ends at the stop,
    and the closed bot never runs its ``ready`` handler."""
    bot = await start_bot(discord_settings={"shard_count": 1})
    await bot.client.close()
    sharded = client_for("default", bot.services, ManagerRegistry())
    assert isinstance(sharded, ShardedThreadboundClient)
    await clients.start(sharded, TOKEN)
    state: Any = sharded._connection
    waits = [t for t in [state._ready_task, *state._ready_tasks.values()] if t is not None]
    assert waits
    assert not all(t.done() for t in waits)  # READY parsed, shard_ready not yet
    with capture_logs() as logs:
        await sharded.close()
        async with asyncio.timeout(TIMEOUT):
            await asyncio.wait(waits)
    assert all(t.cancelled() or t.exception() is None for t in waits)
    assert [e for e in logs if e["event"] == "bot.ready"] == []  # no ready on a closed bot


async def test_a_process_stopped_while_its_commands_sync_exits_cleanly(tmp_path: Path) -> None:
    """``python -m bot`` stopped during its setup (the command sync held at the fake's door):
    exit 0, no traceback, no unretrieved task; the bot logs that it stopped."""
    async with FakeDiscord(wait_timeout=20) as fake:
        fake.add_bot(STARTING_TOKEN, "threadbound")
        guild = fake.add_guild("g")
        fake.add_text_channel(guild, "general")
        log_file = tmp_path / "bot.jsonl"
        config = tmp_path / "config.toml"
        config.write_text(
            f'[store]\nurl = "sqlite:///{tmp_path / "bot.db"}"\n'
            f'[logging]\njson_file = "{log_file}"\n'
            f'[discord]\napi_base_url = "{fake.base_url}/api/v10"\n'
            f'gateway_url = "{fake.gateway_url}"\ncommand_guild_ids = [{guild.id}]\n'
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("DISCORD_TOKEN")}
        env |= {"DISCORD_TOKEN": STARTING_TOKEN, "PYTHONPATH": str(ROOT)}
        syncing = fake.hold("PUT", "/applications/*/guilds/*/commands")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "bot", "--config", str(config)),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await syncing.wait_entered()
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(30):
                stdout, stderr = await process.communicate()
        finally:
            syncing.release()
            if process.returncode is None:
                process.kill()
        said = stdout.decode() + stderr.decode()
        assert process.returncode == 0, said
        assert "Traceback" not in said
        assert "Task exception was never retrieved" not in said
        events = [json.loads(line)["event"] for line in log_file.read_text().splitlines()]
        assert events[-1] == "bot.stopped"
