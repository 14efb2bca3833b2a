"""A child's end shows in its parent's thread (fake Discord).

A subagent spawned by an agent (``spawn_subagent``) or from a session's thread
with a thread of its own announces its result there; its parent is told in its
log. The people in the parent's thread get one bot line saying the child
finished and where its thread is. A child without a thread needs none: its
announcement itself comes to the parent's thread.
"""

from __future__ import annotations

from typing import Any

from core.providers.scripted import Step
from core.providers.types import ToolCall
from tests.e2e.conftest import Bot, StartBot
from tests.e2e.helpers import ANNOUNCED, contents, done, spawn, text_messages, thread_of


def parent_spawning(thread: bool) -> Any:
    """The parent asks for a child on "plan it"; the child answers "deep result"."""
    arguments = '{"task": "dig deeper", "thread": %s}' % ("true" if thread else "false")
    child_call = ToolCall(id="s1", name="spawn_subagent", arguments=arguments)

    def script(messages: Any) -> Step:
        last = messages[-1]
        if last.role == "user" and last.content == "plan it":
            return Step(tool_calls=(child_call,))
        if last.role == "user" and last.content == "dig deeper":
            return Step(text="deep result")
        return Step(text="parent carries on")

    return script


def bot_lines(bot: Bot, thread: int) -> list[str]:
    """What the bot itself (not a persona) posted in the thread."""
    return [m.content for m in text_messages(bot.fake, thread) if m.webhook_id is None]


async def test_a_child_with_its_own_thread_is_announced_in_the_parents(
    start_bot: StartBot,
) -> None:
    """spawn_subagent(thread=true): one 📨 line in the parent's thread naming the child's."""
    bot = await start_bot(parent_spawning(thread=True))
    parent_thread = thread_of(await spawn(bot, "plan it", mode="session"))
    await done(bot)
    threads = [c.id for c in bot.fake.state.channels.values() if c.parent_id]
    (child_thread,) = [t for t in threads if t != parent_thread]
    assert [c for c in contents(bot, child_thread) if ANNOUNCED in c]

    notices = [c for c in bot_lines(bot, parent_thread) if c.startswith("📨")]
    child_name = bot.fake.channel(child_thread).name
    assert notices == [f"📨 **Subagent** finished: completed (its thread: “{child_name}”)"]


async def test_a_child_spawned_from_the_parents_thread_is_announced_there(
    start_bot: StartBot,
) -> None:
    """/agents spawn in a session's thread: the child is that session's, and the line shows."""
    bot = await start_bot([Step(text="parent here"), Step(text="child result")])
    parent_thread = thread_of(await spawn(bot, "be the parent", mode="session"))
    await done(bot)
    w = bot.world
    await bot.fake.invoke_command(w.guild, parent_thread, w.alice, "agents spawn", {"task": "x"})
    await bot.fake.wait_for_message(parent_thread, lambda m: m.content.startswith("📨"))
    await done(bot)
    notices = [c for c in bot_lines(bot, parent_thread) if c.startswith("📨")]
    assert len(notices) == 1


async def test_a_child_without_a_thread_needs_no_line(start_bot: StartBot) -> None:
    """spawn_subagent(thread=false): the announcement itself lands in the parent's thread."""
    bot = await start_bot(parent_spawning(thread=False))
    parent_thread = thread_of(await spawn(bot, "plan it", mode="session"))
    await done(bot)
    said = contents(bot, parent_thread)
    assert [c for c in said if ANNOUNCED in c and "deep result" in c]
    assert not [c for c in said if c.startswith("📨")]
