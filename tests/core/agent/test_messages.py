"""derive_messages: the active path only, steering tagged, calls and results paired."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.agent.messages import (
    INTERRUPTED_RESULT,
    MessageDeriver,
    derive_messages,
    render_steering,
)
from core.agent.usage import estimate_prompt
from core.sessions.events import DeliveryMode, EventKind, SessionEvent
from core.sessions.log import SessionLog
from core.sessions.tree import SessionTree
from core.store import Database
from tests.fixtures.agents import sqlite_database
from tests.fixtures.sessions import T0


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    database: Database = await sqlite_database(tmp_path)
    yield SessionLog(database)
    await database.close()


async def say(log: SessionLog, tree: SessionTree, text: str, mode: str = "normal") -> str:
    event = await log.append(
        tree, "user_message", {"text": text, "requested_mode": mode}, delivery_mode=mode
    )
    return event.node_id


async def answer(log: SessionLog, tree: SessionTree, text: str, *calls: str) -> None:
    await log.append(
        tree,
        "assistant_message",
        {
            "turn_id": "t",
            "text": text,
            "tool_calls": [{"id": c, "name": "work", "arguments": "{}"} for c in calls],
        },
    )


async def result(log: SessionLog, tree: SessionTree, call_id: str, content: str) -> None:
    await log.append(
        tree,
        "tool_result",
        {"turn_id": "t", "tool_call_id": call_id, "name": "work", "content": content},
    )


async def test_pairs_results_and_tags_steering(log: SessionLog) -> None:
    """Tool results follow their call; steering is a tagged user message; system prompt first."""
    tree = await log.load("s")
    await say(log, tree, "hi")
    await answer(log, tree, "", "c1")
    await result(log, tree, "c1", "done")
    await say(log, tree, "go left", "steer")
    await log.append(tree, "usage", {"turn_id": "t", "prompt_tokens": 1, "completion_tokens": 1})
    messages = derive_messages(tree, system_prompt="be brief")
    assert [(m.role, m.content) for m in messages] == [
        ("system", "be brief"),
        ("user", "hi"),
        ("assistant", None),
        ("tool", "done"),
        ("user", render_steering("go left")),
    ]
    assert messages[2].tool_calls[0].id == "c1"


async def test_dangling_call_gets_a_synthetic_result(log: SessionLog) -> None:
    """A call with no stored result (a crash mid-tool) is answered in the derived history."""
    tree = await log.load("s")
    await say(log, tree, "hi")
    await answer(log, tree, "", "c1", "c2")
    await result(log, tree, "c1", "done")
    await say(log, tree, "next")
    roles = [(m.role, m.tool_call_id, m.content) for m in derive_messages(tree)]
    assert roles[2:5] == [
        ("tool", "c1", "done"),
        ("tool", "c2", INTERRUPTED_RESULT),
        ("user", None, "next"),
    ]


async def test_incremental_matches_full_across_continue_from(log: SessionLog) -> None:
    """The incremental deriver agrees with a full derivation after the head jumps branches."""
    tree = await log.load("s")
    deriver = MessageDeriver()
    first = await say(log, tree, "first question")
    await answer(log, tree, "first answer")
    assert deriver.derive(tree) == derive_messages(tree)
    await say(log, tree, "second question")
    await answer(log, tree, "", "c1")
    assert deriver.derive(tree) == derive_messages(tree)

    old_text = await log.continue_from(tree, first)  # edit the first question
    assert old_text == "first question"
    await say(log, tree, "edited question")
    assert deriver.derive(tree) == derive_messages(tree)
    assert [m.content for m in deriver.derive(tree)] == ["edited question"]


async def test_the_running_estimate_matches_a_full_walk(log: SessionLog) -> None:
    """The deriver's estimate equals ``estimate_prompt`` of what it derived, through new
    steps, an open tool call, a second author, a jump to another branch and a compaction."""
    tree = await log.load("s")
    deriver = MessageDeriver()

    def check() -> None:
        messages = deriver.derive(tree, system_prompt="be brief")
        assert deriver.estimate(messages) == estimate_prompt(messages)

    first = await say(log, tree, "first question")
    check()
    await answer(log, tree, "", "c1", "c2")  # both calls still open: synthetic results
    check()
    await result(log, tree, "c1", "x" * 101)
    check()
    await say(log, tree, "next")  # c2 left unanswered for good
    check()
    await log.append(
        tree,
        "user_message",
        {"text": "me too", "requested_mode": "normal", "author_id": "u2", "author_name": "Bo"},
        delivery_mode="normal",
    )
    check()  # a second person: every message is rebuilt with its author's name
    await log.continue_from(tree, first)
    await say(log, tree, "edited")
    check()
    await answer(log, tree, "long answer " * 20)
    kept = await say(log, tree, "kept")
    await log.append(
        tree,
        "compaction",
        {
            "summary": "what came before",
            "first_kept_node_id": kept,
            "tokens_before": 100,
            "tokens_after": 10,
            "reason": "command",
        },
    )
    check()


async def test_an_estimate_of_another_list_walks_it(log: SessionLog) -> None:
    """Only the list derive() returned last uses the running total; any other is walked."""
    tree = await log.load("s")
    deriver = MessageDeriver()
    await say(log, tree, "hello")
    derived = deriver.derive(tree)
    shorter = derived[:0]
    assert deriver.estimate(shorter) == 0
    assert deriver.estimate(list(derived)) == estimate_prompt(derived)


def test_a_message_no_model_reads_is_left_out() -> None:
    """A stored message that no longer fits its model (an earlier version's row) is left
    out of the context, incrementally and in a full derivation; the turn still runs."""
    tree = SessionTree("s")
    rows: list[tuple[str, EventKind, dict[str, Any], DeliveryMode | None]] = [
        ("user_message", "user", {"text": "hi", "requested_mode": "normal"}, "normal"),
        ("assistant_message", "assistant", {"turn_id": "t1", "text": "hello"}, None),
        ("user_message", "user", {"requested_mode": "normal"}, "normal"),  # no text
        ("user_message", "user", {"text": "still there?", "requested_mode": "normal"}, "normal"),
    ]
    deriver = MessageDeriver()
    for seq, (type_, kind, payload, mode) in enumerate(rows, start=1):
        tree.apply(
            SessionEvent(
                session_key="s",
                node_id=f"n{seq}",
                parent_id=tree.head_id,
                seq=seq,
                kind=kind,
                type=type_,
                payload=payload,
                delivery_mode=mode,
                created_at=T0,
            )
        )
        deriver.derive(tree)
    expected = [("user", "hi"), ("assistant", "hello"), ("user", "still there?")]
    assert [(m.role, m.content) for m in derive_messages(tree)] == expected
    assert [(m.role, m.content) for m in deriver.derive(tree)] == expected
