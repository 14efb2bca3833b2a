"""What a scenario may do and see, the same on every chat platform.

A scenario (``test_scenarios.py``) is written once against :class:`Platform`: people
start sessions, write in their threads, type commands, answer approvals, and read
back what the bot showed them, as their client renders it. Each platform's driver
(``discord.py`` over the fake Discord, ``matrix.py`` over a real Synapse) turns
those steps into what a person there does. A scenario that kills the bot asks for a
:class:`Crashable` platform instead, whose bot is a ``python -m bot`` process
(``discord_processes.py``, ``matrix_processes.py``), since only a process can be
killed for real.

A step a driver cannot take because the product cannot do it there yet raises
:class:`Missing`, naming what is missing; the scenario is marked
``xfail(strict=True, raises=Missing)`` for that platform only, so it fails loudly the
day the step works.

The model is scripted the same way for both (:class:`Model`): it answers by what it
was told last, and an answer may hold after its first words until the scenario lets
it go, so a scenario can act mid-stream without any timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from core.providers.scripted import Step
from core.providers.types import ChatMessage, ToolCall

__all__ = [
    "ANNOUNCED",
    "NEEDS_APPROVAL",
    "PERSONA",
    "WAIT",
    "Answer",
    "Ask",
    "Crashable",
    "Missing",
    "Model",
    "Person",
    "Platform",
    "Reply",
    "Said",
    "Shown",
    "Thread",
    "answer_to",
]

WAIT = 30.0
"""The longest any one step may take before the scenario fails."""
ANNOUNCED = ("completed its task.", "failed.", "timed out")
"""The words that make a message a completion announcement."""
PERSONA = "Scout"
"""The display name of the agent every scenario's sessions speak as."""

Person = Literal["owner", "other"]
"""Who acts: the person who started the session, or someone else in the room."""


class Missing(NotImplementedError):
    """A step this platform's driver cannot take yet, because the bot cannot do it there:
    its message names the missing feature."""


@dataclass(frozen=True)
class Thread:
    """A session's thread, as a driver finds it again (the ids are its own)."""

    id: str
    room: str


@dataclass(frozen=True)
class Said:
    """A message a person wrote in a thread."""

    id: str
    thread: Thread
    text: str


@dataclass(frozen=True)
class Shown:
    """One message in a thread as a person's client renders it: its last edit, and who
    wrote it (the persona's name for the agent, ``"bot"`` for the bot's own lines, the
    person's role for people)."""

    author: str
    text: str


@dataclass(frozen=True)
class Ask:
    """What the model is asked: the last thing a person said, or a tool's result."""

    said: str
    tool_result: str | None = None


@dataclass(frozen=True)
class Reply:
    """What the model answers: ``text``, held after its first words until
    :meth:`Model.release` when ``held``; then ``tool``, if any."""

    text: str
    held: bool = False
    tool: ToolCall | None = None


Answer = Callable[[Ask], Reply]
"""How a scenario's model answers."""

NEEDS_APPROVAL = ToolCall(
    id="t2",
    name="clock__convert_time",
    arguments='{"source_timezone": "Europe/Paris", "time": "12:00", '
    '"target_timezone": "Asia/Tokyo"}',
)
"""The call a scenario's model makes that needs the owner's approval when the bot is
started with ``approvals`` (the time server's ``convert_time``)."""


def answer_to(ask: Ask) -> Reply:
    """The model's default: it answers each message at once, naming it."""
    return Reply(f"answer to {ask.said}")


class Model:
    """The scripted model a scenario's bot runs, on any platform.

    ``answer`` decides each reply from an :class:`Ask`; :attr:`asked` records each.
    A held reply streams its first words, then waits for :meth:`release` (one gate:
    once released, later held replies run through).
    """

    def __init__(self, answer: Answer = answer_to) -> None:
        self.answer = answer
        self.asked: list[Ask] = []
        self.gate = asyncio.Event()

    def release(self) -> None:
        self.gate.set()

    def ask_of(self, messages: Sequence[ChatMessage]) -> Ask:
        last = messages[-1]
        said = next((m.content or "" for m in reversed(messages) if m.role == "user"), "")
        return Ask(said, last.content or "" if last.role == "tool" else None)

    def reply(self, ask: Ask) -> Reply:
        """The answer to ``ask``, noted in :attr:`asked`."""
        self.asked.append(ask)
        return self.answer(ask)

    def step(self, messages: Sequence[ChatMessage]) -> Step:
        """The scripted provider's step for one call."""
        reply = self.reply(self.ask_of(messages))
        tools = (reply.tool,) if reply.tool is not None else ()
        if reply.held:
            return Step(text=reply.text, chunks=2, gate=self.gate, tool_calls=tools)
        return Step(text=reply.text, tool_calls=tools)


class Platform(Protocol):
    """One chat platform with the bot on it, as the people in its room see it."""

    name: str
    model: Model

    async def start(self, answer: Answer | None = None, *, approvals: bool = False) -> None:
        """Start the bot (again, over the same store, after :meth:`stop`), its model
        answering with ``answer`` from now on (if given). ``approvals``: its agent has a
        tool that needs the owner's approval (:data:`NEEDS_APPROVAL`)."""

    async def stop(self) -> None:
        """Stop the bot the way an operator does (SIGTERM)."""

    async def spawn(self, task: str, *, mode: str = "session") -> Thread:
        """The owner starts an agent on ``task`` with the platform's spawn command; its
        thread, once the bot said where."""

    async def session_thread(self, task: str) -> Thread:
        """A session the owner started on ``task``, its first answer done."""

    async def say(self, thread: Thread, text: str, *, by: Person = "owner") -> Said:
        """A person writes ``text`` in the thread."""

    async def command(self, thread: Thread, name: str, *, by: Person = "owner") -> str:
        """A person types the command ``name`` in the thread; what the bot answered."""

    async def approve(self, thread: Thread, choice: str, *, by: Person = "owner") -> str:
        """A person answers the waiting approval with ``"allow"`` or ``"deny"``; what the
        bot answered them."""

    async def schedule(self, thread: Thread, task: str, *, minutes: int) -> str:
        """The owner schedules ``task`` in the thread ``minutes`` from now; the answer."""

    async def pass_time(self, minutes: int) -> None:
        """The bot's clock moves on; what fell due has started."""

    async def marks(self, said: Said) -> list[str]:
        """The bot's reactions on a person's message, once it showed what it made of it."""

    async def read(self, thread: Thread) -> list[Shown]:
        """The thread's messages now, oldest first, as a person's client renders them."""

    async def read_until(self, thread: Thread, done: Callable[[list[Shown]], bool]) -> list[Shown]:
        """The thread's messages once ``done`` holds of them (fails after :data:`WAIT`)."""

    async def settled(self, thread: Thread) -> None:
        """The thread's session is idle and everything it had to show has landed."""

    async def announcements(self, thread: Thread) -> list[str]:
        """The completion announcements the bot made for the thread's session so far."""


class Crashable(Protocol):
    """A platform whose bot runs as a process of its own, so it can crash for real."""

    name: str
    model: Model

    async def start(self, answer: Answer | None = None) -> None:
        """Start the bot's process (again, over the same store, after :meth:`kill`)."""

    async def kill(self) -> None:
        """``kill -9`` the bot's process: nothing of it runs on, no clean-up at all."""

    async def session_thread(self, task: str) -> Thread:
        """As :meth:`Platform.session_thread`: the first answer and its announcement done."""

    async def say(self, thread: Thread, text: str, *, by: Person = "owner") -> Said:
        """A person writes ``text`` in the thread."""

    async def read(self, thread: Thread) -> list[Shown]:
        """As :meth:`Platform.read`."""

    async def read_until(self, thread: Thread, done: Callable[[list[Shown]], bool]) -> list[Shown]:
        """As :meth:`Platform.read_until`."""

    async def announcements(self, thread: Thread) -> list[str]:
        """As :meth:`Platform.announcements`."""
