"""The words of an approval request, on every platform: the prompt, its choices, its end.

A chat asks a person on an agent's behalf whether a tool call may run, then says how
the request ended (allowed by whom, denied, no answer in time, cancelled, withdrawn);
a press or reaction that came too late is told how it was decided. These words are
the same on Discord and Matrix; only their markup differs, so every function takes a
:class:`Markup` (markdown on Discord, HTML or plain text on Matrix) and the adapter
keeps its buttons or reactions.

Text that comes from the model or a tool server (the arguments, an external agent's
option, a person's cancel words) goes through :meth:`Markup.escape`, so it can never
be read as markup; a name the chat already shows (the agent's, a person's) through
:meth:`Markup.raw`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from core.agent.endings import BOT_CANCEL_REASONS, STOPPING, cancelled_by, is_cancel
from core.sessions.payloads import ApprovalOption
from core.sessions.snapshot import ApprovalRecord
from core.tool_glance import ARGUMENTS_LIMIT, glance

__all__ = [
    "CHOICE_LABELS",
    "GONE",
    "LABEL_LIMIT",
    "NOT_WAITING",
    "Markup",
    "already_decided_text",
    "call_text",
    "choices",
    "decided_words",
    "option_label",
    "request_text",
    "resolved_text",
    "withdrawn_text",
    "withdrawn_words",
]

CHOICE_LABELS: Final = {
    "allow": "Allow",
    "session": "Allow for this session",
    "deny": "Deny",
}
"""The bot's own choices (a request without an external agent's options), in order."""
LABEL_LIMIT: Final = 80
"""Characters of an external agent's option as a choice shows it (a Discord button's)."""

GONE: Final = "This approval request is no longer known: its session may have been removed."
NOT_WAITING: Final = "This request is no longer waiting for a decision."
_DECIDED: Final = {
    "allow": "allowed by {who}",
    "allow_session": "allowed by {who} for the rest of the session",
    "deny": "denied by {who}",
    "timeout": "denied: nobody answered in time",
}


class Markup(Protocol):
    """How one chat marks up the approval words."""

    def bold(self, text: str, /) -> str: ...

    def code(self, text: str, /) -> str:
        """``text`` (without backticks) as inline code."""
        ...

    def note(self, text: str, /) -> str:
        """A quieter line below the first, its line break included."""
        ...

    def escape(self, text: str, /) -> str:
        """Words from the model, a tool server or a person, neutralised for the markup."""
        ...

    def raw(self, text: str, /) -> str:
        """Text shown as it is (a name); only what the markup itself needs is escaped."""
        ...


def option_label(option: ApprovalOption) -> str:
    """The agent's own name for the option, on one line, cut to :data:`LABEL_LIMIT`."""
    label = " ".join(option.label.split()) or option.kind.replace("_", " ")
    return label if len(label) <= LABEL_LIMIT else label[: LABEL_LIMIT - 1] + "…"


def choices(options: Sequence[ApprovalOption] = ()) -> list[tuple[str, str]]:
    """A request's choices as :meth:`core.approvals.Approvals.decide` takes them, each with
    its label: Allow / Allow for this session / Deny, or the external agent's options
    (``opt<n>``)."""
    if not options:
        return list(CHOICE_LABELS.items())
    return [(f"opt{n}", option_label(option)) for n, option in enumerate(options)]


def call_text(name: str, arguments: str, markup: Markup) -> str:
    """The call asked about: its tool as code, its arguments at a glance."""
    args = markup.escape(glance(arguments or "{}", ARGUMENTS_LIMIT))
    shown = name.replace("`", "'")
    return markup.code(shown) + (f" ({args})" if args else "")


def request_text(
    agent: str,
    name: str,
    arguments: str,
    timeout_s: float,
    markup: Markup,
    *,
    external: bool = False,
) -> str:
    """The prompt. ``external``: an external agent asks; without an answer it is told
    "cancelled"."""
    minutes = max(1, round(timeout_s / 60))
    ends = "cancels the request" if external else "denies it"
    return f"🔐 {markup.bold(agent)} wants to run {call_text(name, arguments, markup)}." + (
        markup.note(
            f"The session's owner or an admin decides; no answer within {minutes} min {ends}."
        )
    )


def resolved_text(
    name: str,
    arguments: str,
    decision: str,
    by_name: str | None,
    markup: Markup,
    *,
    option: str | None = None,
    reason: str | None = None,
    external: bool = False,
) -> str:
    """How the request ended; ``option``: the external agent's option chosen, verbatim."""
    who = markup.raw(by_name or "someone")
    call = call_text(name, arguments, markup)
    if option is not None:
        mark = "⛔" if decision == "deny" else "✅"
        return f"🔐 {call}: {mark} “{markup.escape(option)}”, chosen by {who}"
    outcome = {
        "allow": f"✅ allowed by {who}",
        "allow_session": f"✅ allowed by {who} for the rest of this session",
        "deny": f"⛔ denied by {who}",
        "timeout": "⌛ nobody answered in time: "
        + ("the agent was told it is cancelled" if external else "denied"),
        "withdrawn": withdrawn_text(reason, by_name, markup),
    }.get(decision, markup.raw(decision))
    return f"🔐 {call}: {outcome}"


def withdrawn_text(reason: str | None, by_name: str | None, markup: Markup) -> str:
    """Why a request ended unanswered, as its prompt says it: :func:`withdrawn_words`
    after its mark."""
    words = withdrawn_words(reason, by_name)
    return ("⏹️ " if is_cancel(reason) else "↩️ ") + markup.escape(words)


def withdrawn_words(reason: str | None, by_name: str | None) -> str:
    """Why a request ended unanswered: a person's cancel names them (an external agent
    is answered ``cancelled``), as a cancel of the bot's own says why."""
    if reason == "restart":
        return "withdrawn: a bot restart ended the agent's turn"
    if reason == STOPPING:
        return f"withdrawn: {BOT_CANCEL_REASONS[STOPPING]}"
    if is_cancel(reason):
        return cancelled_by(by_name, reason)
    return "withdrawn: the turn moved on"


def decided_words(record: ApprovalRecord) -> str:
    """How the request was decided, in the words its prompt says it (a cancel names who
    cancelled), for a press that came too late; plain text."""
    if record.decision == "withdrawn":
        return withdrawn_words(record.reason, record.by_name)
    return _DECIDED.get(record.decision, record.decision).format(who=record.by_name or "someone")


def already_decided_text(record: ApprovalRecord) -> str:
    """The answer to a press or reaction on a request someone (or the timeout) decided."""
    return f"Already decided: {decided_words(record)}."
