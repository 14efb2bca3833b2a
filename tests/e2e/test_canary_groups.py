"""The canary report over the bot's own JSON log: every line lands under its account and guild.

A failed stream edit, a failed fallback announcement and the fallback's routing
decision are written by three different places; none knew the account or the
guild it worked for, so the report grouped them under "account -" or "guild -".
Here the real bot runs against the fake Discord with its JSON log configured as
``python -m bot`` configures it, and the report reads the file it wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.canary import CanaryReport, build_report
from core.logging import configure_logging, reset_logging
from core.providers.scripted import Step
from tests.e2e.conftest import StartBot
from tests.e2e.helpers import TIMEOUT, done, spawn

ANSWER = "LONG " + " ".join(f"w{i}" for i in range(60))


def report_of(path: Path) -> CanaryReport:
    """The canary report over the whole log file, as ``python -m bot canary`` reads it."""
    return build_report(path.read_text().splitlines(), since_ts=None)


@pytest.fixture
def json_log(tmp_path: Path) -> Iterator[Path]:
    """The bot's JSON log file for the test, through the real logging configuration."""
    path = tmp_path / "bot.jsonl"
    configure_logging(json_path=path, console=False)
    try:
        yield path
    finally:
        reset_logging()


async def test_failures_and_fallbacks_are_grouped_by_account_and_guild(
    start_bot: StartBot, json_log: Path
) -> None:
    """Locked mid-stream, then the fallback post refused once: every counted line has both."""
    gate = asyncio.Event()
    bot = await start_bot([Step(text=ANSWER, chunks=6, gate=gate)])
    await spawn(bot, "say it all", mode="session")
    record = bot.binding()
    thread = int(record.conversation.conversation_id)
    channel = bot.world.channel.id
    await bot.fake.wait_for_message(thread, lambda m: m.webhook_id is not None)  # 1st piece
    await bot.fake.archive_thread(thread, locked=True)  # the next edit fails, the binding ends
    bot.fake.fail_next("POST", f"/channels/{channel}/messages", 403, code=50013)
    gate.set()

    async with asyncio.timeout(TIMEOUT):
        await bot.clock.wait_for_sleepers()  # the refused announcement waits for its retry
        await bot.clock.advance(60)
    await bot.fake.wait_for_message(channel, lambda m: "completed its task" in m.content)
    await done(bot)

    report = report_of(json_log)
    guild = str(bot.world.guild.id)
    assert [(g.account, g.guild) for g in report.groups] == [("default", guild)]
    (group,) = report.groups
    assert group.resolutions_by_mode.get("fallback", 0) >= 1  # the announcement's routing
    assert group.fallbacks >= 1
    assert set(group.failures_by_path) == {"webhook", "bot"}  # the stream's, the announcement's


async def test_a_legacy_answer_that_cannot_be_posted_is_grouped_too(
    start_bot: StartBot, json_log: Path
) -> None:
    """spawnSubagentSessions off: the answer refused in the channel is one delivery.failed,
    under the account and guild it was asked in."""
    bot = await start_bot([Step(text="legacy answer")], spawn_threads=False)
    channel = bot.world.channel.id
    bot.fake.fail_next("POST", f"/channels/{channel}/messages", 403, code=50013)
    await spawn(bot, "answer here")
    await bot.fake.wait_for_request("POST", f"/channels/{channel}/messages")
    await done(bot)

    report = report_of(json_log)
    (group,) = report.groups
    assert (group.account, group.guild) == ("default", str(bot.world.guild.id))
    assert group.failures_by_path == {"bot": 1}
