"""What a session bound to an external agent keeps in its log besides the conversation.

``acp.session`` names the agent's session (so a restart can ask the agent to load
it) and whether the agent can load sessions at all; ``acp.tool_call`` records
each tool call the agent made, with how it ended, for ``/tree`` and ``/export``.
Both are system events: the conversation itself is the usual user and
assistant messages, so another agent taking the session over (a handoff)
reads it as any other.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.sessions.payloads import register_event_type

__all__ = ["ACP_SESSION", "ACP_TOOL_CALL", "AcpSessionPayload", "AcpToolCallPayload"]

ACP_SESSION: Final = "acp.session"
ACP_TOOL_CALL: Final = "acp.tool_call"


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AcpSessionPayload(_Payload):
    agent: str
    """The ``[acp_agents.<name>]`` the session runs in."""
    session_id: str
    can_load: bool
    """The agent advertised ``loadSession``: after a restart it is asked to load this one."""


class AcpToolCallPayload(_Payload):
    turn_id: str
    tool_call_id: str
    title: str
    kind: str | None = None
    status: str
    """``completed`` or ``failed`` (as the agent said, or a non-zero ``exit_code`` in its
    ``rawOutput``), or ``cancelled`` (the turn was)."""
    output: str = Field(default="", max_length=4000)
    """What it returned, shortened."""


register_event_type(ACP_SESSION, "system", AcpSessionPayload)
register_event_type(ACP_TOOL_CALL, "system", AcpToolCallPayload)
