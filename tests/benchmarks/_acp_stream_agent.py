"""The ACP benchmark's agent (SDK-built, stdio): each prompt streams ``CHUNKS`` pieces, each
stamped ``[<n>:<monotonic ns>]`` as it is written, ``GAP_SECONDS`` apart, then ends the turn.

``time.monotonic_ns`` is the system's monotonic clock, the same in every process on
the machine, so a reader in another process can tell how long a piece took to reach it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from acp import PROTOCOL_VERSION, Agent, run_agent, update_agent_message_text
from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

CHUNKS = 60
GAP_SECONDS = 0.02


class StreamAgent:
    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="bench")

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        for n in range(CHUNKS):
            piece = f"[{n}:{time.monotonic_ns()}] "
            await self.conn.session_update(session_id, update_agent_message_text(piece))
            await asyncio.sleep(GAP_SECONDS)
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(cast(Agent, StreamAgent())))
