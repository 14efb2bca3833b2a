"""The playground's demo external agent (``agent:coder``, over ACP), through the page's API:
a plan line that moves, words streamed under the persona, a permission prompt with the
agent's own options, and the note it writes in its own workspace once allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from bot.playground import Playground
from core.acp.process import workspace_name
from fakediscord import Message
from tests.playground.conftest import StartPlayground, until
from tests.playground.test_api import bound_thread, opened


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
