"""Model Context Protocol servers, through the official ``mcp`` SDK.

:class:`McpServers` holds one :class:`McpConnection` per configured server,
started on first use and shared by every session; :mod:`core.agent.mcp_tools`
turns their tools into the agents' tools.
"""

from __future__ import annotations

from core.mcp.connection import McpConnection, McpResult, McpTool, McpUnavailable, result_text
from core.mcp.naming import model_tool_name
from core.mcp.servers import McpServers

__all__ = [
    "McpConnection",
    "McpResult",
    "McpServers",
    "McpTool",
    "McpUnavailable",
    "model_tool_name",
    "result_text",
]
