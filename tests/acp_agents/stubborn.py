"""An ACP agent (the official SDK) that outlives its client, as ``codex-acp`` does.

When its stdin closes (the bot was killed) it does not exit: it ignores SIGHUP and,
once the protocol has ended, waits forever. It starts a child (``sleep``) in its
process group, as a real agent starts shells and language servers, so a test can
see that the whole group is stopped and not just the agent. SIGTERM ends it.

Each prompt is answered ``pid <its pid>: <the person's words>``, which tells a test
which process answered. Run by its path (``python stubborn.py``), from a session's
workspace where the tests' package is not importable.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from acp import PROTOCOL_VERSION, Agent, run_agent, update_agent_message_text
from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PromptResponse


class Stubborn(Agent):
    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities()
        )

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"stubborn-{os.getpid()}")

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        words = "".join(
            getattr(block, "text", "") or ""
            for block in prompt
            if getattr(getattr(block, "annotations", None), "audience", None) != ["assistant"]
        )
        answer = f"pid {os.getpid()}: {words}"
        await self.conn.session_update(session_id, update_agent_message_text(answer))
        return PromptResponse(stop_reason="end_turn")


async def main() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    child = await asyncio.create_subprocess_exec(  # off the protocol's pipes
        "sleep", "86400", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL
    )
    try:
        await run_agent(Stubborn())
        await asyncio.Event().wait()  # the client went away: stay, as codex-acp does
    finally:
        child.kill()


if __name__ == "__main__":
    asyncio.run(main())
