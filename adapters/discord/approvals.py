"""Approval requests in a thread: the message with Allow / Deny, and its end.

The buttons are plain components whose ``custom_id`` carries the request's
event id (``tb:approval:<action>:<request_id>``); the bot registers the
dynamic items that act on a press (:mod:`bot.approvals`), so a press works
from the id alone, after a restart too. The message is posted by the bot,
not the persona: it is the bot asking a person on the agent's behalf.

When the request ends, the message is edited to say how (allowed by whom,
denied, no answer in time, withdrawn) and the buttons go. A request a
restarted process takes up again finds its message in the thread's recent
history, so it is not asked twice.
"""

from __future__ import annotations

from typing import Any, Final

import discord

from adapters.discord.delivery import ThreadDelivery
from adapters.discord.tool_lines import short_arguments
from core.agent.events import ApprovalRequested, ApprovalResolved
from core.bindings.records import SessionBindingRecord
from core.logging import get_logger

__all__ = [
    "APPROVAL_TEMPLATE",
    "ApprovalMessages",
    "approval_view",
    "request_text",
    "resolved_text",
]

_log = get_logger("adapters.discord")

APPROVAL_TEMPLATE: Final = (
    r"tb:approval:(?P<action>allow|session|deny):(?P<request_id>[0-9a-f]{32})"
)
HISTORY_LOOKBACK: Final = 50
_LABELS: Final = {
    "allow": ("Allow", discord.ButtonStyle.success),
    "session": ("Allow for this session", discord.ButtonStyle.primary),
    "deny": ("Deny", discord.ButtonStyle.danger),
}


def approval_view(request_id: str) -> discord.ui.View:
    """Allow / Allow for this session / Deny, stopped before it is sent: no view stays in
    memory, every press goes through the registered dynamic items."""
    view = discord.ui.View(timeout=None)
    for action, (label, style) in _LABELS.items():
        view.add_item(
            discord.ui.Button(
                label=label, style=style, custom_id=f"tb:approval:{action}:{request_id}"
            )
        )
    view.stop()
    return view


def _call(name: str, arguments: str) -> str:
    args = short_arguments(arguments)
    shown = name.replace("`", "'")
    return f"`{shown}`" + (f" ({args})" if args else "")


def request_text(agent: str, name: str, arguments: str, timeout_s: float) -> str:
    minutes = max(1, round(timeout_s / 60))
    return (
        f"🔐 **{agent}** wants to run {_call(name, arguments)}.\n"
        f"-# The session's owner or an admin decides; no answer within {minutes} min denies it."
    )


def resolved_text(name: str, arguments: str, decision: str, by_name: str | None) -> str:
    who = by_name or "someone"
    outcome = {
        "allow": f"✅ allowed by {who}",
        "allow_session": f"✅ allowed by {who} for the rest of this session",
        "deny": f"⛔ denied by {who}",
        "timeout": "⌛ nobody answered in time: denied",
        "withdrawn": "↩️ withdrawn: the turn moved on",
    }.get(decision, decision)
    return f"🔐 {_call(name, arguments)}: {outcome}"


class ApprovalMessages:
    """One account's approval messages: posted, found again, edited when decided."""

    def __init__(self, delivery: ThreadDelivery) -> None:
        self._delivery = delivery
        self._posted: dict[str, tuple[str, str, str]] = {}
        """request id -> (message id, tool name, arguments)."""

    async def ask(self, record: SessionBindingRecord, agent: str, event: ApprovalRequested) -> None:
        call = event.call
        text = request_text(agent, call.name, call.arguments, event.timeout_s)
        if event.request_id in self._posted:
            return
        message_id = await self._find(record, event.request_id) if event.resumed else None
        if message_id is None:
            message_id = await self._delivery.bot_send(
                record, text, view=approval_view(event.request_id)
            )
        self._posted[event.request_id] = (message_id, call.name, call.arguments)

    async def settle(self, record: SessionBindingRecord, event: ApprovalResolved) -> None:
        """Say how the request ended and take the buttons away."""
        posted = self._posted.pop(event.request_id, None)
        if posted is None:
            return
        message_id, name, arguments = posted
        text = resolved_text(name, arguments, event.decision, event.by_name)
        await self._delivery.bot_edit(record, message_id, text, view=None)

    def forget(self, request_id: str) -> tuple[str, str, str] | None:
        """Take over a request's message (a press edits it in its own response)."""
        return self._posted.pop(request_id, None)

    async def _find(self, record: SessionBindingRecord, request_id: str) -> str | None:
        """The message a previous process posted for ``request_id``, if still recent."""
        try:
            thread = await self._delivery.manager.fetch_channel(record.conversation.conversation_id)
            async for message in thread.history(limit=HISTORY_LOOKBACK):
                if any(request_id in _custom_ids(row) for row in message.components):
                    return str(message.id)
        except discord.HTTPException as exc:
            _log.warning("approval.lookup_failed", request_id=request_id, error=str(exc))
        return None


def _custom_ids(row: Any) -> str:
    children = getattr(row, "children", None) or [row]
    return " ".join(str(getattr(child, "custom_id", "") or "") for child in children)
