"""What the bot adds to one MCP tool call over stdio.

Run with ``python3 tb.py bench mcp``. Nothing here asserts.

The same server (``mcp-server-time``, ``get_current_time``) is called in the
same run, alternately in rounds, by:

- **the bare SDK**: an ``mcp.Client`` over stdio, ``call_tool`` in a loop (the
  baseline: the protocol, the pipes and the server's own work);
- **the bot's connection**: :class:`core.mcp.McpConnection.call` (its clock-bound
  timeout race and result conversion);
- **the bot's tool path**: ``ToolRegistry.execute`` on the tool
  :mod:`core.agent.mcp_tools` builds (argument parsing, the error boundary, the
  result cap): what the agent loop runs per call.

Targets: the tool path at most 1.5x the bare SDK, and under 2 ms added per call.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from core.agent.mcp_tools import McpToolSource  # noqa: E402
from core.agent.tools import ToolContext, ToolRegistry  # noqa: E402
from core.clock import SystemClock  # noqa: E402
from core.config import McpServerConfig  # noqa: E402
from core.logging import configure_logging, reset_logging  # noqa: E402
from core.mcp import McpConnection  # noqa: E402
from core.providers.types import ToolCall  # noqa: E402

CALLS = 200
ROUNDS = 5
WARMUP = 20
ARGS = {"timezone": "Europe/Paris"}
COMMAND = [sys.executable, "-m", "mcp_server_time"]


async def per_call(call: Callable[[], Awaitable[None]], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        await call()
    return (time.perf_counter() - start) / count


async def main() -> None:
    configure_logging(enabled=False)
    params = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:])
    config = McpServerConfig(command=COMMAND)
    connection = McpConnection("clock", config, env={}, clock=SystemClock())
    source = McpToolSource(connection, config, None)
    registry = ToolRegistry(sources=[source])
    await registry.refresh()
    context = ToolContext("bench", "turn", "c1")
    call = ToolCall(
        id="c1", name="clock__get_current_time", arguments='{"timezone": "Europe/Paris"}'
    )

    async with Client(params) as bare:

        async def sdk() -> None:
            await bare.call_tool("get_current_time", ARGS)

        async def ours() -> None:
            await connection.call("get_current_time", ARGS)

        async def tool() -> None:
            outcome = await registry.execute(call, context)
            assert not outcome.is_error, outcome.content

        for warm in (sdk, ours, tool):
            await per_call(warm, WARMUP)
        rounds: dict[str, list[float]] = {"sdk": [], "connection": [], "tool": []}
        for _ in range(ROUNDS):  # alternate, so drift on a shared machine hits all three
            rounds["sdk"].append(await per_call(sdk, CALLS))
            rounds["connection"].append(await per_call(ours, CALLS))
            rounds["tool"].append(await per_call(tool, CALLS))
    await connection.close()
    reset_logging()

    sdk_s, conn_s, tool_s = (statistics.median(rounds[k]) for k in ("sdk", "connection", "tool"))
    print(f"\nMCP tool call over stdio, mcp-server-time ({CALLS} calls x {ROUNDS} rounds, median)")
    print(f"    bare SDK Client.call_tool (baseline):  {sdk_s * 1000:.3f} ms per call")
    for label, seconds in (
        ("McpConnection.call", conn_s),
        ("ToolRegistry.execute (the bot's path)", tool_s),
    ):
        ratio, added = seconds / sdk_s, (seconds - sdk_s) * 1000
        met = "MET" if ratio <= 1.5 and added < 2 else "MISSED"
        print(
            f"    {label + ':':<38} {seconds * 1000:.3f} ms per call, {ratio:.2f}x bare, "
            f"{added:+.3f} ms   target <= 1.5x and < 2 ms added   {met}"
        )


if __name__ == "__main__":
    asyncio.run(main())
