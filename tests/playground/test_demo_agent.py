"""The playground's demo external agent (``agent:coder``, over ACP), through the page's API:
a plan line that moves, words streamed under the persona, a permission prompt with the
agent's own options, and the note it writes in its own workspace once allowed.

What it answers and writes down is the person's words only: a steer, and the earlier
conversation given to it after a restart (it cannot load sessions), reach it beside
those words, never as part of them. Those two are driven through the bot's ACP turns
directly (:class:`tests.fixtures.acp.Rig`, the demo agent as its program).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.playground import Playground
from bot.playground import demo_agent as demo_agent_module
from core.acp.process import workspace_name
from core.agent.events import ApprovalRequested, TextDelta, TurnEnded
from core.clock import FakeClock
from fakediscord import Message
from tests.fixtures.acp import Rig
from tests.fixtures.agents import sqlite_database
from tests.playground.conftest import StartPlayground, until
from tests.playground.test_api import bound_thread, opened

DEMO_AGENT = Path(demo_agent_module.__file__).resolve()


def approval(playground: Playground, thread: int) -> Message | None:
    return next(
        (m for m in playground.fake.messages_in(thread) if m.components and "🔐" in m.content),
        None,
    )


def labels(message: Message) -> dict[str, str]:
    items: list[dict[str, Any]] = [i for row in message.components for i in row["components"]]
    return {i["label"]: i["custom_id"] for i in items}


def said(playground: Playground, thread: int, needle: str) -> Message | None:
    return next((m for m in playground.fake.messages_in(thread) if needle in m.content), None)


async def test_coder_streams_plans_asks_and_writes_its_note(
    start_playground: StartPlayground, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    playground = await start_playground()
    page, general, alice = await opened(http, playground, "general")
    await page.post(
        "/api/command",
        {
            "channel_id": general,
            "user_id": alice,
            "text": '/agents spawn task:"tidy the notes" agent:coder mode:session',
        },
    )
    thread = await until(playground, lambda: bound_thread(playground), "the bound thread")
    asking = await until(playground, lambda: approval(playground, thread), "the permission prompt")
    assert list(labels(asking)) == ["Allow once", "Always allow", "Reject"]
    assert "(I am the playground's demo agent" in said(playground, thread, "You asked").content

    await page.post(
        "/api/click",
        {"message_id": str(asking.id), "custom_id": labels(asking)["Allow once"], "user_id": alice},
    )
    await until(playground, lambda: said(playground, thread, "Done."), "the agent's last words")
    await until(playground, lambda: said(playground, thread, "(3/3 done)"), "the finished plan")

    key = playground.services.bindings.live()[0].target_session_key
    notes = tmp_path / "playground-workspaces" / workspace_name(key) / "notes.md"
    assert notes.read_text(encoding="utf-8") == "- tidy the notes\n"
    await until(
        playground,
        lambda: said(playground, thread, "“Allow once”, chosen by alice"),
        "the prompt saying how it was answered",
    )


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[Rig]:
    """The bot's ACP turns of one session, with the demo agent as the external agent."""
    database = await sqlite_database(tmp_path)
    rig = Rig(tmp_path, database, FakeClock(), command=["python", str(DEMO_AGENT)])
    try:
        yield rig
    finally:
        await rig.stop()
        await database.close()


async def allow_next(rig: Rig, seen: int) -> None:
    """Answer the demo's next permission request (after ``seen`` of them) "Allow once"."""
    assert rig.agent is not None
    await rig.until(ApprovalRequested, lambda _: rig.count(ApprovalRequested) > seen)
    request = rig.of(ApprovalRequested)[seen]
    await rig.agent.decide(request.call.id, "allow", by_name="Alice", option_id="allow-once")


class TestOnlyThePersonsWords:
    async def test_a_steer_is_answered_and_noted_without_its_label(self, demo: Rig) -> None:
        agent = await demo.start()
        await agent.send("tidy the notes", author_id="42", author_name="Alice")
        await demo.until(ApprovalRequested)
        # the steer withdraws the request, cancels the prompt, and is prompted next
        await agent.steer("write about the tests instead", author_id="42", author_name="Alice")
        await allow_next(demo, 1)
        await demo.until(TurnEnded)

        said = demo.said()
        assert "You asked: “write about the tests instead”." in said
        assert "<steering" not in said
        assert "threadbound" not in said
        notes = (demo.workspace / demo_agent_module.NOTES).read_text(encoding="utf-8")
        assert notes == "- write about the tests instead\n"

    async def test_after_a_restart_the_conversation_so_far_stays_out_of_the_note(
        self, demo: Rig
    ) -> None:
        agent = await demo.start()
        await agent.send("remember the word blue", author_id="42", author_name="Alice")
        await allow_next(demo, 0)
        await demo.until(TurnEnded)
        await demo.stop()
        demo.events.clear()

        agent = await demo.start()  # a new process: the demo agent cannot load its session
        await agent.send("which word?", author_id="42", author_name="Alice")
        await demo.until(TextDelta)
        await allow_next(demo, 0)
        await demo.until(TurnEnded)

        assert "You asked: “which word?”." in demo.said()
        assert "conversation so far" not in demo.said()
        notes = (demo.workspace / demo_agent_module.NOTES).read_text(encoding="utf-8")
        assert notes == "- remember the word blue\n- which word?\n"
