"""The bot in a process of its own: the page outlives it, controls it, and nothing is lost.

The playground here runs in the test's process (its fake Discord and its page), the bot
in a child process started by it, as ``python3 tb.py run`` does.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import aiohttp

from bot.playground import Playground
from bot.playground.supervisor import BotProcess
from bot.playground.web import offline_refusal
from fakediscord import Message
from tests.playground.conftest import Page, StartPlayground, until
from tests.playground.test_api import by_name


def bot_of(snapshot: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in snapshot["members"] if m["bot"])


def said(playground: Playground, channel: int, needle: str) -> Message | None:
    return next((m for m in playground.fake.messages_in(channel) if needle in m.content), None)


def offline(playground: Playground) -> bool | None:
    assert playground.world is not None
    return playground.fake.presence(playground.world.bot_user_id) == "offline" or None


def online(playground: Playground) -> bool | None:
    assert playground.world is not None
    return playground.fake.presence(playground.world.bot_user_id) == "online" or None


async def session_thread(playground: Playground, page: Page, task: str) -> tuple[int, str]:
    """Spawn Scout on ``task`` in a session thread and wait for its answer; returns the thread
    and alice's id."""
    snapshot = await page.get("/api/state")
    general = by_name(snapshot, "general")["id"]
    alice = snapshot["users"][0]["id"]
    await page.post(
        "/api/command",
        {
            "channel_id": general,
            "user_id": alice,
            "text": f"/agents spawn task:{task} mode:session",
        },
    )

    def thread() -> int | None:
        found = [c.id for c in playground.fake.state.channels.values() if c.is_thread]
        return found[0] if found else None

    thread_id = await until(playground, thread, "the session's thread")
    await until(playground, lambda: said(playground, thread_id, "Final answer"), "the answer")
    return thread_id, alice


class TestProcesses:
    async def test_the_bot_runs_in_its_own_process(
        self, start_playground: StartPlayground, http: aiohttp.ClientSession
    ) -> None:
        playground = await start_playground(sleep_seconds=0.2, steps=1, bot_process=True)
        assert isinstance(playground.bot, BotProcess)
        pid = playground.bot.pid
        assert pid is not None
        assert pid != os.getpid()
        assert playground.services is None  # nothing of the bot lives in this process
        page = Page(http, playground.url)
        bot = bot_of(await page.get("/api/state"))
        assert (bot["status"], bot["process"], bot["can_kill"]) == ("online", "running", True)

    async def test_stop_and_start_from_the_page_and_the_offline_refusals(
        self, start_playground: StartPlayground, http: aiohttp.ClientSession
    ) -> None:
        playground = await start_playground(sleep_seconds=0.2, steps=1, bot_process=True)
        page = Page(http, playground.url)
        snapshot = await page.get("/api/state")
        general = by_name(snapshot, "general")["id"]
        alice = snapshot["users"][0]["id"]

        stopped = await page.post("/api/bot", {"action": "stop"})
        assert stopped["bot"]["process"] == "stopped"
        assert stopped["bot"]["exit_code"] == 0  # a clean stop
        assert stopped["bot"]["presence"] == "offline"
        assert bot_of(await page.get("/api/state"))["status"] == "offline"
        refused = await page.post("/api/bot", {"action": "stop"}, status=409)
        assert "not running" in refused["error"]

        kept = await page.post(
            "/api/messages", {"channel_id": general, "user_id": alice, "content": "still here"}
        )
        assert playground.fake.message(int(kept["id"])).content == "still here"
        command = {"channel_id": general, "user_id": alice, "text": "/tree"}
        refusal = (await page.post("/api/command", command, status=503))["error"]
        assert refusal == offline_refusal("threadbound")

        started = await page.post("/api/bot", {"action": "start"})
        assert started["bot"]["process"] == "running"
        await until(playground, lambda: online(playground), "the bot back online")
        again = await page.post("/api/bot", {"action": "start"}, status=409)
        assert "already running" in again["error"]
        await page.post("/api/command", command)

    async def test_kill_from_the_page_then_start_reads_back_what_was_written(
        self, start_playground: StartPlayground, http: aiohttp.ClientSession
    ) -> None:
        """The catch-up after downtime, end to end: written while the bot was dead, read
        back once when it starts, and answered."""
        playground = await start_playground(sleep_seconds=0.2, steps=1, bot_process=True)
        page = Page(http, playground.url)
        thread, alice = await session_thread(playground, page, "map the moon")
        figures = await until(
            playground,
            lambda: playground.counts() if playground.counts().bindings else None,
            "the bot's figures",
        )
        assert (figures.bindings, figures.bot) == (1, "online")  # told by the bot's process

        killed = await page.post("/api/bot", {"action": "kill"})
        assert (killed["bot"]["process"], killed["bot"]["exit_code"]) == ("stopped", -9)
        await until(playground, lambda: offline(playground), "the bot offline")
        await page.post(
            "/api/messages", {"channel_id": str(thread), "user_id": alice, "content": "and Venus"}
        )

        await page.post("/api/bot", {"action": "start"})
        notice = await until(
            playground,
            lambda: said(playground, thread, "While the bot was offline, 1 message was written"),
            "the catch-up line",
        )
        assert notice.author_id == playground.world.bot_user_id  # type: ignore[union-attr]
        await until(
            playground,
            lambda: said(playground, thread, "Final answer for “and Venus”"),
            "the answer to what was written meanwhile",
        )
        notices = [m for m in playground.fake.messages_in(thread) if "While the bot" in m.content]
        assert len(notices) == 1  # read back once

    async def test_a_bot_killed_from_outside_shows_offline_and_can_be_started(
        self, start_playground: StartPlayground, http: aiohttp.ClientSession
    ) -> None:
        playground = await start_playground(sleep_seconds=0.2, steps=1, bot_process=True)
        assert isinstance(playground.bot, BotProcess)
        pid = playground.bot.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await until(playground, lambda: offline(playground), "the bot offline")
        await until(playground, lambda: playground.bot.state == "stopped" or None, "the exit seen")
        page = Page(http, playground.url)
        bot = bot_of(await page.get("/api/state"))
        assert (bot["status"], bot["process"], bot["exit_code"]) == ("offline", "stopped", -9)
        await page.post("/api/bot", {"action": "start"})
        await until(playground, lambda: online(playground), "the bot back online")
