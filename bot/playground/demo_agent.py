"""A small external agent for the playground's demo, spoken to over ACP (stdio).

Built with the official Agent Client Protocol SDK and run by its path (``python
demo_agent.py``), so a newcomer can spawn an external agent (``/agents spawn
agent:coder``) without installing one and see what a real one does in a thread:
a plan that moves, words streamed under the persona, a tool call that asks
permission with the agent's own options, and a file written in the session's
own workspace when allowed. No model: its answers are canned, and say so.
"""

from __future__ import annotations

import asyncio
import difflib
from pathlib import Path
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    plan_entry,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)

__all__ = ["DemoAgent", "persons_words"]

NOTES = "notes.md"
PAUSE_SECONDS = 0.15
"""Between streamed pieces, so the persona's message is seen to grow (it is a demo)."""
OPTIONS = [
    PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow-always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class DemoAgent:
    """Each prompt: a three-step plan, an answer streamed in pieces, and a note written to
    ``notes.md`` in its workspace once a person allows it (always allowed after "Always")."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd = Path.cwd()
        self.always = False
        self.cancelled = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities()
        )

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        self.cwd = Path(cwd)
        return NewSessionResponse(session_id="demo")

    async def cancel(self, session_id: str, **_: Any) -> None:
        self.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        self.cancelled.clear()
        asked = " ".join(persons_words(prompt).split())
        steps = ["read the request", "answer it", f"write a note to {NOTES}"]
        await self._plan(session_id, steps, done=0)
        await self._plan(session_id, steps, done=1)
        answer = (
            f"(I am the playground's demo agent, with no model behind me.) You asked: "
            f"“{asked[:200]}”. Here is what an external agent looks like in a thread: "
            "this plan, these words, and a tool call that asks first."
        )
        for start in range(0, len(answer), 24):
            if self.cancelled.is_set():
                return PromptResponse(stop_reason="cancelled")
            await self._say(session_id, answer[start : start + 24])
            await asyncio.sleep(PAUSE_SECONDS)
        await self._plan(session_id, steps, done=2)
        wrote = await self._write_note(session_id, asked)
        await self._plan(session_id, steps, done=3 if wrote else 2)
        await self._say(session_id, "\n\nDone." if wrote else "\n\nI left the note unwritten.")
        return PromptResponse(stop_reason="cancelled" if self.cancelled.is_set() else "end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, update_agent_message_text(text))

    async def _plan(self, session_id: str, steps: list[str], *, done: int) -> None:
        entries = [
            plan_entry(
                step,
                status="completed" if n < done else "in_progress" if n == done else "pending",
            )
            for n, step in enumerate(steps)
        ]
        await self.conn.session_update(session_id, update_plan(entries))

    async def _write_note(self, session_id: str, asked: str) -> bool:
        """Ask (unless always allowed), then append the request to the notes file."""
        title = f"append to {NOTES}"
        await self.conn.session_update(
            session_id, start_tool_call("note", title, kind="edit", status="pending")
        )
        if not self.always:
            response = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="note", title=title),
                options=OPTIONS,
            )
            outcome = response.outcome
            chosen = outcome.option_id if isinstance(outcome, AllowedOutcome) else None
            if chosen not in ("allow-once", "allow-always"):
                await self.conn.session_update(
                    session_id, update_tool_call("note", status="failed")
                )
                return False
            self.always = chosen == "allow-always"
        path = self.cwd / NOTES
        before = path.read_text(encoding="utf-8") if path.exists() else ""
        after = before + f"- {asked[:200]}\n"
        path.write_text(after, encoding="utf-8")
        changed = "".join(
            line
            for line in difflib.unified_diff(before.splitlines(True), after.splitlines(True))
            if line.startswith("+") and not line.startswith("+++")
        )
        await self.conn.session_update(
            session_id,
            update_tool_call(
                "note", status="completed", content=[tool_content(text_block(changed.strip()))]
            ),
        )
        return True


def persons_words(prompt: list[Any]) -> str:
    """The text a person wrote, from a prompt's blocks: the blocks the client addressed
    to the agent alone (``annotations.audience == ["assistant"]``: the conversation so
    far after a restart, a steering note) are context for an agent, never the request
    to answer or to write down."""
    words: list[str] = []
    for block in prompt:
        annotations = getattr(block, "annotations", None)
        if annotations is not None and annotations.audience == ["assistant"]:
            continue
        words.append(getattr(block, "text", "") or "")
    return "\n".join(w for w in words if w)


if __name__ == "__main__":
    # The SDK routes each request to the method of that name, if the agent has one:
    # the methods a demo does not need (authenticate, modes, ...) are left out.
    asyncio.run(run_agent(cast(Agent, DemoAgent())))
