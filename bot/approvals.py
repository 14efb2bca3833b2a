"""Allow / Deny on a tool call: who may press, and what a press shows.

The buttons (:func:`adapters.discord.approvals.approval_view`) carry the id
of the request's event in the session log; :class:`ApprovalButton` is the
dynamic item that understands a press from that id alone, so a press works
after a restart. What a press means and records is the use case
:meth:`core.approvals.Approvals.decide`, for a live press and for a press a
killed process left unfinished alike: the session is found by the event id,
its agent is started if it is not in memory (taking up the waiting turn), and
the decision is recorded once. Only the session's owner or a server
administrator may decide (:func:`bot.commands.permissions.may_change`); anyone
else gets an ephemeral refusal and nothing changes. A press on a request that
is already decided says by whom, privately.
"""

from __future__ import annotations

from typing import Any

import discord

from adapters.discord.account import AccountRuntime
from adapters.discord.approvals import APPROVAL_TEMPLATE
from bot.commands.bound import uses_of
from bot.commands.permissions import NOT_OWNER, may_change
from bot.handoffs.ui import say
from bot.presses import PressButton
from core.approvals import AlreadyDecided, Decided, NoSuchChoice
from core.approvals_text import GONE, NOT_WAITING, already_decided_text
from core.inbox import InboxPress

__all__ = ["ApprovalButton", "approval_pressed", "recover_approval", "setup_approvals"]


class ApprovalButton(PressButton, template=APPROVAL_TEMPLATE):
    """Allow, Allow for this session, or Deny one waiting tool call (or one of an
    external agent's own options): ``allow``, ``session``, ``deny`` or ``opt<n>``."""

    def __init__(self, item: discord.ui.Button[Any], /, *, action: str, request_id: str) -> None:
        super().__init__(item, action=f"approval:{action}", target=request_id)
        self.choice = action
        self.request_id = request_id

    async def work(self, account: AccountRuntime, interaction: discord.Interaction) -> None:
        await approval_pressed(account, interaction, self.choice, self.request_id)


def setup_approvals(client: discord.Client) -> None:
    client.add_dynamic_items(ApprovalButton)


async def approval_pressed(
    account: AccountRuntime, interaction: discord.Interaction, choice: str, request_id: str
) -> None:
    uses = uses_of(account)
    request = await uses.approvals.find(request_id)
    if request is None:
        await say(interaction, GONE)
        return
    if not await may_change(interaction, uses, request.session_key):
        await say(interaction, NOT_OWNER)
        return
    user = interaction.user
    decided = await uses.approvals.decide(
        request,
        choice,
        by_user_id=str(user.id),
        by_name=getattr(user, "display_name", None) or user.name,
    )
    if isinstance(decided, Decided):
        # The thread's presenter edits the request (and takes the buttons away).
        await interaction.response.defer()
    elif isinstance(decided, NoSuchChoice):
        await say(interaction, "This button does not match the request's options any more.")
    elif isinstance(decided, AlreadyDecided):
        await say(interaction, already_decided_text(decided.record))
    else:  # not pending, never decided: the turn ended another way
        await say(interaction, NOT_WAITING)


async def recover_approval(account: AccountRuntime, press: InboxPress) -> None:
    """A killed process was recording this decision: record it now, if the request still
    waits (a person's Allow or Deny is not lost to a crash). The press is taken as it was
    recorded: whether its author is an administrator cannot be asked again."""
    approvals = uses_of(account).approvals
    request = await approvals.find(press.target)
    if request is None:
        return
    await approvals.decide(
        request,
        press.action.split(":", 1)[1],
        by_user_id=press.author_id,
        by_name=press.author_name,
    )
