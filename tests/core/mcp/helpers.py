"""Real MCP servers for the connection tests: stdio programs and an HTTP server in the test."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

from core.clock import Clock
from core.config import McpServerConfig
from core.mcp import McpConnection

TOOLBOX = str(Path(__file__).resolve().parents[2] / "mcp_servers" / "toolbox.py")
TIME_SERVER = [sys.executable, "-m", "mcp_server_time"]
MODERN = "2026-07-28"


def connection(
    clock: Clock,
    *,
    name: str = "toolbox",
    mode: str = "auto",
    env: dict[str, str] | None = None,
    **config: Any,
) -> McpConnection:
    """A connection to the toolbox unless ``command`` or ``url`` says otherwise."""
    if "command" not in config and "url" not in config:
        config["command"] = [sys.executable, TOOLBOX]
    return McpConnection(
        name, McpServerConfig.model_validate(config), env=env or {}, clock=clock, mode=mode
    )


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists, a zombie included (a zombie was not reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def adder() -> MCPServer:
    server = MCPServer("web")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def http_server(server: MCPServer, port: int) -> AsyncIterator[str]:
    """Serve ``server`` over streamable HTTP on 127.0.0.1:``port``; yields its URL.

    The socket listens before the server task starts, so a client may connect at once
    (the kernel queues it until uvicorn accepts).
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    sock.setblocking(False)
    # A client may hold a stream open: shutting down does not wait for it to hang up.
    config = uvicorn.Config(
        server.streamable_http_app(), log_level="warning", timeout_graceful_shutdown=1
    )
    web = uvicorn.Server(config)
    task = asyncio.create_task(web.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        # Forced: the client's open listen stream would hold a graceful shutdown forever.
        web.should_exit = web.force_exit = True
        await task
        sock.close()
