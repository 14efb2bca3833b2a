"""External agents bound to threads over the Agent Client Protocol (ACP).

A profile with ``acp = "<name>"`` runs as the external agent ``[acp_agents.<name>]``
(OpenCode, Codex, Claude Code, Gemini CLI…): the bot starts its process, speaks
ACP with it over stdio as its client, and shows its work in the thread like a
model's (:mod:`core.acp.turns`). One process per live session
(:mod:`core.acp.connections`), each in a workspace of its own.
"""

from __future__ import annotations

from core.acp.connections import AcpConnections, missing_command
from core.acp.groups import AgentGroups
from core.acp.payloads import ACP_SESSION, ACP_TOOL_CALL

__all__ = ["ACP_SESSION", "ACP_TOOL_CALL", "AcpConnections", "AgentGroups", "missing_command"]
