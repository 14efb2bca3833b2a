"""What a spawn refuses before any I/O: invisible tasks, and persona names from free text."""

from __future__ import annotations

import pytest

from core.agent.builtin_tools import SpawnSubagentArgs
from core.agent.tools import ToolContext
from core.config import DEFAULT_DISPLAY_NAME as DEFAULT_NAME
from core.config import agent_display_name
from core.subagents import SpawnRefused
from core.subagents.tool import spawn_tool_handler
from core.subagents.validation import is_blank
from tests.core.subagents.harness import Harness

INVISIBLE_TASKS = [
    "",
    "   ",
    "\t\n",
    "\u200b",
    "\u200b\u200c\u200d\u2060\ufeff",
    " \u200b \u00a0\u3000",  # with a no-break and an ideographic space
    "\u3164\u2800",  # Hangul filler, blank Braille cell
    "\u202e\u2066",  # bidi controls (Cf)
]


@pytest.mark.parametrize("text", INVISIBLE_TASKS)
def test_invisible_text_is_blank(text: str) -> None:
    assert is_blank(text)


@pytest.mark.parametrize("text", ["x", "\u200bx\u200b", "👍", "é", "\u0301"])
def test_visible_text_is_not_blank(text: str) -> None:
    assert not is_blank(text)


async def nothing_written(h: Harness) -> None:
    assert await h.service.list() == []
    assert await h.sessions.session_keys() == []
    assert list(h.bindings.live()) == []
    assert h.adapter.created == []


@pytest.mark.parametrize("task", INVISIBLE_TASKS)
async def test_an_invisible_task_is_refused_like_a_blank_one(h: Harness, task: str) -> None:
    """Zero-width and other invisible characters alone are no task: no thread, no child."""
    with pytest.raises(SpawnRefused, match="the task is empty"):
        await h.service.spawn(h.request(task, thread=True))
    await nothing_written(h)


async def test_the_spawn_tool_refuses_an_invisible_task_too(h: Harness) -> None:
    """A parent agent's spawn_subagent goes through the same check."""
    handle = spawn_tool_handler(h.service)
    context = ToolContext(session_key="parent", turn_id="t1", tool_call_id="c1")
    with pytest.raises(SpawnRefused, match="the task is empty"):
        await handle(SpawnSubagentArgs(task="\u200b\u2060", thread=True), context)
    await nothing_written(h)


@pytest.mark.parametrize("agent", ["alice", "@everyone", "Scout"])
async def test_without_profiles_a_named_agent_is_refused(h: Harness, agent: str) -> None:
    """No [agents]: a name from the request would become the persona, so it is refused."""
    with pytest.raises(SpawnRefused, match="no agent profiles are configured"):
        await h.service.spawn(h.request(agent=agent, thread=True))
    await nothing_written(h)


async def test_without_profiles_no_agent_runs_as_the_default(h: Harness) -> None:
    """Leaving the agent out (or blank) still works, under the built-in name."""
    assert h.service.check(h.request(agent="\u200b")) is None
    spawned = await h.service.spawn(h.request(thread=True))
    assert spawned.display_name == DEFAULT_NAME
    assert spawned.binding.metadata["persona"]["name"] == DEFAULT_NAME
    await h.settle()


def test_an_agent_without_a_profile_is_shown_under_the_default_name() -> None:
    """Old rows may hold an unchecked id; it never becomes a display name."""
    assert agent_display_name({}, "@everyone") == DEFAULT_NAME
    assert agent_display_name({}, None) == DEFAULT_NAME
