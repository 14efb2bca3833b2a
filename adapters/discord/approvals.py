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
from core import approvals_text as words
from core.agent.events import ApprovalRequested, ApprovalResolved
from core.bindings.records import SessionBindingRecord
from core.logging import get_logger
from core.sessions.payloads import ApprovalOption

__all__ = [
    "APPROVAL_TEMPLATE",
    "MARKDOWN",
    "ApprovalMessages",
    "approval_view",
    "option_label",
    "request_text",
    "resolved_text",
    "withdrawn_text",
    "withdrawn_words",
]

_log = get_logger("adapters.discord")

APPROVAL_TEMPLATE: Final = (
    r"tb:approval:(?P<action>allow|session|deny|opt[0-9]{1,2}):(?P<request_id>[0-9a-f]{32})"
)
OPTION_LIMIT: Final = 25
"""Buttons one message can hold (five rows of five)."""
HISTORY_LOOKBACK: Final = 50
_STYLES: Final = {
    "allow": discord.ButtonStyle.success,
    "session": discord.ButtonStyle.primary,
    "deny": discord.ButtonStyle.danger,
}


_OPTION_STYLES: Final = {
    "allow_once": discord.ButtonStyle.success,
    "allow_always": discord.ButtonStyle.primary,
    "reject_once": discord.ButtonStyle.danger,
    "reject_always": discord.ButtonStyle.danger,
}


class _Markdown:
    """Discord's markdown for the approval words (:mod:`core.approvals_text`)."""

    def bold(self, text: str, /) -> str:
        return f"**{text}**"

    def code(self, text: str, /) -> str:
        return f"`{text}`"

    def note(self, text: str, /) -> str:
        return f"\n-# {text}"

    def escape(self, text: str, /) -> str:
        return discord.utils.escape_markdown(text)

    def raw(self, text: str, /) -> str:
        return text


MARKDOWN: Final = _Markdown()
option_label = words.option_label
withdrawn_words = words.withdrawn_words


def approval_view(request_id: str, options: Sequence[ApprovalOption] = ()) -> discord.ui.View:
    """Allow / Allow for this session / Deny (or the external agent's own options),
    stopped before it is sent: no view stays in memory, every press goes through the
    registered dynamic items."""
    view = discord.ui.View(timeout=None)
    shown = options[:OPTION_LIMIT]
    for n, (action, label) in enumerate(words.choices(shown)):
        style = _OPTION_STYLES[shown[n].kind] if shown else _STYLES[action]
        view.add_item(
            discord.ui.Button(
                label=label, style=style, custom_id=f"tb:approval:{action}:{request_id}"
            )
        )
    view.stop()
    return view


def request_text(
    agent: str, name: str, arguments: str, timeout_s: float, *, external: bool = False
) -> str:
    """``external``: an external agent asks; without an answer it is told "cancelled"."""
    return words.request_text(agent, name, arguments, timeout_s, MARKDOWN, external=external)


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
    return words.resolved_text(
        name,
        arguments,
        decision,
        by_name,
        MARKDOWN,
        option=option,
        reason=reason,
        external=external,
    )


def withdrawn_text(reason: str | None, by_name: str | None) -> str:
    """Why a request ended unanswered, as its message says it."""
    return words.withdrawn_text(reason, by_name, MARKDOWN)


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
