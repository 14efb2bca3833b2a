"""A small ACP agent written with the official SDK, for the tests: every path the bot
must handle, chosen by a word in the prompt.

Run as ``python -m tests.acp_agents.scripted`` (stdio). It keeps its conversation in
``.scripted-history.json`` in its working directory, so a restarted process can
load a session (``session/load``), replaying it as ``session/update`` notifications
(which the bot must not post again). ``SCRIPTED_NO_LOAD=1`` makes it advertise no
``loadSession``. Every prompt it receives is appended, block by block, to
``.scripted-prompts.jsonl`` there (see :func:`tests.fixtures.acp.prompts_received`).

It answers, and reacts to, the person's words only: the text blocks of the prompt
not addressed to the assistant alone (``annotations.audience == ["assistant"]`` marks
what the client adds for the agent: context, a steering note), as OpenCode keeps
those out of what it shows as the user's message.

Words it reacts to (the last prompt's text):

- ``tool``: a tool call (``run ls``) that completes with a short output;
- ``codex``: a command run the way Codex's adapter reports it: no ``content``, the
  output only in ``rawOutput`` (its exec end event); with ``fail`` too, the command
  exits 2 (the update still says ``completed``, as the adapter may);
- ``search``: a tool call whose ``rawOutput`` has no known shape;
- ``ask``: a tool call that asks for permission with three options (allow once,
  allow always, reject); it says which option it got, or that it was cancelled;
  with ``abort`` too, a reject (or a request answered ``cancelled``) stops the prompt as
  ``cancelled`` (as Codex does); with ``grumble`` as well, it says a few words first (words
  the reject cut off);
- ``diff``: an edit whose content is a long diff;
- ``plan``: a plan of two entries, updated once;
- ``slow``: one chunk, then waits until ``session/cancel`` and stops as cancelled;
- ``crash``: one chunk, then the process dies;
- ``refuse``: stops with ``refusal``;
- ``think``: a thought chunk first (never to be posted);
- ``noisy``: writes 200 KB to stderr first (a client that pipes stderr unread hangs);
- anything else: ``echo: <text>`` in three chunks.

Every answer reports usage (``usage_update`` and the prompt response's).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    plan_entry,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    Usage,
    UsageUpdate,
)

HISTORY = ".scripted-history.json"
PROMPTS = ".scripted-prompts.jsonl"
OPTIONS = [
    PermissionOption(option_id="once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
]


class Scripted(Agent):
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.cwd = Path.cwd()
        self.turns = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        loads = os.environ.get("SCRIPTED_NO_LOAD") != "1"
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=loads),
        )

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        self.cwd = Path(cwd)
        session_id = f"scripted-{os.getpid()}"
        self._save(session_id, [])
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
        self.cwd = Path(cwd)
        for role, text in self._history(session_id):
            update = (
                update_user_message_text(text)
                if role == "user"
                else update_agent_message_text(text)
            )
            await self.conn.session_update(session_id, update)
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **_: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        self._keep(prompt)
        text = "".join(
            getattr(block, "text", "") or "" for block in prompt if not _for_assistant(block)
        )
        self.turns += 1
        cancelled = self.cancelled[session_id] = asyncio.Event()
        say = self._sayer(session_id)
        if "noisy" in text:
            sys.stderr.write("x" * 200_000 + "\n")
            sys.stderr.flush()
        if "think" in text:
            await self.conn.session_update(session_id, update_agent_thought_text("hmm, secret"))
        if "plan" in text:
            entries = [plan_entry("read the code"), plan_entry("write the fix")]
            await self.conn.session_update(session_id, update_plan(entries))
            entries = [plan_entry("read the code", status="completed"), entries[1]]
            await self.conn.session_update(session_id, update_plan(entries))
        if "tool" in text:
            await self._tool(session_id)
        if "diff" in text:
            await self._diff(session_id)
        if "codex" in text:
            await self._codex_exec(session_id, failing="fail" in text)
        if "search" in text:
            await self._search(session_id)
        answer = f"echo: {text}"
        if "ask" in text:
            answer = await self._ask(session_id)
            if answer in ("chosen: no", "permission cancelled") and "abort" in text:
                said = "Then I leave build/ as it is, but " if "grumble" in text else ""
                if said:
                    await say(said)
                return await self._done(session_id, text, said, "cancelled")
        if "refuse" in text:
            await say("I will not.")
            return await self._done(session_id, text, "I will not.", "refusal")
        if "slow" in text or "crash" in text:
            await say("working… ")
            if "crash" in text:
                sys.stdout.flush()
                os._exit(3)
            await cancelled.wait()
            return await self._done(session_id, text, "working… ", "cancelled")
        for piece in (answer[:5], answer[5:10], answer[10:]):
            if piece:
                await say(piece)
        return await self._done(session_id, text, answer, "end_turn")

    async def _tool(self, session_id: str) -> None:
        await self.conn.session_update(
            session_id, start_tool_call("ls1", "run ls", kind="execute", status="in_progress")
        )
        output = tool_content(text_block("notes.txt\nplan.md"))
        await self.conn.session_update(
            session_id, update_tool_call("ls1", status="completed", content=[output])
        )

    async def _codex_exec(self, session_id: str, *, failing: bool) -> None:
        """As ``@zed-industries/codex-acp`` reports a command to a client without terminal
        output: a start with ``rawInput``, then one update with the status and the exec end
        event as ``rawOutput`` (codex-protocol's ``ExecCommandEndEvent``), no ``content``."""
        command = ["/bin/bash", "-lc", "ls nope" if failing else "ls"]
        await self.conn.session_update(
            session_id,
            start_tool_call(
                "call_exec1",
                "List files" if not failing else "Run ls nope",
                kind="execute",
                status="in_progress",
                raw_input={
                    "call_id": "call_exec1",
                    "turn_id": "1",
                    "command": command,
                    "cwd": str(self.cwd),
                    "parsed_cmd": [{"type": "list_files", "cmd": command[-1], "path": None}],
                    "source": "agent",
                },
            ),
        )
        stdout = "" if failing else "notes.txt\nplan.md\n"
        stderr = "ls: cannot access 'nope': No such file or directory\n" if failing else ""
        end = {
            "call_id": "call_exec1",
            "turn_id": "1",
            "command": command,
            "cwd": str(self.cwd),
            "parsed_cmd": [{"type": "list_files", "cmd": command[-1], "path": None}],
            "source": "agent",
            "stdout": stdout,
            "stderr": stderr,
            "aggregated_output": stdout + stderr,
            "exit_code": 2 if failing else 0,
            "duration": {"secs": 0, "nanos": 12_000_000},
            "formatted_output": stdout + stderr,
            "status": "completed",
        }
        await self.conn.session_update(
            session_id, update_tool_call("call_exec1", status="completed", raw_output=end)
        )

    async def _search(self, session_id: str) -> None:
        await self.conn.session_update(
            session_id, start_tool_call("web1", "search the web", kind="fetch", status="pending")
        )
        await self.conn.session_update(
            session_id,
            update_tool_call(
                "web1", status="completed", raw_output={"query": "threadbound", "hits": 2}
            ),
        )

    async def _diff(self, session_id: str) -> None:
        new = "\n".join(f"line {i}" for i in range(400))
        await self.conn.session_update(
            session_id, start_tool_call("ed1", "edit big.txt", kind="edit", status="in_progress")
        )
        await self.conn.session_update(
            session_id,
            update_tool_call(
                "ed1", status="completed", content=[tool_diff_content("big.txt", new, "old")]
            ),
        )

    async def _ask(self, session_id: str) -> str:
        await self.conn.session_update(
            session_id, start_tool_call("rm1", "delete build/", kind="delete", status="pending")
        )
        response = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="rm1", title="delete build/"),
            options=OPTIONS,
        )
        outcome = response.outcome
        if isinstance(outcome, AllowedOutcome):
            ran = outcome.option_id in ("once", "always")
            status = "completed" if ran else "failed"
            await self.conn.session_update(session_id, update_tool_call("rm1", status=status))
            return f"chosen: {outcome.option_id}"
        await self.conn.session_update(session_id, update_tool_call("rm1", status="failed"))
        return "permission cancelled"

    def _sayer(self, session_id: str) -> Any:
        async def say(piece: str) -> None:
            await self.conn.session_update(session_id, update_agent_message_text(piece))

        return say

    async def _done(self, session_id: str, asked: str, said: str, reason: Any) -> PromptResponse:
        history = self._history(session_id)
        self._save(session_id, [*history, ("user", asked), ("assistant", said)])
        tokens = len(asked.split()) + len(said.split())
        await self.conn.session_update(
            session_id, UsageUpdate(session_update="usage_update", used=tokens, size=1000)
        )
        return PromptResponse(
            stop_reason=reason,
            usage=Usage(
                total_tokens=tokens,
                input_tokens=len(asked.split()),
                output_tokens=len(said.split()),
            ),
        )

    def _keep(self, prompt: list[Any]) -> None:
        """Append the prompt as received, one entry per block, to :data:`PROMPTS`."""
        blocks = []
        for block in prompt:
            annotations = getattr(block, "annotations", None)
            blocks.append(
                {
                    "type": block.type,
                    "text": getattr(block, "text", None),
                    "audience": annotations.audience if annotations is not None else None,
                    "meta": getattr(block, "field_meta", None),
                }
            )
        with (self.cwd / PROMPTS).open("a", encoding="utf-8") as out:
            out.write(json.dumps(blocks) + "\n")

    def _history(self, session_id: str) -> list[tuple[str, str]]:
        path = self.cwd / HISTORY
        if not path.exists():
            return []
        data = json.loads(path.read_text())
        return [tuple(pair) for pair in data.get(session_id, [])]  # type: ignore[misc]

    def _save(self, session_id: str, history: list[tuple[str, str]]) -> None:
        path = self.cwd / HISTORY
        data = json.loads(path.read_text()) if path.exists() else {}
        data[session_id] = history
        path.write_text(json.dumps(data))


def _for_assistant(block: Any) -> bool:
    """What the client addressed to the agent alone, beside the person's words."""
    annotations = getattr(block, "annotations", None)
    return annotations is not None and annotations.audience == ["assistant"]


if __name__ == "__main__":
    asyncio.run(run_agent(Scripted()))
