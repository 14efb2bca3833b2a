"""Compaction: a long session stays inside a small window, and nothing is lost or split.

The scripted model plays both parts: the agent (it answers, sometimes with a tool
call) and the summariser (asked with the compaction's system prompt, it writes
a summary listing every ``FACT-n`` it was shown). So an early fact can only
reach a late request through the summaries.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from core.agent import Agent, AgentSettings, Tool, ToolContext, ToolRegistry
from core.agent.compaction import SUMMARY_SYSTEM, CompactionSettings, NotCompacted
from core.agent.events import Compacted
from core.agent.usage import ModelInfo, estimate_prompt
from core.errors import ProviderError
from core.providers.scripted import ScriptedProvider, Step
from core.providers.types import ChatMessage, ToolCall
from core.sessions.export import export_html
from core.sessions.log import SessionLog
from core.store import Database

WINDOW = 2_000
SETTINGS = CompactionSettings(reserve_tokens=400, keep_recent_tokens=500)
FACT = re.compile(r"FACT-\d+")
PADDING = "lorem ipsum dolor sit amet " * 8  # ~55 tokens of filler per message


class NoArgs(BaseModel):
    pass


async def look(_args: NoArgs, _ctx: ToolContext) -> str:
    return "looked: " + PADDING


def is_summary_request(messages: list[ChatMessage]) -> bool:
    return bool(messages) and messages[0].content == SUMMARY_SYSTEM


def play(messages: list[ChatMessage]) -> Step:
    """Summarise by listing the facts seen; otherwise answer, calling a tool every 3rd turn."""
    if is_summary_request(messages):
        seen = sorted(set(FACT.findall(messages[-1].content or "")), key=lambda f: int(f[5:]))
        return Step(text="Facts so far: " + ", ".join(seen))
    last = messages[-1]
    if last.role == "user" and "turn" in (last.content or ""):
        number = int(re.search(r"turn (\d+)", last.content or "").group(1))  # type: ignore[union-attr]
        if number % 3 == 0:
            return Step(tool_calls=(ToolCall(id=f"t{number}", name="look", arguments="{}"),))
    return Step(text="noted. " + PADDING)


async def agent_with(db: Database, provider: ScriptedProvider) -> Agent:
    log = SessionLog(db)
    tree = await log.load("agent:long")
    settings = AgentSettings(model_info=ModelInfo(context_window=WINDOW), compaction=SETTINGS)
    tools = ToolRegistry([Tool("look", "Look around.", NoArgs, look)])
    return Agent(tree, log, provider, tools, settings)


async def test_fifty_turns_stay_in_the_window_and_every_fact_reaches_the_model(
    db: Database,
) -> None:
    provider = ScriptedProvider(play)  # checks every request's history is valid
    agent = await agent_with(db, provider)
    compactions: list[Compacted] = []
    agent.subscribe(lambda e: compactions.append(e) if isinstance(e, Compacted) else None)

    for number in range(1, 51):
        await agent.send(f"turn {number}: remember FACT-{number}. {PADDING}")
        await agent.wait_idle()

    agent_requests = [list(m) for m in provider.calls if not is_summary_request(list(m))]
    largest = max(estimate_prompt(m) for m in agent_requests)
    assert largest <= WINDOW - SETTINGS.reserve_tokens + 200  # the turn's own new messages
    assert largest <= WINDOW
    last = "\n".join(m.content or "" for m in agent_requests[-1])
    assert set(FACT.findall(last)) == {f"FACT-{n}" for n in range(1, 51)}
    assert len(compactions) >= 5
    assert all(c.tokens_after < c.tokens_before for c in compactions)
    types = [e.type for e in agent.tree.events]
    assert types.count("user_message") == 50  # history is never rewritten


async def test_a_cut_never_separates_a_tool_call_from_its_result(db: Database) -> None:
    provider = ScriptedProvider(play)
    agent = await agent_with(db, provider)
    for number in range(1, 25):
        await agent.send(f"turn {number}: remember FACT-{number}. {PADDING}")
        await agent.wait_idle()
    for messages in provider.calls:
        shown = [m for m in messages if m.role != "system"]
        if is_summary_request(list(messages)) or "conversation_summary" not in (
            shown[0].content or ""
        ):
            continue
        assert shown[1].role != "tool"  # a result whose call was summarised away
    marks = [e for e in agent.tree.events if e.type == "compaction"]
    assert marks
    for mark in marks:
        kept = agent.tree.get(mark.payload["first_kept_node_id"])
        assert kept.type in ("user_message", "assistant_message")
        if kept.type == "user_message":
            assert kept.delivery_mode != "steer"


async def test_context_length_exceeded_compacts_once_and_retries(db: Database) -> None:
    overflow = ProviderError("400: This model's maximum context length is 2000 tokens")
    answers = iter([Step(error=overflow), None])

    def script(messages: list[ChatMessage]) -> Step:
        if is_summary_request(messages):
            return Step(text="Facts so far: " + ", ".join(FACT.findall(messages[-1].content or "")))
        last = messages[-1].content or ""
        if "now" in last:
            step = next(answers)
            return step or Step(text="done after compaction")
        return Step(text="ok")

    provider = ScriptedProvider(script)
    agent = await agent_with(db, provider)
    for number in range(1, 4):  # long enough that a summary is shorter
        await agent.send(f"turn {number}: remember FACT-{number}. {PADDING}")
        await agent.wait_idle()
    await agent.send("and now?")
    await agent.wait_idle()

    (mark,) = [e for e in agent.tree.events if e.type == "compaction"]
    assert mark.payload["reason"] == "overflow"
    assert agent.tree.events[-1].payload["reason"] == "completed"
    assert [e.payload["text"] for e in agent.tree.events if e.type == "assistant_message"][
        -1
    ] == "done after compaction"


async def test_overflow_after_compaction_is_a_clear_error(db: Database) -> None:
    overflow = ProviderError("context_length_exceeded")

    def script(messages: list[ChatMessage]) -> Step:
        if is_summary_request(messages):
            return Step(text="summary")
        if "now" in (messages[-1].content or ""):
            return Step(error=overflow)
        return Step(text="ok")

    agent = await agent_with(db, ScriptedProvider(script))
    for number in range(1, 4):
        await agent.send(f"turn {number}. {PADDING}")
        await agent.wait_idle()
    await agent.send("and now?")
    await agent.wait_idle()
    ended = agent.tree.events[-1].payload
    assert ended["reason"] == "error"
    assert "does not fit the model's context window even after compacting" in ended["error"]


async def test_compact_on_demand_and_continue_from_before_it(db: Database) -> None:
    agent = await agent_with(db, ScriptedProvider(play))
    for number in range(1, 4):
        await agent.send(f"turn {number}: remember FACT-{number}.")
        await agent.wait_idle()
    before = agent.derive_messages()

    done = await agent.compact("keep the facts")
    assert done is not None
    assert done.reason == "command"
    (mark,) = [e for e in agent.tree.events if e.type == "compaction"]
    assert mark.payload["instructions"] == "keep the facts"
    after = agent.derive_messages()
    assert len(after) < len(before)
    page = export_html(agent.tree)  # the node, and its summary, in the export
    assert "🗜️ compaction" in page
    assert "Facts so far: FACT-1" in page
    assert "Facts so far: FACT-1" in (after[0].content or "")

    first_user = next(e for e in agent.tree.events if e.type == "assistant_message")
    await agent._session_log.continue_from(agent.tree, first_user.node_id)
    rewound = agent.derive_messages()
    assert not any("conversation_summary" in (m.content or "") for m in rewound)


async def test_too_little_to_compact_says_so(db: Database) -> None:
    provider = ScriptedProvider(play)
    agent = await agent_with(db, provider)
    await agent.send("turn 1: hello")
    await agent.wait_idle()
    assert await agent.compact() == NotCompacted(
        "too-little", estimate_prompt(agent.derive_messages())
    )
    assert len(provider.calls) == 1  # the model was not asked


async def test_a_short_history_is_not_replaced_by_a_summary(db: Database) -> None:
    """Two short exchanges: cutting the first is allowed, but no summary could be shorter."""
    provider = ScriptedProvider(lambda _messages: Step(text="ok"))
    agent = await agent_with(db, provider)
    for text in ("hi", "and again"):
        await agent.send(text)
        await agent.wait_idle()
    events = list(agent.tree.events)

    done = await agent.compact()

    assert isinstance(done, NotCompacted)
    assert done.reason == "too-little"
    assert list(agent.tree.events) == events  # the session is as it was
    assert len(provider.calls) == 2


async def test_a_summary_that_is_not_smaller_is_dropped(db: Database) -> None:
    """The session's model writes a summary longer than what it summarises: nothing changes
    but the tokens it cost (687 → 739 once; never again)."""

    def wordy(messages: list[ChatMessage]) -> Step:
        if is_summary_request(messages):
            return Step(text="A long-winded summary. " + PADDING * 4)
        return Step(text="noted. " + PADDING)

    provider = ScriptedProvider(wordy)
    agent = await agent_with(db, provider)
    for number in range(1, 4):
        await agent.send(f"turn {number}: {PADDING}")
        await agent.wait_idle()
    before = agent.derive_messages()
    usage_before = agent.tree.total_usage

    done = await agent.compact()

    assert isinstance(done, NotCompacted)
    assert done.reason == "not-smaller"
    assert done.with_summary is not None
    assert done.with_summary >= done.tokens
    assert done.tokens == estimate_prompt(before)
    assert not [e for e in agent.tree.events if e.type == "compaction"]
    assert agent.derive_messages() == before
    assert len(provider.calls) == 4  # the summary was asked for, and its cost is counted
    assert agent.tree.total_usage.prompt_tokens > usage_before.prompt_tokens
    assert agent.tree.total_usage.last_prompt_tokens == usage_before.last_prompt_tokens

    compacted: list[Compacted] = []
    agent.subscribe(lambda e: compacted.append(e) if isinstance(e, Compacted) else None)
    await agent.send("turn 4")
    await agent.wait_idle()
    assert compacted == []  # and no notice of a compaction that did not happen
