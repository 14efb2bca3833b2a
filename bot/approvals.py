"""Allow / Deny on a tool call: who may press, and what a press does.

The buttons (:func:`adapters.discord.approvals.approval_view`) carry the id
of the request's event in the session log; :class:`ApprovalButton` is the
dynamic item that understands a press from that id alone, so a press works
after a restart: the session is found by the event id, its agent is started
if it is not in memory (taking up the waiting turn), and the decision is
recorded once. An external agent's request has a button per option it
offers (``opt<n>``): a press answers exactly that option, mapped to the
decision its kind means (allow once, allow always, reject), never broader.
Only the session's owner or a server administrator may
decide (:func:`bot.commands.permissions.may_change`); anyone else gets an
ephemeral refusal and nothing changes. A press on a request that is already
decided says by whom, privately.
"""

from __future__ import annotations

from typing import Any, Final

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.approvals import APPROVAL_TEMPLATE, approval_view
from bot.commands.permissions import NOT_OWNER, may_change
from bot.handoffs.ui import account_of, say
from bot.presses import handle_press
from core.agent.endings import TIMED_OUT, cancelled_by
from core.inbox import InboxPress
from core.logging import get_logger
from core.sessions.events import SessionEvent
from core.sessions.payloads import ApprovalDecision, ApprovalOption
from core.sessions.tree import ApprovalRecord

__all__ = ["ApprovalButton", "approval_pressed", "recover_approval", "setup_approvals"]

_log = get_logger("bot.approvals")

Action = str
"""``allow``, ``session``, ``deny``, or ``opt<n>``: the request's n-th own option."""
_DECISIONS: Final[dict[str, ApprovalDecision]] = {
    "allow": "allow",
    "session": "allow_session",
    "deny": "deny",
}
_OPTION_DECISIONS: Final[dict[str, ApprovalDecision]] = {
    "allow_once": "allow",
    "allow_always": "allow_session",
    "reject_once": "deny",
    "reject_always": "deny",
}
GONE: Final = "This approval request is no longer known: its session may have been removed."
_DECIDED: Final = {
    "allow": "allowed by {who}",
    "allow_session": "allowed by {who} for the rest of the session",
    "deny": "denied by {who}",
    "timeout": "denied: nobody answered in time",
    "withdrawn": "withdrawn: the turn moved on",
}


class ApprovalButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=APPROVAL_TEMPLATE):
    """Allow, Allow for this session, or Deny one waiting tool call (or one of an
    external agent's own options)."""

    def __init__(self, action: Action, request_id: str) -> None:
        custom_id = f"tb:approval:{action}:{request_id}"
        item = next(
            (
                child
                for child in approval_view(request_id).children
                if isinstance(child, discord.ui.Button) and child.custom_id == custom_id
            ),
            None,
        ) or discord.ui.Button(label=action, custom_id=custom_id)  # an agent's option
        super().__init__(item)
        self.action: Action = action
        self.request_id = request_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: Any,
        /,
    ) -> ApprovalButton:
        return cls(match["action"], match["request_id"])

    async def callback(self, interaction: discord.Interaction) -> None:
        await handle_press(
            account_of(interaction),
            interaction,
            action=f"approval:{self.action}",
            target=self.request_id,
            work=lambda: approval_pressed(interaction, self.action, self.request_id),
        )


def setup_approvals(client: discord.Client) -> None:
    client.add_dynamic_items(ApprovalButton)


async def approval_pressed(
    interaction: discord.Interaction, action: Action, request_id: str
) -> None:
    services = account_of(interaction).services
    session_key = await services.sessions.session_of(request_id)
    if session_key is None:
        await say(interaction, GONE)
        return
    if not await may_change(interaction, services, session_key):
        await say(interaction, NOT_OWNER)
        return
    agent = await services.runtime.get(session_key)  # a restart's agent takes up the turn
    event = agent.tree.get(request_id)
    chosen = decision_of(event, action)
    if chosen is None:
        await say(interaction, "This button does not match the request's options any more.")
        return
    decision, option_id = chosen
    call_id = str(event.payload["tool_call_id"])
    user = interaction.user
    outcome = await agent.decide(
        call_id,
        decision,
        by_user_id=str(user.id),
        by_name=getattr(user, "display_name", None) or user.name,
        option_id=option_id,
    )
    if outcome.recorded:
        _log.info(
            "approval.decided",
            session_key=session_key,
            tool=event.payload["name"],
            decision=decision,
            user=str(user.id),
        )
        # The thread's presenter edits the request (and takes the buttons away).
        await interaction.response.defer()
        return
    record = outcome.record
    if record is None:  # not pending, never decided: the turn ended another way
        await say(interaction, "This request is no longer waiting for a decision.")
        return
    await say(interaction, f"Already decided: {_decided(record)}.")


def _decided(record: ApprovalRecord) -> str:
    """How the request was decided, for a press that came too late; a ``/cancel`` that
    ended it names who cancelled."""
    if record.decision == "withdrawn" and record.reason in ("cancel", TIMED_OUT):
        return cancelled_by(record.by_name, record.reason)
    return _DECIDED.get(record.decision, record.decision).format(who=record.by_name or "someone")


async def recover_approval(account: AccountRuntime, press: InboxPress) -> None:
    """A killed process was recording this decision: record it now, if the request still
    waits (a person's Allow or Deny is not lost to a crash)."""
    services = account.services
    action = press.action.split(":", 1)[1]
    session_key = await services.sessions.session_of(press.target)
    if session_key is None:
        return
    agent = await services.runtime.get(session_key)
    call_id = agent.pending_approval(press.target)
    chosen = decision_of(agent.tree.get(press.target), action)
    if call_id is None or chosen is None:
        return  # decided meanwhile (a timeout, or the press had landed after all)
    decision, option_id = chosen
    await agent.decide(
        call_id,
        decision,
        by_user_id=press.author_id,
        by_name=press.author_name,
        option_id=option_id,
    )
    _log.info(
        "approval.decided",
        session_key=session_key,
        tool=agent.tree.get(press.target).payload["name"],
        decision=decision,
        user=press.author_id,
    )


def decision_of(request: SessionEvent, action: str) -> tuple[ApprovalDecision, str | None] | None:
    """What a button means for ``request``: a decision, and the external agent's option
    it answers (None for our own buttons); None when the button fits no option."""
    if action in _DECISIONS:
        return _DECISIONS[action], None
    offered = request.payload.get("options") or []
    if not action.startswith("opt") or not action[3:].isdigit() or int(action[3:]) >= len(offered):
        return None
    option = ApprovalOption.model_validate(offered[int(action[3:])])
    return _OPTION_DECISIONS[option.kind], option.option_id
