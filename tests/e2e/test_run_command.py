"""``python -m bot`` as a process: connects where [discord] says, stops cleanly on SIGINT."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from fakediscord import FakeDiscord

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "process-bot-token"


async def test_bot_process_connects_and_stops_on_sigint(tmp_path: Path) -> None:
    """The bot logs in to the configured Discord, syncs, and on SIGINT exits 0, flushed."""
    async with FakeDiscord(wait_timeout=20) as fake:
        bot = fake.add_bot(TOKEN, "threadbound")
        guild = fake.add_guild("g")
        fake.add_text_channel(guild, "general")
        log_file = tmp_path / "bot.jsonl"
        config = tmp_path / "config.toml"
        config.write_text(
            f'[store]\nurl = "sqlite:///{tmp_path / "bot.db"}"\n'
            f'[logging]\njson_file = "{log_file}"\nconsole = false\n'
            f'[discord]\napi_base_url = "{fake.base_url}/api/v10"\n'
            f'gateway_url = "{fake.gateway_url}"\ncommand_guild_ids = [{guild.id}]\n'
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("DISCORD_TOKEN")}
        env |= {"DISCORD_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "--config",
            str(config),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await fake.wait_ready(bot)
            await fake.wait_for_request("PUT", f"/applications/{bot.id}/guilds/{guild.id}/commands")
        finally:
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(30):
                _, stderr = await process.communicate()
        assert process.returncode == 0, stderr.decode()
        events = [json.loads(line)["event"] for line in log_file.read_text().splitlines()]
        assert "bot.starting" in events
        assert events[-1] == "bot.stopped"
        assert TOKEN not in log_file.read_text()
