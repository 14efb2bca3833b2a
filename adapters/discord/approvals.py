"""Approval requests in a thread: the message with Allow / Deny, and its end.

The buttons are plain components whose ``custom_id`` carries the request's
event id (``tb:approval:<action>:<request_id>``); an external agent's request
has one button per option it offers, labelled in its own words
(``tb:approval:opt<n>:<request_id>``, ``n`` its place in the request's
options, which the session log keeps). The bot registers the
dynamic items that act on a press (:mod:`bot.approvals`), so a press works
from the id alone, after a restart too. The message is posted by the bot,
not the persona: it is the bot asking a person on the agent's behalf.

When the request ends, the message is edited to say how (allowed by whom,
denied, no answer in time, cancelled by whom, withdrawn) and the buttons go. A request a
restarted process takes up again finds its message in the thread's recent
history, so it is not asked twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import discord

from adapters.discord.delivery import ThreadDelivery
from adapters.discord.pacing import Lane, lane
from adapters.discord.tool_lines import short_arguments
from core.agent.endings import BOT_CANCEL_REASONS, STOPPING, cancelled_by, is_cancel
from core.agent.events import ApprovalRequested, ApprovalResolved
from core.bindings.records import SessionBindingRecord
from core.logging import get_logger
from core.sessions.payloads import ApprovalOption

__all__ = [
    "APPROVAL_TEMPLATE",
    "ApprovalMessages",
    "approval_view",
    "request_text",
    "resolved_text",
    "withdrawn_text",
]

_log = get_logger("adapters.discord")

APPROVAL_TEMPLATE: Final = (
    r"tb:approval:(?P<action>allow|session|deny|opt[0-9]{1,2}):(?P<request_id>[0-9a-f]{32})"
)
OPTION_LIMIT: Final = 25
"""Buttons one message can hold (five rows of five)."""
LABEL_LIMIT: Final = 80
HISTORY_LOOKBACK: Final = 50
_LABELS: Final = {
    "allow": ("Allow", discord.ButtonStyle.success),
    "session": ("Allow for this session", discord.ButtonStyle.primary),
    "deny": ("Deny", discord.ButtonStyle.danger),
}


_OPTION_STYLES: Final = {
    "allow_once": discord.ButtonStyle.success,
    "allow_always": discord.ButtonStyle.primary,
    "reject_once": discord.ButtonStyle.danger,
    "reject_always": discord.ButtonStyle.danger,
}


def approval_view(request_id: str, options: Sequence[ApprovalOption] = ()) -> discord.ui.View:
    """Allow / Allow for this session / Deny (or the external agent's own options),
    stopped before it is sent: no view stays in memory, every press goes through the
    registered dynamic items."""
    view = discord.ui.View(timeout=None)
    buttons = (
        [(action, label, style) for action, (label, style) in _LABELS.items()]
        if not options
        else [
            (f"opt{n}", option_label(option), _OPTION_STYLES[option.kind])
            for n, option in enumerate(options[:OPTION_LIMIT])
        ]
    )
    for action, label, style in buttons:
        view.add_item(
            discord.ui.Button(
                label=label, style=style, custom_id=f"tb:approval:{action}:{request_id}"
            )
        )
    view.stop()
    return view


def option_label(option: ApprovalOption) -> str:
    """The agent's own name for the option, as a button can show it."""
    label = " ".join(option.label.split()) or option.kind.replace("_", " ")
    return label if len(label) <= LABEL_LIMIT else label[: LABEL_LIMIT - 1] + "…"


def _call(name: str, arguments: str) -> str:
    args = short_arguments(arguments)
    shown = name.replace("`", "'")
    return f"`{shown}`" + (f" ({args})" if args else "")


def request_text(
    agent: str, name: str, arguments: str, timeout_s: float, *, external: bool = False
) -> str:
    """``external``: an external agent asks; without an answer it is told "cancelled"."""
    minutes = max(1, round(timeout_s / 60))
    ends = "cancels the request" if external else "denies it"
    return (
        f"🔐 **{agent}** wants to run {_call(name, arguments)}.\n"
        f"-# The session's owner or an admin decides; no answer within {minutes} min {ends}."
    )


def resolved_text(
    name: str,
    arguments: str,
    decision: str,
    by_name: str | None,
    *,
    option: str | None = None,
    reason: str | None = None,
    external: bool = False,
) -> str:
    """How the request ended; ``option``: the external agent's option chosen, verbatim."""
    who = by_name or "someone"
    if option is not None:
        mark = "⛔" if decision == "deny" else "✅"
        shown = discord.utils.escape_markdown(option)
        return f"🔐 {_call(name, arguments)}: {mark} “{shown}”, chosen by {who}"
    outcome = {
        "allow": f"✅ allowed by {who}",
        "allow_session": f"✅ allowed by {who} for the rest of this session",
        "deny": f"⛔ denied by {who}",
        "timeout": "⌛ nobody answered in time: "
        + ("the agent was told it is cancelled" if external else "denied"),
        "withdrawn": withdrawn_text(reason, by_name),
    }.get(decision, decision)
    return f"🔐 {_call(name, arguments)}: {outcome}"


def withdrawn_text(reason: str | None, by_name: str | None) -> str:
    """Why a request ended unanswered, as its message says it: :func:`withdrawn_words`
    after its mark."""
    words = withdrawn_words(reason, by_name)
    return ("⏹️ " if is_cancel(reason) else "↩️ ") + discord.utils.escape_markdown(words)


def withdrawn_words(reason: str | None, by_name: str | None) -> str:
    """Why a request ended unanswered: a person's ``/cancel`` names them (an external
    agent is answered ``cancelled``), as a cancel of the bot's own says why."""
    if reason == "restart":
        return "withdrawn: a bot restart ended the agent's turn"
    if reason == STOPPING:
        return f"withdrawn: {BOT_CANCEL_REASONS[STOPPING]}"
    if is_cancel(reason):
        return cancelled_by(by_name, reason)
    return "withdrawn: the turn moved on"


@dataclass(slots=True)
class _Posted:
    message_id: str
    name: str
    arguments: str
    external: bool


class ApprovalMessages:
    """One account's approval messages: posted, found again, edited when decided."""

    def __init__(self, delivery: ThreadDelivery) -> None:
        self._delivery = delivery
        self._posted: dict[str, _Posted] = {}
        """Requests asked in this process, by request id."""

    async def ask(self, record: SessionBindingRecord, agent: str, event: ApprovalRequested) -> None:
        call = event.call
        external = bool(event.options)
        text = request_text(agent, call.name, call.arguments, event.timeout_s, external=external)
        if event.request_id in self._posted:
            return
        message_id = await self._find(record, event.request_id) if event.resumed else None
        if message_id is None:
            with lane(Lane.PEOPLE):  # a person waits on it: ahead of deliveries and edits
                message_id = await self._delivery.bot_send(
                    record, text, view=approval_view(event.request_id, event.options)
                )
        self._posted[event.request_id] = _Posted(message_id, call.name, call.arguments, external)

    async def settle(self, record: SessionBindingRecord, event: ApprovalResolved) -> None:
        """Say how the request ended and take the buttons away.

        A request asked by an earlier process (withdrawn at a restart) is found in the
        thread's recent history, so its buttons do not stay there, dead.
        """
        posted = self._posted.pop(event.request_id, None)
        if posted is None:
            if event.reason != "restart":
                return
            message_id = await self._find(record, event.request_id)
            if message_id is None:
                return
            posted = _Posted(message_id, event.name, event.arguments, external=True)
        text = resolved_text(
            posted.name,
            event.arguments or posted.arguments,
            event.decision,
            event.by_name,
            option=event.option,
            reason=event.reason,
            external=posted.external,
        )
        await self._delivery.bot_edit(record, posted.message_id, text, view=None)

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
