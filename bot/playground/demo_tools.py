"""A small MCP server for the playground's demo, run by its path (``python demo_tools.py``).

Built with the official SDK's server classes and spoken to over stdio like any
other server, so the playground shows real tool calls without installing
anything: ``roll_dice`` answers at once (a compact tool line in the thread),
``write_note`` is configured to need approval (the Allow / Deny buttons).
Notes live in this process's memory only; it is a demo.
"""

from __future__ import annotations

import random

from mcp.server.mcpserver import MCPServer

__all__ = ["server"]

server = MCPServer("threadbound-demo")
_notes: list[str] = []


@server.tool()
def roll_dice(sides: int = 6) -> str:
    """Roll one die with the given number of sides (2 to 100)."""
    sides = min(100, max(2, sides))
    return f"rolled a d{sides}: {random.randint(1, sides)}"  # noqa: S311 - a game, not a secret


@server.tool()
def write_note(text: str) -> str:
    """Keep a short note (the playground asks a person to approve this first)."""
    _notes.append(text[:500])
    return f"note {len(_notes)} kept: {text[:80]}"


if __name__ == "__main__":
    server.run()
