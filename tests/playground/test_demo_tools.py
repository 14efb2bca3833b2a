"""The playground's demo MCP server exits quietly when the bot dies under it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import bot.playground.demo_tools as demo_tools

SERVER = Path(demo_tools.__file__)
DEADLINE = 30.0


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()


def test_a_broken_pipe_ends_the_server_quietly() -> None:
    """What a ``kill -9`` of the bot leaves: the server's answer meets a closed pipe."""
    with subprocess.Popen(
        [sys.executable, str(SERVER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stdin is not None
        _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
        )
        assert json.loads(process.stdout.readline())["id"] == 1
        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        process.stdout.close()  # the bot is gone: nobody reads the answers any more
        _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        process.stdin.close()
        assert process.wait(timeout=DEADLINE) == 0
        assert process.stderr is not None
        assert process.stderr.read().decode() == ""
