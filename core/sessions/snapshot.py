"""The values a :class:`~core.sessions.tree.SessionTree` hands out.

All frozen pydantic models: a snapshot given to a tool or a test cannot drift
from the log it was taken from, and two snapshots compare by value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.attachments import AttachmentRecord
from core.sessions.events import SessionEvent
from core.sessions.payloads import ApprovalOption, SteerOrFollowUp

__all__ = [
    "ApprovalRecord",
    "PendingApproval",
    "QueuedMessage",
    "SessionSnapshot",
    "SteerInterruption",
    "TreeNode",
    "UsageTotals",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class QueuedMessage(BaseModel):
    """A user message waiting for a running turn: to steer it, or to follow it."""

    model_config = _FROZEN

    item_id: str
    mode: SteerOrFollowUp
    text: str
    author_id: str | None
    queued_at: datetime
    author_name: str | None = None
    attachments: tuple[AttachmentRecord, ...] = ()


class SteerInterruption(BaseModel):
    """Where a steering message cut a turn short, and which tool calls it skipped."""

    model_config = _FROZEN

    turn_id: str
    step: int
    skipped_tool_call_ids: tuple[str, ...]


class PendingApproval(BaseModel):
    """A tool call waiting for a person's Allow or Deny; ``node_id`` is its request event,
    the handle a button carries across restarts."""

    model_config = _FROZEN

    node_id: str
    turn_id: str
    step: int
    tool_call_id: str
    name: str
    arguments: str
    requested_at: datetime
    options: tuple[ApprovalOption, ...] = ()
    """An external agent's own answers (empty: Allow, Allow for the session, Deny)."""


class ApprovalRecord(BaseModel):
    """How an approval request ended (see ``ApprovalDecidedPayload``)."""

    model_config = _FROZEN

    tool_call_id: str
    name: str
    decision: Literal["allow", "allow_session", "deny", "timeout", "withdrawn"]
    by_user_id: str | None
    by_name: str | None
    reason: str | None
    decided_at: datetime
    option_id: str | None = None

    @property
    def allowed(self) -> bool:
        return self.decision in ("allow", "allow_session")


class UsageTotals(BaseModel):
    """Tokens and cost summed over every ``usage`` event of the session.

    ``cost_usd`` adds the costs that were reported; usage without a cost counts as zero.
    """

    model_config = _FROZEN

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached_tokens: int = 0
    last_prompt_tokens: int = 0
    """The prompt of the latest model call: how full the context window is now."""
    estimated: bool = False
    """Some of the counts were estimated by the bot (the server reported none)."""


class TreeNode(BaseModel):
    """A conversation node with its children, for display.

    Built bottom-up by :meth:`SessionTree.tree` without recursion; a path of
    thousands of nodes nests that deep, so walk it with a stack, not recursion.
    """

    model_config = _FROZEN

    event: SessionEvent
    children: list[TreeNode]
    on_active_path: bool
    bookmarks: list[str]


class SessionSnapshot(BaseModel):
    """What a session looks like now, for tests and tools (SPEC "Session event tree").

    ``last_interruption`` is the steer interruption of the latest turn (reset
    when the next turn starts); ``branches`` maps each branch id to its head.
    """

    model_config = _FROZEN

    session_key: str
    active_branch_id: str
    head_node_id: str | None
    bookmarks: dict[str, str]
    steering_queue: tuple[QueuedMessage, ...]
    follow_up_queue: tuple[QueuedMessage, ...]
    last_interruption: SteerInterruption | None
    running: bool
    running_turn_id: str | None
    branches: dict[str, str | None]
