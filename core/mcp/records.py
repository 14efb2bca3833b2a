"""What the rest of the bot knows of MCP: a tool, a result, a server that failed.

Kept apart from :mod:`core.mcp.connection` because that module imports the
official ``mcp`` SDK (tens of MiB and half a second of imports), which a bot
with no ``[mcp_servers.<name>]`` table never needs: the registry, the agents'
tool sources and the services name these records only, and the SDK is loaded
when the first connection is made (:meth:`core.mcp.McpServers.connection`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.errors import ThreadboundError

__all__ = ["McpResult", "McpTool", "McpUnavailable"]


class McpUnavailable(ThreadboundError):
    """A server could not be used: not startable, gone, too slow, or answering an error.

    Args:
        server: the server's configured name.
        message: the full sentence for logs and the model.
        notice: one short line for the thread, starting with 🔌.
    """

    def __init__(self, server: str, message: str, notice: str) -> None:
        super().__init__(message)
        self.server = server
        self.notice = notice


@dataclass(frozen=True, slots=True)
class McpTool:
    """One tool a server offers, as listed; ``model_name`` is what the model calls."""

    server: str
    name: str
    model_name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class McpResult:
    """A tool's answer as the model reads it; ``is_error`` when the tool said it failed."""

    text: str
    is_error: bool
