"""The scenarios' Discord with the bot as a process of its own, so it can be killed.

``python -m bot`` runs as in a deployment (``tests/fixtures/shard_processes.py``), one
process over a SQLite store, against the fake Discord and a model server in this
process that plays the scenario's :class:`~tests.scenarios.platform.Model`: a held
answer streams its first words and waits for the model's release, or for its client
to go away (the process was killed). Reading the guild is as for the bot in this
process (:class:`~tests.scenarios.discord.DiscordReading`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from core.providers.scripted import split_text
from fakediscord import FakeDiscord
from tests.fixtures.fake_llm import RecordedRequest, chunk
from tests.fixtures.shard_processes import (
    WAIT,
    BotProcess,
    ShardWorld,
    TaskLLM,
    shard_world,
    wait_until,
)
from tests.scenarios.discord import AGENT, DiscordReading
from tests.scenarios.platform import PERSONA, Answer, Ask, Model, Thread

AGENTS = f'[agents.{AGENT}]\ndisplay_name = "{PERSONA}"\n'


def ask_of(body: Any) -> Ask:
    """The :class:`Ask` of an OpenAI chat request's messages."""
    messages = body.get("messages") or []
    said = next(
        (str(m.get("content") or "") for m in reversed(messages) if m["role"] == "user"), ""
    )
    last = messages[-1] if messages else {}
    return Ask(said, str(last.get("content") or "") if last.get("role") == "tool" else None)


class ScenarioLLM(TaskLLM):
    """The OpenAI-compatible server the bot's process asks: it answers as ``model`` does."""

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body: Any = json.loads(await request.text())
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body))
        reply = self.model.reply(ask_of(body))
        self.on_change()
        assert reply.tool is None, "the processes' model server makes no tool calls"
        first, *rest = split_text(reply.text, 2) or [""]  # as the scripted provider cuts it
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(self._encode(chunk({"role": "assistant", "content": ""}), "\n"))
        await response.write(self._encode(chunk({"content": first}), "\n"))
        if reply.held:
            self.held += 1
            self.on_change()
            await self.model.gate.wait()  # cancelled if the client goes away
        for piece in rest:
            await response.write(self._encode(chunk({"content": piece}), "\n"))
        await response.write(self._encode(chunk({}, finish_reason="stop"), "\n"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


class DiscordProcesses(DiscordReading):
    """One bot process in guild 0 of a :class:`ShardWorld`; alice owns the sessions."""

    name = "discord"

    def __init__(self, world: ShardWorld, model: Model) -> None:
        self.world = world
        self.fake: FakeDiscord = world.fake
        self.model = model
        self.bot_user, self.owner = world.bot, world.members[0]
        self.other = world.fake.add_member(world.guilds[0], "mallory")
        self._process: BotProcess | None = None

    @classmethod
    @asynccontextmanager
    async def running(cls, tmp: Path, model: Model) -> AsyncIterator[DiscordProcesses]:
        async with ScenarioLLM(model) as llm, FakeDiscord(wait_timeout=WAIT) as fake:
            world = await shard_world(fake, llm, tmp)
            try:
                yield cls(world, model)
            finally:
                await world.stop_all()

    async def start(self, answer: Answer | None = None) -> None:
        if answer is not None:
            self.model.answer = answer
        if self._process is not None:
            await self.world.restart(self._process, [0])
            return
        store = {"url": f"sqlite:///{self.world.tmp / 'bot.db'}"}
        config = self.world.config(store, shard_ids=None, shard_count=None, extra=AGENTS)
        self._process = await self.world.run("bot", config, [0])

    async def kill(self) -> None:
        assert self._process is not None, "the scenario has not started the bot"
        await self._process.kill()

    async def session_thread(self, task: str) -> Thread:
        thread = await self.world.spawn(0, task, mode="session", agent=AGENT)
        found = Thread(thread, str(self.world.channels[0].id))
        await wait_until(self.fake, lambda: self.announced_in(found) or None)
        return found
