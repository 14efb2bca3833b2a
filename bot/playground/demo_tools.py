"""A small MCP server for the playground's demo, run by its path (``python demo_tools.py``).

Built with the official SDK's server classes and spoken to over stdio like any
other server, so the playground shows real tool calls without installing
anything: ``roll_dice`` answers at once (a compact tool line in the thread),
``write_note`` is configured to need approval (the Allow / Deny buttons).
Notes live in this process's memory only; it is a demo.

When the bot goes away without a goodbye (a ``kill -9``), the server's stdout
is a broken pipe: it then exits quietly, with status 0, instead of printing the
SDK's fifty-line traceback into the terminal the playground runs in.
"""

from __future__ import annotations

import os
import random
import sys

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


def main() -> int:
    """Serve over stdio until the bot closes the pipes (or dies: a broken pipe is no error)."""
    try:
        server.run()
    except* (BrokenPipeError, ConnectionResetError):
        _silence_stdout()
    return 0


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush of what the dead
    pipe could not take does not print "Exception ignored ... BrokenPipeError"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
