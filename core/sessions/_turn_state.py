"""The part of a session's projection about turns: queues, the running turn, usage.

Kept apart from :class:`~core.sessions.tree.SessionTree`'s conversation
structure (nodes, head, branches, bookmarks): these events never touch the
tree's shape, and the agent loop reads them on every step.

Like the tree's, these handlers replay every event at load and so read the stored
payloads, not ``event.data`` (see :mod:`core.sessions.tree`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from core.attachments import AttachmentRecord
from core.sessions.events import SessionEvent
from core.sessions.payloads import ApprovalOption
from core.sessions.snapshot import (
    ApprovalRecord,
    PendingApproval,
    QueuedMessage,
    SteerInterruption,
    UsageTotals,
)

__all__ = ["TurnState"]


class TurnState:
    """Queues, running turn, last steer interruption and usage totals, from replayed events."""

    __slots__ = ("allowed_tools", "approvals", "cached_tokens", "completion_tokens", "cost",
                 "decisions", "estimated", "follow_up", "inbound", "interruption",
                 "last_prompt_tokens", "model", "people", "prompt_tokens", "running",
                 "steering")  # fmt: skip

    def __init__(self) -> None:
        self.steering: dict[str, QueuedMessage] = {}
        self.follow_up: dict[str, QueuedMessage] = {}
        self.running: str | None = None
        self.interruption: SteerInterruption | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost = 0.0
        self.cached_tokens = 0
        self.last_prompt_tokens = 0
        self.estimated = False
        self.people: set[str] = set()
        """Ids of the people (not the bot) who wrote user messages."""
        self.model: tuple[str, str] | None = None
        """(provider, model) the session was switched to with /model, if it was."""
        self.approvals: dict[str, PendingApproval] = {}
        """Pending approval requests by tool call id."""
        self.decisions: dict[str, ApprovalRecord] = {}
        """Every decided approval by tool call id, so a second press can say who decided."""
        self.allowed_tools: set[str] = set()
        """Tools a person allowed for the rest of the session."""
        self.inbound: set[str] = set()
        """Channel ids of the messages the log holds (see :mod:`core.inbox`)."""

    def apply(self, event: SessionEvent) -> None:
        """Take ``event`` into account; types that do not concern turns are ignored."""
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    @property
    def usage(self) -> UsageTotals:
        return UsageTotals(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cost_usd=self.cost,
            cached_tokens=self.cached_tokens,
            last_prompt_tokens=self.last_prompt_tokens,
            estimated=self.estimated,
        )

    def _drop(self, item_ids: Any) -> None:
        for item_id in item_ids:
            self.steering.pop(item_id, None)
            self.follow_up.pop(item_id, None)

    def _on_user_message(self, event: SessionEvent) -> None:
        self._note_inbound(event)
        author = event.payload.get("author_id")
        if author and not str(author).startswith("system:"):
            self.people.add(str(author))
        # A user message naming a queued item is that item, delivered.
        item_id = event.payload.get("queue_item_id")
        if item_id is not None:
            self._drop((item_id,))

    def _on_turn_started(self, event: SessionEvent) -> None:
        self.running = event.payload["turn_id"]
        self.interruption = None

    def _on_turn_finished(self, event: SessionEvent) -> None:
        turn_id = event.payload["turn_id"]
        if turn_id is not None and turn_id == self.running:
            self.running = None
            self.approvals.clear()  # a request outlives its turn only as history
        self._drop(event.payload.get("dropped_item_ids", ()))

    def _on_model_changed(self, event: SessionEvent) -> None:
        self.model = (event.payload["provider"], event.payload["model"])

    def _on_approval_requested(self, event: SessionEvent) -> None:
        payload = event.payload
        self.approvals[payload["tool_call_id"]] = PendingApproval(
            node_id=event.node_id,
            turn_id=payload["turn_id"],
            step=payload["step"],
            tool_call_id=payload["tool_call_id"],
            name=payload["name"],
            arguments=payload["arguments"],
            requested_at=event.created_at,
            options=tuple(ApprovalOption.model_validate(o) for o in payload.get("options") or ()),
        )

    def _on_approval_decided(self, event: SessionEvent) -> None:
        payload = event.payload
        call_id = payload["tool_call_id"]
        self.approvals.pop(call_id, None)
        self.decisions[call_id] = ApprovalRecord(
            tool_call_id=call_id,
            name=payload["name"],
            decision=payload["decision"],
            by_user_id=payload.get("by_user_id"),
            by_name=payload.get("by_name"),
            reason=payload.get("reason"),
            decided_at=event.created_at,
            option_id=payload.get("option_id"),
        )
        if payload["decision"] == "allow_session":
            self.allowed_tools.add(payload["name"])

    def _on_steer_interruption(self, event: SessionEvent) -> None:
        payload = event.payload
        self.interruption = SteerInterruption(
            turn_id=payload["turn_id"],
            step=payload["step"],
            skipped_tool_call_ids=tuple(payload["skipped_tool_call_ids"]),
        )

    def _note_inbound(self, event: SessionEvent) -> None:
        inbound_id = event.payload.get("inbound_id")
        if inbound_id is not None:
            self.inbound.add(inbound_id)

    def _on_message_queued(self, event: SessionEvent) -> None:
        self._note_inbound(event)
        payload = event.payload
        queue = self.steering if payload["mode"] == "steer" else self.follow_up
        queue[payload["item_id"]] = QueuedMessage(
            item_id=payload["item_id"],
            mode=payload["mode"],
            text=payload["text"],
            author_id=payload.get("author_id"),
            queued_at=event.created_at,
            author_name=payload.get("author_name"),
            attachments=tuple(
                AttachmentRecord.model_validate(a) for a in payload.get("attachments") or ()
            ),
        )

    def _on_queue_moved(self, event: SessionEvent) -> None:
        for item_id in event.payload["item_ids"]:
            item = self.steering.pop(item_id, None)
            if item is not None:
                self.follow_up[item_id] = item.model_copy(update={"mode": "follow_up"})

    def _on_queue_cleared(self, event: SessionEvent) -> None:
        self._drop(event.payload["item_ids"])

    def _on_usage(self, event: SessionEvent) -> None:
        payload = event.payload
        self.prompt_tokens += payload["prompt_tokens"]
        self.completion_tokens += payload["completion_tokens"]
        self.cost += payload.get("cost_usd") or 0.0
        self.cached_tokens += payload.get("cached_tokens") or 0
        if payload.get("purpose", "turn") == "turn":
            self.last_prompt_tokens = payload["prompt_tokens"]
        self.estimated = self.estimated or bool(payload.get("estimated"))


_HANDLERS: Final[dict[str, Callable[[TurnState, SessionEvent], Any]]] = {
    "user_message": TurnState._on_user_message,
    "turn_started": TurnState._on_turn_started,
    "turn_ended": TurnState._on_turn_finished,
    "turn_cancelled": TurnState._on_turn_finished,
    "turn_interrupted": TurnState._on_turn_finished,
    "steer_interruption": TurnState._on_steer_interruption,
    "message_queued": TurnState._on_message_queued,
    "queue_moved": TurnState._on_queue_moved,
    "queue_cleared": TurnState._on_queue_cleared,
    "usage": TurnState._on_usage,
    "approval.requested": TurnState._on_approval_requested,
    "approval.decided": TurnState._on_approval_decided,
    "model.changed": TurnState._on_model_changed,
}
