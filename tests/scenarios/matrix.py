"""The scenarios' Matrix: the real services on a real Synapse, people as mautrix clients.

The bot is :func:`tests.matrix.bots.services_bot` (the services with the scripted
model and a fake clock the scheduler is ticked on, the Matrix account plugged in as
the app plugs it), one account over one store; a stop closes its services, a start
after it builds them again over the same store and account, as a restarted process
would. People act as their client lets them (:mod:`tests.scenarios.matrix_reading`):
``!agents spawn`` in the room opens a session's thread, a person's reaction on the
prompt answers an approval, ``!cancel`` and ``!schedule add`` are typed in the
thread. (``kill -9`` needs a process of its own: see ``matrix_processes.py``.)
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final

from mautrix.client import Client
from mautrix.types import EventID, RoomID

from adapters.matrix.approvals import EMOJI, FIELD
from adapters.matrix.ids import thread_of
from core.clock import FakeClock
from core.providers.scripted import ScriptedProvider
from tests.e2e.test_mcp_tools import APPROVE_CONVERT
from tests.matrix.bots import Bot, a_person, services_bot
from tests.matrix.synapse import MatrixUser, Synapse
from tests.scenarios.matrix_reading import AGENT, Event, MatrixReading, last_edits, relation
from tests.scenarios.platform import PERSONA, WAIT, Answer, Model, Person, Thread

__all__ = ["MatrixPlatform"]

ACCOUNT: Final = "default"
AGENTS: Final = {AGENT: {"display_name": PERSONA}}
"""The one agent profile every scenario's sessions run as."""
SPAWN_THREADS: Final = {"spawnSubagentSessions": True}
"""The operator's ``[channels.matrix.threadBindings]``: a spawn opens a thread."""
NO_TIMEOUT: Final = {"subagent_timeout_seconds": 0}
"""No subagent timeout on the fake clock the scheduler's time passes on."""
_bots = itertools.count()


class MatrixPlatform(MatrixReading):
    """The bot's services, running (syncing) between :meth:`start` and :meth:`stop`."""

    name = "matrix"

    def __init__(
        self,
        synapse: Synapse,
        tmp_path: Path,
        user: MatrixUser,
        owner: Client,
        other: Client,
        model: Model,
    ) -> None:
        self.synapse = synapse
        self.tmp_path = tmp_path
        self.user = user
        self.bot_id = user.user_id
        self.owner = owner
        self.other = other
        self.model = model
        self._bot: Bot | None = None
        self._running: AsyncExitStack | None = None

    @classmethod
    @asynccontextmanager
    async def running(
        cls, synapse: Synapse, tmp_path: Path, model: Model
    ) -> AsyncIterator[MatrixPlatform]:
        user = synapse.register(f"tb-scenario-bot-{next(_bots)}")
        async with a_person(synapse) as owner, a_person(synapse) as other:
            platform = cls(synapse, tmp_path, user, owner, other, model)
            try:
                yield platform
            finally:
                await platform.stop()

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
        stack = AsyncExitStack()
        self._bot = await stack.enter_async_context(
            services_bot(
                self.synapse,
                self.tmp_path,
                provider=ScriptedProvider(self.model.step),
                user=self.user,
                thread_bindings=SPAWN_THREADS,
                agent_settings=NO_TIMEOUT,
                **options,
            )
        )
        first_ever = await self.bot.services.inbox.position("matrix", ACCOUNT) is None
        watched = await stack.enter_async_context(self.bot.running())
        self._running = stack
        if first_ever:  # its first sync: what came before it is history, not for the bot
            await watched.wait_batches(1)
        if self.room is None:
            await self.open_room()

    async def stop(self) -> None:
        """What a clean stop does: what the presenters queued is sent, then the account
        stops syncing and the services close."""
        if self._running is None:
            return
        if self.bot.presenters is not None:
            async with asyncio.timeout(WAIT):
                await self.bot.presenters.drain()
        running, self._running = self._running, None
        await running.aclose()

    async def session_thread(self, task: str) -> Thread:
        thread = await self.spawn(task, mode="session")
        await self.read_until(thread, lambda shown: any(s.author == PERSONA for s in shown))
        await self.settled(thread)
        return thread

    async def settled(self, thread: Thread) -> None:
        conversation = thread_of(ACCOUNT, RoomID(thread.room), EventID(thread.id))
        (record,) = [
            r
            for r in self.bot.services.bindings.live()
            if r.conversation.conversation_id == conversation.conversation_id
        ]
        agent = await self.bot.services.runtime.get(record.target_session_key)
        async with asyncio.timeout(WAIT):
            await agent.wait_idle()
            await self.bot.services.subagents.wait_settled()
            if self.bot.presenters is not None:
                await self.bot.presenters.drain()

    async def command(self, thread: Thread, name: str, *, by: Person = "owner") -> str:
        return await self.typed(f"!{name}", thread=thread, by=by)

    async def approve(self, thread: Thread, choice: str, *, by: Person = "owner") -> str:
        """The person taps the bot's reaction for ``choice`` on the thread's waiting
        prompt; the bot's notice to them, or the prompt's words once it ended."""
        room = RoomID(thread.room)
        wanted = EMOJI[choice]

        def offered(events: list[Event]) -> tuple[str, str] | None:
            prompts = [
                e["event_id"]
                for e in events
                if FIELD in (e.get("content") or {})
                and e["sender"] == self.bot_id
                and relation(e).get("event_id") == thread.id
            ]
            if not prompts:
                return None
            keys = [
                str(relation(e)["key"])
                for e in events
                if e["type"] == "m.reaction"
                and e["sender"] == self.bot_id
                and relation(e).get("event_id") == prompts[-1]
                and bare(str(relation(e).get("key"))) == bare(wanted)
            ]
            return (prompts[-1], keys[0]) if keys else None

        prompt, key = await self.until(room, offered)
        before = len(notices(await self.events(room), self.bot_id, prompt))
        await self.person(by).react(room, EventID(prompt), key)

        def answered(events: list[Event]) -> str | None:
            told = notices(events, self.bot_id, prompt)
            if len(told) > before:
                return told[-1]
            return last_edits(events).get(prompt)

        return await self.until(room, answered)

    async def schedule(self, thread: Thread, task: str, *, minutes: int) -> str:
        assert '"' not in task, "a task is typed quoted"
        return await self.typed(f'!schedule add when:"in {minutes}m" task:"{task}"', thread=thread)

    async def pass_time(self, minutes: int) -> None:
        clock = self.bot.services.bindings.clock
        assert isinstance(clock, FakeClock)
        await clock.advance(minutes * 60)
        await self.bot.services.scheduler.tick()
        async with asyncio.timeout(WAIT):
            await self.bot.services.scheduler.wait_started()


def bare(key: str) -> str:
    """An emoji without its variation selector (clients send ♾️ and ♾ alike)."""
    return key.replace("\ufe0f", "")


def notices(events: list[Mapping[str, Any]], bot_id: str, prompt: str) -> list[str]:
    """The bot's replies to the prompt (its notices to the people who reacted)."""
    return [
        str(e["content"]["body"])
        for e in events
        if e["sender"] == bot_id
        and e["type"] == "m.room.message"
        and (relation(e).get("m.in_reply_to") or {}).get("event_id") == prompt
        and FIELD not in e["content"]
    ]
