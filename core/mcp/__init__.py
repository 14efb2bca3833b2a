"""Model Context Protocol servers, through the official ``mcp`` SDK.

:class:`McpServers` holds one :class:`McpConnection` per configured server,
started on first use and shared by every session; :mod:`core.agent.mcp_tools`
turns their tools into the agents' tools.

Importing this package does not import the SDK: the records the rest of the bot
names live in :mod:`core.mcp.records`, and :class:`McpConnection` and
:func:`result_text` (:mod:`core.mcp.connection`, which imports ``mcp``) are loaded
on first access, so a bot with no server configured never pays for the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.mcp.naming import model_tool_name
from core.mcp.records import McpResult, McpTool, McpUnavailable
from core.mcp.servers import McpServers

if TYPE_CHECKING:
    from core.mcp.connection import McpConnection, result_text

__all__ = [
    "McpConnection",
    "McpResult",
    "McpServers",
    "McpTool",
    "McpUnavailable",
    "model_tool_name",
    "result_text",
]

_FROM_CONNECTION = frozenset({"McpConnection", "result_text"})


def __getattr__(name: str) -> Any:
    """``McpConnection`` and ``result_text``, importing the SDK on first access (PEP 562)."""
    if name in _FROM_CONNECTION:
        from core.mcp import connection

        return getattr(connection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
