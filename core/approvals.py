"""Deciding a tool call's approval request: the use case behind Allow / Deny.

A chat shows a waiting request with one button per choice; a press names the
request (the id of its ``approval.requested`` event in the session log) and the
choice: ``allow``, ``session`` (allow for the rest of the session), ``deny``,
or ``opt<n>``, an external agent's own n-th option, answered exactly, mapped to
the decision its kind means (allow once, allow always, reject), never broader.

Both a live press and a start-up's recovery of a press a killed process was
acting on go through :meth:`Approvals.decide`, so a button means the same
whenever it is pressed. The session's agent is started if it is not in memory
(taking up the waiting turn); the decision is recorded once, and a second
press gets the decision that was recorded first. Who may decide is the
caller's guard (:class:`core.subagents.owners.Owners`), asked before this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.logging import get_logger
from core.runtime import SessionRuntime
from core.sessions.log import SessionLog
from core.sessions.payloads import ApprovalDecision, ApprovalRequestedPayload
from core.sessions.snapshot import ApprovalRecord

__all__ = [
    "AlreadyDecided",
    "ApprovalRequest",
    "ApprovalResult",
    "Approvals",
    "Decided",
    "NoSuchChoice",
    "NotWaiting",
    "decision_of",
]

_log = get_logger("core.approvals")

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


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A request found in the store: its session, and its event's id."""

    session_key: str
    request_id: str


@dataclass(frozen=True, slots=True)
class Decided:
    """This press's decision is the one that counts; it is recorded."""

    tool: str
    decision: ApprovalDecision


@dataclass(frozen=True, slots=True)
class AlreadyDecided:
    """Someone (or the timeout) decided first; ``record`` says how."""

    record: ApprovalRecord


@dataclass(frozen=True, slots=True)
class NotWaiting:
    """Not pending and never decided: the turn ended another way."""


@dataclass(frozen=True, slots=True)
class NoSuchChoice:
    """The choice fits none of the request's options (the button is out of date)."""


ApprovalResult = Decided | AlreadyDecided | NotWaiting | NoSuchChoice


def decision_of(
    request: ApprovalRequestedPayload, choice: str
) -> tuple[ApprovalDecision, str | None] | None:
    """What ``choice`` means for ``request``: a decision, and the external agent's option
    it answers (None for the bot's own choices); None when it fits no option."""
    if choice in _DECISIONS:
        return _DECISIONS[choice], None
    offered = request.options
    if not choice.startswith("opt") or not choice[3:].isdigit() or int(choice[3:]) >= len(offered):
        return None
    option = offered[int(choice[3:])]
    return _OPTION_DECISIONS[option.kind], option.option_id


class Approvals:
    """Approval requests found by their event id, and decided once."""

    def __init__(self, sessions: SessionLog, runtime: SessionRuntime) -> None:
        self._sessions = sessions
        self._runtime = runtime

    async def find(self, request_id: str, /) -> ApprovalRequest | None:
        """The request whose event is ``request_id``; None when no session holds it (the
        session may have been removed)."""
        session_key = await self._sessions.session_of(request_id)
        return ApprovalRequest(session_key, request_id) if session_key is not None else None

    async def decide(
        self,
        request: ApprovalRequest,
        choice: str,
        *,
        by_user_id: str | None,
        by_name: str | None,
    ) -> ApprovalResult:
        """Record ``choice`` on the request, if it still waits and the choice fits it.

        Raises:
            SessionBusy: another live process runs the session.
            StoreError: the session could not be loaded or the decision not recorded.
        """
        agent = await self._runtime.get(request.session_key)  # a restart's agent takes it up
        asked = agent.tree.get(request.request_id).data_as(ApprovalRequestedPayload)
        chosen = decision_of(asked, choice) if asked is not None else None
        if asked is None or chosen is None:
            return NoSuchChoice()
        decision, option_id = chosen
        outcome = await agent.decide(
            asked.tool_call_id,
            decision,
            by_user_id=by_user_id,
            by_name=by_name,
            option_id=option_id,
        )
        if outcome.recorded:
            _log.info(
                "approval.decided",
                session_key=request.session_key,
                tool=asked.name,
                decision=decision,
                user=by_user_id,
            )
            return Decided(asked.name, decision)
        if outcome.record is None:
            return NotWaiting()
        return AlreadyDecided(outcome.record)
