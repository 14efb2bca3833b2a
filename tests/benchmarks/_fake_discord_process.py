"""The fake Discord in a process of its own, for benchmarks that time the bot alone.

Prints one JSON line (addresses, token, ids), then answers commands on stdin,
one per line: ``count <channel id>...`` prints how many messages in each
channel contain the announcement text; ``quit`` (or end of input) stops.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakediscord import FakeDiscord, RateLimits

ANNOUNCED = "completed its task."


async def main() -> None:
    # Unlimited: this measures the bot's own work; Discord's limits are bench_popular's.
    async with FakeDiscord(
        wait_timeout=120, keep_requests=1000, rate_limits=RateLimits.off()
    ) as fake:
        bot = fake.add_bot("bench-bot", "threadbound")
        floor = fake.add_bot("floor-bot", "floor")  # bare discord.py, for the floor
        guild = fake.add_guild("bench")
        channel = fake.add_text_channel(guild, "general")
        alice = fake.add_member(guild, "alice")
        seed = {
            "api": f"{fake.base_url}/api/v10",
            "gateway": fake.gateway_url,
            "token": "bench-bot",
            "bot": bot.id,
            "floor_token": "floor-bot",
            "floor_bot": floor.id,
            "guild": guild.id,
            "channel": channel.id,
            "alice": alice.id,
        }
        print(json.dumps(seed), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).split()
            if not line or line[0] == "quit":
                return
            if line[0] == "count":
                counts = {
                    cid: sum(ANNOUNCED in m.content for m in fake.messages_in(int(cid)))
                    for cid in line[1:]
                }
                print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
