"""An MCP server for the tests, run over stdio by its path: tools that misbehave on demand.

Built with the official SDK's server classes. ``wait`` hangs as long as asked,
``die`` kills the server mid-call, ``big`` answers with a huge result, ``grow``
adds a tool and says the list changed (in both protocol eras), ``refuse``
answers with a JSON-RPC error, ``echo`` just answers; ``pid``, ``env`` and
``interpreter`` tell the tests about the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

server = MCPServer("toolbox")


@server.tool()
async def wait(seconds: float) -> str:
    """Wait ``seconds`` before answering."""
    await asyncio.sleep(seconds)
    return f"waited {seconds:g}s"


@server.tool()
def die() -> str:
    """Exit the server process at once, without answering."""
    os._exit(3)


@server.tool()
def big(n: int) -> str:
    """Answer with ``n`` characters."""
    return "x" * n


@server.tool()
def echo(text: str) -> str:
    """Answer with ``text``."""
    return text


@server.tool()
def refuse() -> str:
    """Answer with a JSON-RPC error instead of a result."""
    raise MCPError(code=INVALID_PARAMS, message="refused on purpose")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def env(name: str) -> str:
    """The server's environment variable ``name``, or ``<unset>``."""
    return os.environ.get(name, "<unset>")


@server.tool()
def interpreter() -> str:
    """The Python running the server."""
    return sys.executable


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``fresh`` and tell the client the tool list changed."""
    server.add_tool(lambda: "fresh!", name="fresh", description="A tool added at run time.")
    await ctx.notify_tools_changed()  # 2026-era clients listening
    with contextlib.suppress(Exception):  # older clients: a notification on the session
        await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    server.run()
