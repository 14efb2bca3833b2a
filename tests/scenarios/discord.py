"""The scenarios' Discord: the real client in this process over the fake Discord.

The bot is started with the end-to-end suite's ``start_bot`` (the scripted model, a
fake clock the scheduler is ticked on); alice owns the sessions, mallory is another
member of the guild. What a person sees is read from the fake's messages: a persona
message is a webhook message under the persona's name, the thread's other lines are
the bot's own. (``kill -9`` needs a process of its own: see ``discord_processes.py``.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fakediscord import FakeDiscord
from fakediscord.models import Message, User
from tests.e2e.conftest import Bot, StartBot, World
from tests.e2e.helpers import content, done, run, settle, spawn, thread_of
from tests.e2e.test_interrupted import stopped_cleanly
from tests.e2e.test_mcp_tools import APPROVE_CONVERT, approval_message, buttons, press
from tests.e2e.test_schedule import tick
from tests.fixtures.shard_processes import announcements
from tests.scenarios.platform import (
    PERSONA,
    WAIT,
    Answer,
    Model,
    Person,
    Said,
    Shown,
    Thread,
)

AGENT = "scout"
AGENTS = {AGENT: {"display_name": PERSONA}}
"""The one agent profile every scenario's sessions run as."""


class DiscordReading:
    """What people in the guild see: shared by the in-process bot and the processes."""

    fake: FakeDiscord
    bot_user: User
    owner: User
    other: User

    def person(self, by: Person) -> User:
        return self.owner if by == "owner" else self.other

    def shown(self, message: Message) -> Shown:
        if message.webhook_id is not None and message.interaction_id is None:
            author = message.username or "webhook"
        elif message.author_id == self.owner.id:
            author = "owner"
        elif message.author_id == self.other.id:
            author = "other"
        else:
            author = "bot"
        return Shown(author, message.content)

    async def read(self, thread: Thread) -> list[Shown]:
        return [self.shown(m) for m in self.fake.messages_in(int(thread.id)) if m.type == 0]

    async def read_until(self, thread: Thread, done: Callable[[list[Shown]], bool]) -> list[Shown]:
        def probe() -> list[Shown] | None:
            shown = [self.shown(m) for m in self.fake.messages_in(int(thread.id)) if m.type == 0]
            return shown if done(shown) else None

        async with asyncio.timeout(WAIT):
            return await self.fake.state.changed.wait_for(probe)

    async def announcements(self, thread: Thread) -> list[str]:
        return self.announced_in(thread)

    def announced_in(self, thread: Thread) -> list[str]:
        return announcements(self.fake, thread.id)

    async def marks(self, said: Said) -> list[str]:
        def probe() -> list[str] | None:
            message = self.fake.message(int(said.id))
            found = [r.emoji_name for r in message.reactions if self.bot_user.id in r.user_ids]
            return found or None

        async with asyncio.timeout(WAIT):
            return await self.fake.state.changed.wait_for(probe)

    async def say(self, thread: Thread, text: str, *, by: Person = "owner") -> Said:
        message = await self.fake.user_says(int(thread.id), self.person(by), text)
        return Said(str(message.id), thread, text)


class DiscordPlatform(DiscordReading):
    """The bot in this process, restarted over the same store."""

    name = "discord"

    def __init__(self, start_bot: StartBot, fake: FakeDiscord, world: World, model: Model) -> None:
        self.fake = fake
        self.model = model
        self.bot_user, self.owner = world.bot, world.alice
        self.other = fake.add_member(world.guild, "mallory")
        self._start_bot = start_bot
        self._bot: Bot | None = None

    @property
    def bot(self) -> Bot:
        assert self._bot is not None, "the scenario has not started the bot"
        return self._bot

    async def start(self, answer: Answer | None = None, *, approvals: bool = False) -> None:
        if answer is not None:
            self.model.answer = answer
        options: dict[str, Any] = {"agents": AGENTS}
        if approvals:
            tools = {"tools": ["mcp:clock"]}
            options |= {
                "mcp_servers": {"clock": APPROVE_CONVERT},
                "agents": {name: profile | tools for name, profile in AGENTS.items()},
            }
        self._bot = await self._start_bot(self.model.step, **options)
        async with asyncio.timeout(WAIT):
            await self._bot.client.account.catch_up.wait_finished()

    async def stop(self) -> None:
        await stopped_cleanly(self.bot)

    async def spawn(self, task: str, *, mode: str = "session") -> Thread:
        followups = await spawn(self.bot, task, mode=mode, agent=AGENT)
        return Thread(str(thread_of(followups)), str(self.bot.world.channel.id))

    async def session_thread(self, task: str) -> Thread:
        thread = await self.spawn(task, mode="session")
        await self.settled(thread)
        return thread

    async def settled(self, thread: Thread) -> None:
        (record,) = [
            r
            for r in self.bot.services.bindings.live()
            if r.conversation.conversation_id == thread.id
        ]
        await settle(self.bot, record.target_session_key)
        await done(self.bot)

    async def command(self, thread: Thread, name: str, *, by: Person = "owner") -> str:
        return content(await run(self.bot, self.person(by), name, int(thread.id)))

    async def approve(self, thread: Thread, choice: str, *, by: Person = "owner") -> str:
        message = await approval_message(self.bot, int(thread.id))
        handle = await press(self.bot, message, choice, self.person(by))
        async with asyncio.timeout(WAIT):
            response = await handle.wait_response()
        if response.callback_type == 4:  # a reply of its own: the press was refused
            return str(response.body["data"]["content"])

        def decided() -> str | None:
            shown = self.fake.message(message.id)
            return shown.content if not buttons(shown) else None

        async with asyncio.timeout(WAIT):
            return await self.fake.state.changed.wait_for(decided)

    async def schedule(self, thread: Thread, task: str, *, minutes: int) -> str:
        when = f"in {minutes}m"
        answer = await run(
            self.bot, self.owner, "schedule add", int(thread.id), when=when, task=task
        )
        return content(answer)

    async def pass_time(self, minutes: int) -> None:
        await tick(self.bot, minutes * 60)
