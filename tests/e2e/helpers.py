"""What every end-to-end test shares: driving the bot over the fake Discord, and reading back
what it sent.

Test modules import from here (and from ``conftest``), never from one another.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Final

from core.providers.scripted import Step
from core.providers.types import ToolCall
from fakediscord import FakeDiscord, InteractionResponse
from fakediscord.recording import RecordedRequest
from tests.e2e.conftest import Bot

__all__ = [
    "ANNOUNCED",
    "EPHEMERAL",
    "PINGS_NOBODY",
    "SLEEP",
    "TIMEOUT",
    "assert_pings_nobody",
    "bound_thread",
    "content",
    "contents",
    "done",
    "ephemeral",
    "handlers_done",
    "message_payload",
    "persona_messages",
    "run",
    "settle",
    "sleep_then_answer",
    "spawn",
    "status_line",
    "text_messages",
    "thread_of",
    "tool_lines",
]

TIMEOUT = 10
EPHEMERAL = 64
ANNOUNCED = "completed its task."
SLEEP = ToolCall(id="c1", name="sleep", arguments='{"seconds": 5}')


def sleep_then_answer(messages: Any) -> Step:
    """First a 5 s tool call, then an answer naming the task."""
    if messages[-1].role == "user":
        return Step(tool_calls=(SLEEP,))
    task = next(m.content for m in messages if m.role == "user")
    return Step(text=f"result of {task}")


async def spawn(bot: Bot, task: str, **options: str) -> list:
    w = bot.world
    handle = await bot.fake.invoke_command(
        w.guild, w.channel, w.alice, "agents spawn", {"task": task, **options}
    )
    async with asyncio.timeout(TIMEOUT):
        return await handle.wait_followups(1)


async def settle(bot: Bot, session_key: str) -> None:
    agent = await bot.services.runtime.get(session_key)
    async with asyncio.timeout(TIMEOUT):
        await agent.wait_idle()
        await bot.client.account.drain()


async def done(bot: Bot) -> None:
    """Every watcher, delivery and Discord send in flight has finished."""
    async with asyncio.timeout(TIMEOUT):
        await bot.services.subagents.wait_settled()
        await bot.client.account.drain()


async def handlers_done(event: str) -> None:
    """Every discord.py handler of ``event`` dispatched so far has returned.

    discord.py runs each handler in a task named after its event; once the
    fake's ``sync`` says the event was parsed, that task exists.
    """
    name = f"discord.py: on_{event}"
    running = [t for t in asyncio.all_tasks() if t.get_name() == name]
    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*running)


async def run(
    bot: Bot, user: Any, command: str, channel: int | None = None, **options: str
) -> InteractionResponse:
    """Invoke ``command`` and return the answer the user sees (the reply or first followup)."""
    handle = await bot.fake.invoke_command(
        bot.world.guild, channel or bot.world.channel.id, user, command, options
    )
    async with asyncio.timeout(TIMEOUT):
        callback = await handle.wait_response()
        if callback.callback_type == 5:  # deferred: the answer is a followup
            (callback,) = await handle.wait_followups(1)
    return callback


async def bound_thread(bot: Bot) -> tuple[Any, int]:
    """Spawn a session-mode subagent (by alice); its binding and thread id."""
    await spawn(bot, "greet", mode="session")
    await settle(bot, bot.binding().target_session_key)
    record = bot.binding()  # with what the first turn stored (the status line's id)
    return record, int(record.conversation.conversation_id)


def content(response: InteractionResponse) -> str:
    return (response.body.get("data") or response.body)["content"]


def ephemeral(response: InteractionResponse) -> bool:
    return bool(int((response.body.get("data") or response.body).get("flags") or 0) & EPHEMERAL)


def thread_of(followups: list) -> int:
    (reply,) = followups
    return int(re.search(r"<#(\d+)>", reply.body["content"]).group(1))


def contents(bot: Bot, channel_id: int) -> list[str]:
    return [m.content for m in bot.fake.messages_in(channel_id)]


def persona_messages(fake: FakeDiscord, channel_id: int) -> list:
    return [m for m in fake.messages_in(channel_id) if m.webhook_id is not None]


def tool_lines(fake: FakeDiscord, channel_id: int) -> list[str]:
    """Every tool-call line in the channel's persona messages, in order."""
    return [
        line
        for m in persona_messages(fake, channel_id)
        for line in m.content.splitlines()
        if line.startswith("-# 🔧")
    ]


def status_line(fake: FakeDiscord, thread_id: int) -> str:
    (status,) = [m for m in fake.messages_in(thread_id) if m.content.startswith("Status:")]
    return status.content


def text_messages(fake: FakeDiscord, channel_id: int) -> list:
    return [m for m in fake.messages_in(channel_id) if m.type == 0]


PINGS_NOBODY: Final = {"parse": []}
"""``discord.AllowedMentions.none()`` as sent: no @everyone, role or user ping."""

_MESSAGE_ROUTES: Final = (
    ("POST", re.compile(r"/channels/\d+/messages")),  # channel send
    ("PATCH", re.compile(r"/channels/\d+/messages/\d+")),  # message edit
    ("POST", re.compile(r"/channels/\d+/threads")),  # a forum post carries a message
    ("POST", re.compile(r"/webhooks/\d+/[^/]+")),  # webhook execute, interaction followup
    ("PATCH", re.compile(r"/webhooks/\d+/[^/]+/messages/[^/]+")),  # their edits, @original
    ("POST", re.compile(r"/interactions/\d+/[^/]+/callback")),
)

_CALLBACKS_WITH_A_MESSAGE: Final = {4, 7}
"""Interaction callback types that carry message content (reply, update); a deferral,
a pong or a modal cannot ping."""


def message_payload(request: RecordedRequest) -> dict[str, Any] | None:
    """The message a request creates or edits (where ``allowed_mentions`` belongs), or None."""
    body = request.json if isinstance(request.json, dict) else None
    if body is None or not any(
        request.method == method and route.fullmatch(request.path)
        for method, route in _MESSAGE_ROUTES
    ):
        return None
    if request.path.endswith("/callback"):
        return body.get("data") if body.get("type") in _CALLBACKS_WITH_A_MESSAGE else None
    if request.path.endswith("/threads"):
        message = body.get("message")
        return message if isinstance(message, dict) else None
    return body


def assert_pings_nobody(fake: FakeDiscord) -> list[RecordedRequest]:
    """Every message the bot created or edited so far was sent with mentions that ping nobody.

    Returns the requests checked, so a test can also assert the sweep saw what it meant to.
    """
    checked = [r for r in fake.requests if message_payload(r) is not None]
    loud = [
        f"{r.method} {r.path}: allowed_mentions={payload.get('allowed_mentions')!r}"
        for r in checked
        if (payload := message_payload(r)) is not None
        and payload.get("allowed_mentions") != PINGS_NOBODY
    ]
    assert not loud, "messages sent without allowed_mentions that ping nobody:\n" + "\n".join(loud)
    return checked
