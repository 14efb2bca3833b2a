"""Showing a session's agent in its bound thread, under the agent's persona.

The presenter listens to one agent's events. Streamed text goes into a
persona message edited as it grows (throttled by :class:`StreamingMessage`);
each tool call is a compact line in that message (``[discord] show_tool_calls``;
with ``"off"`` a call closes the message instead). A call waiting for approval,
a notice, a skip or an injected steer closes the message so the next words
start a new one, in order, below it; the end of a turn lands the final text.
A call's line is edited in place as the call ends, in whichever message it is:
the open one, or one closed since (a call that waited for approval ends after
its message was closed, under the approval buttons).
Approval requests are the bot's own messages with buttons
(:class:`~adapters.discord.approvals.ApprovalMessages`). An external agent's
plan is one bot line per turn, edited as the plan moves; a file it shows (a
long diff) and a notice about it are bot posts, in order with the rest.
Listeners are synchronous, so the Discord calls run in tasks the presenter
owns and awaits in :meth:`drain`; a failure to deliver is logged, never
raised into the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import discord

from adapters.discord.approvals import ApprovalMessages
from adapters.discord.delivery import BotSink, Persona, StatusSink, ThreadDelivery, ThreadSink
from adapters.discord.streaming import StreamingMessage
from adapters.discord.tool_lines import ToolLine, ToolStatus, TranscriptDoc
from core.agent.agent import Agent
from core.agent.endings import TIMED_OUT, cancelled_by, capitalised, rejected_by
from core.agent.events import (
    AgentErrorEvent,
    AgentEvent,
    AgentNotice,
    ApprovalRequested,
    ApprovalResolved,
    Compacted,
    FileShown,
    MessageQueued,
    PlanShown,
    SteeringInjected,
    TextDelta,
    ToolFinished,
    ToolsSkipped,
    ToolStarted,
    TurnCancelled,
    TurnEnded,
    TurnInterrupted,
    TurnStarted,
)
from core.bindings.records import SessionBindingRecord
from core.clock import Clock, SystemClock
from core.errors import DeliveryError
from core.logging import get_logger, redact_text
from core.providers.types import ToolCall
from core.sessions.tree import SessionSnapshot

__all__ = ["ThreadPresenter", "failure_notice", "interrupted_notice", "plan_text", "status_text"]

_log = get_logger("adapters.discord")

_STATUS_EVENTS = (
    TurnStarted,
    TurnEnded,
    TurnCancelled,
    MessageQueued,
    SteeringInjected,
)


NOTICE_LIMIT = 300
PLAN_LIMIT = 1_900
_PLAN_MARKS = {"completed": "✅", "in_progress": "🔄", "pending": "⬜"}
_PLAN_STOPPED = "⏹️"
_PLAN_ENDS = {
    "max_steps": "⏹️ stopped: out of steps",
    "budget": "⏹️ stopped: the budget is used up",
}
"""How a plan line ends when its turn ended other than by completing or a person."""
CUT_OFF = "-# ✂️ cut off here: {why}"
"""The mark under words a cancel, a steer or a reject cut off mid-way."""


def status_text(
    snapshot: SessionSnapshot,
    *,
    failed: bool = False,
    model: str | None = None,
    interrupted: bool = False,
    stopped: str | None = None,
) -> str:
    """The thread's status line: running, idle, failed, cut off by a stop or stopped by
    a person (``stopped``: ``⏹️ Cancelled by @alice``), what is queued, and the model
    when the session was switched to one with ``/model``."""
    if snapshot.running:
        state = "⏳ running"
    elif failed:
        state = "⚠️ last turn failed; send a message to retry"
    elif interrupted:
        state = "⏹️ last turn cut off by a bot restart; send a message to carry on"
    elif stopped:
        state = f"{stopped}; send a message to carry on"
    else:
        state = "✅ idle"
    parts = [state]
    if snapshot.steering_queue:
        parts.append(f"{len(snapshot.steering_queue)} steer pending")
    if snapshot.follow_up_queue:
        count = len(snapshot.follow_up_queue)
        parts.append(f"{count} follow-up{'s' if count != 1 else ''} queued")
    if model:
        parts.append(f"model {model}")
    return "Status: " + " · ".join(parts)


def failure_notice(event: AgentErrorEvent) -> str:
    """What the thread reads when a turn fails: what failed and that a message retries.

    A model's error says what the provider answered (one line, redacted, short);
    an error of the bot itself is only named, its details stay in the logs.
    """
    if event.internal:
        what = "something went wrong inside the bot (the details are in its logs)"
    else:
        reason = " ".join(redact_text(event.message).split()) or "no reason given"
        if len(reason) > NOTICE_LIMIT:
            reason = reason[: NOTICE_LIMIT - 1] + "…"
        # an external agent's failure names the agent and what it did
        what = reason if event.external else f"the model could not answer: {reason}"
    return f"⚠️ This turn failed: {what}. Your next message starts a new turn."


def interrupted_notice(event: TurnInterrupted, name: str) -> str:
    """What the thread reads where a stop cut a turn off, so nothing looks frozen."""
    if event.stopping:
        return (
            f"⏹️ The bot is stopping, so **{name}**'s turn was cut off here. Messages "
            "already queued are kept; once the bot is back, send a message to carry on."
        )
    return (
        f"⚠️ The bot stopped unexpectedly while **{name}** was working; that turn was cut "
        "off here. Send a message to carry on."
    )


def plan_text(entries: tuple[tuple[str, str], ...], *, stopped: str | None = None) -> str:
    """An external agent's plan on one line: each step marked done, under way or to do.

    ``stopped``: how the turn ended when it did not complete (``⏹️ cancelled by
    @alice``); the steps not done are then marked stopped, not left under way."""
    done = sum(1 for _, status in entries if status == "completed")

    def mark(status: str) -> str:
        if stopped and status != "completed":
            return _PLAN_STOPPED
        return _PLAN_MARKS.get(status, "⬜")

    steps = " · ".join(
        f"{mark(status)} {discord.utils.escape_markdown(' '.join(what.split()))}"
        for what, status in entries
    )
    how = f"; {discord.utils.escape_markdown(stopped)}" if stopped else ""
    text = f"📋 **Plan** ({done}/{len(entries)} done{how}): {steps}"
    return text if len(text) <= PLAN_LIMIT else text[: PLAN_LIMIT - 1] + "…"


def compaction_notice(event: Compacted) -> str:
    why = {
        "overflow": "the model said the conversation no longer fit",
        "command": "asked with /compact",
    }.get(event.reason, "to stay within the model's context window")
    return (
        f"🗜️ Compacted the older conversation into a summary ({why}): "
        f"{event.tokens_before:,} → {event.tokens_after:,} tokens. Nothing is deleted; "
        "/tree and /export still show everything."
    )


class ThreadPresenter:
    """One agent's output in one bound thread."""

    def __init__(
        self,
        delivery: ThreadDelivery,
        record: SessionBindingRecord,
        persona: Persona,
        *,
        clock: Clock | None = None,
        min_edit_interval: float = 1.0,
        show_tool_calls: bool = True,
        approvals: ApprovalMessages | None = None,
    ) -> None:
        self._delivery = delivery
        self._show_tools = show_tool_calls
        self._approvals = approvals or ApprovalMessages(delivery)
        self._doc: TranscriptDoc | None = None
        self._record = record
        self._persona = persona
        self._clock: Clock = clock or SystemClock()
        self._interval = min_edit_interval
        self._stream: StreamingMessage | None = None
        self._chain: asyncio.Future[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._agent: Agent | None = None
        self._status: StreamingMessage | None = None
        self._failed = False
        self._interrupted = False
        self._lines: dict[str, tuple[ToolLine, TranscriptDoc, StreamingMessage]] = {}
        """This turn's tool lines by call id, with the message text and stream each is in."""
        self._plan: StreamingMessage | None = None
        """This turn's plan line (an external agent's), edited as the plan moves."""
        self._plan_entries: tuple[tuple[str, str], ...] = ()
        self._stopped: str | None = None
        """How a person stopped the last turn (``⏹️ Cancelled by @alice``), for the status."""

    def attach(self, agent: Agent) -> Callable[[], None]:
        """Start showing ``agent``; returns the function that stops it."""
        self._agent = agent
        self._unsubscribe = agent.subscribe(self.on_event)
        return self.detach

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        status, self._status = self._status, None
        if status is not None:
            self._then(status.close())

    def on_event(self, event: AgentEvent) -> None:
        if isinstance(event, TurnStarted):
            self._failed = self._interrupted = False
            self._stopped = None
        turn_over = isinstance(event, TurnEnded | TurnCancelled)
        if isinstance(event, _STATUS_EVENTS) and not turn_over:
            self._show_status()
        if isinstance(event, TextDelta):
            self._document().add_text(event.text)
            self._show_document()
        elif isinstance(event, ToolStarted) and self._show_tools:
            call = event.call
            self._add_line(ToolLine(call.id, call.name, call.arguments))
        elif isinstance(event, ApprovalRequested):
            self._set_line(event.call.id, "waiting", call=event.call)
            self._close_stream()  # the model's next words come below the buttons
            self._then(self._approvals.ask(self._record, self._persona.name, event))
        elif isinstance(event, ApprovalResolved):
            if event.decision in ("allow", "allow_session"):
                self._set_line(event.call_id, "running")  # it runs now
            elif event.decision == "deny" and event.option is not None:  # an agent's reject
                said = rejected_by(event.by_name, event.option)
                self._end_line(event.call_id, "rejected", said)
            elif event.decision == "withdrawn" and event.reason in ("cancel", TIMED_OUT):
                said = cancelled_by(event.by_name, event.reason)
                self._end_line(event.call_id, "cancelled", said)
            elif event.decision == "withdrawn":
                self._set_line(event.call_id, "withdrawn")
            self._then(self._approvals.settle(self._record, event))
        elif isinstance(event, Compacted):
            self._close_stream()
            self._then(self._bot_notice(compaction_notice(event)))
        elif isinstance(event, PlanShown):
            self._show_plan(event)
        elif isinstance(event, FileShown):
            self._close_stream()  # the file comes where the agent is, in order
            shown = (event.name, event.data)
            self._then(self._delivery.bot_send(self._record, event.caption, file=shown))
        elif isinstance(event, AgentNotice):
            self._close_stream()
            self._then(self._bot_notice(event.text))
        elif isinstance(event, ToolFinished):
            self._finish_line(event)
            if event.notice:
                self._close_stream()
                self._then(self._bot_notice(event.notice))
        elif isinstance(
            event, ToolStarted | ToolsSkipped | SteeringInjected | TurnEnded | TurnCancelled
        ):
            self._ending(event)
            self._close_stream()  # the next words start a new message, in order
            if turn_over:  # "idle" only once the turn's last words have landed
                self._lines.clear()
                self._close_plan()
                self._then(self._status_now())
        elif isinstance(event, TurnInterrupted):
            self._interrupted = True
            self._close_stream()
            self._close_plan()  # the next turn's plan is a line of its own
            self._then(self._bot_notice(interrupted_notice(event, self._persona.name)))
            self._then(self._status_now())
        elif isinstance(event, AgentErrorEvent):
            self._failed = True
            self._end_lines("error")
            self._lines.clear()
            self._close_stream()
            self._stop_plan("⚠️ failed")
            self._then(self._notice(failure_notice(event)))
            self._then(self._status_now())  # a crash ends the turn without TurnEnded

    async def drain(self) -> None:
        """Wait until everything shown so far has reached Discord."""
        while self._chain is not None and not self._chain.done():
            await asyncio.shield(self._chain)
        if self._stream is not None:  # the open message: what it shows so far
            await self._stream.flush()
        if self._status is not None:
            await self._status.flush()
        if self._plan is not None:
            await self._plan.flush()

    async def _status_now(self) -> None:
        self._show_status()

    def refresh_status(self) -> None:
        """Show the status line again now (the model changed, say)."""
        self._show_status()

    def _show_status(self) -> None:
        """Refresh the status line (one bot message per thread, edited sparingly)."""
        if self._agent is None:
            return
        if self._status is None:
            self._status = StreamingMessage(
                StatusSink(self._delivery, self._record),
                clock=self._clock,
                min_interval=self._interval,
            )
        chosen = self._agent.tree.model_choice
        model = chosen[1] if chosen is not None else None
        self._status.replace(
            status_text(
                self._agent.snapshot(),
                failed=self._failed,
                model=model,
                interrupted=self._interrupted,
                stopped=self._stopped,
            )
        )

    def _document(self) -> TranscriptDoc:
        """The open persona message's text, opening one if none is."""
        if self._stream is None or self._doc is None:
            sink = ThreadSink(self._delivery, self._record, self._persona)
            self._stream = StreamingMessage(
                sink, clock=self._clock, min_interval=self._interval, limit=sink.limit
            )
            self._doc = TranscriptDoc()
        return self._doc

    def _show_document(self) -> None:
        if self._stream is not None and self._doc is not None:
            self._stream.replace(self._doc.render())

    def _add_line(self, line: ToolLine) -> None:
        """Put a call's line in the open message, and remember where it is."""
        doc = self._document()
        doc.add_line(line)
        assert self._stream is not None  # opened by _document()
        self._lines[line.call_id] = (line, doc, self._stream)
        self._show_document()

    def _set_line(
        self,
        call_id: str,
        status: ToolStatus,
        result: str | None = None,
        *,
        call: ToolCall | None = None,
    ) -> bool:
        """Show the call's new status in its line, wherever the line is; False when the
        call has no line (tool lines off, or it started before this presenter).
        ``call``: the call as it reads now (an external agent names it better as it goes)."""
        found = self._lines.get(call_id)
        if found is None or not self._show_tools:
            return False
        line, doc, stream = found
        if line.final:
            return True  # withdrawn before the loop reported the call denied: keep that
        line.status, line.result = status, result
        if call is not None:
            line.name, line.arguments = call.name, call.arguments
        if stream is self._stream:
            self._show_document()
        else:  # a closed message: edited in place, after what was scheduled before
            self._then(stream.revise(doc.render()))
        return True

    def _finish_line(self, event: ToolFinished) -> None:
        """A call's outcome, and its result shortened when it ran."""
        if not self._show_tools:
            return
        status: ToolStatus = "denied" if event.denied else "error" if event.is_error else "ok"
        result = None if event.denied else event.content
        if not self._set_line(event.call.id, status, result, call=event.call):
            call = event.call
            self._add_line(ToolLine(call.id, call.name, call.arguments, status, result))

    def _ending(self, event: AgentEvent) -> None:
        """What a turn's end (or a steer that cut an external agent off) does to what
        the thread shows: words cut off get a mark, calls cut short say so, the plan
        line says how it ended, the status line names the person who stopped it."""
        if isinstance(event, TurnCancelled):
            said = cancelled_by(event.by_name, event.reason)
            self._cut_off(said)
            self._end_lines("cancelled", said)  # calls cut short say so, wherever they are
            self._stop_plan(f"⏹️ {said}")
            self._stopped = f"⏹️ {discord.utils.escape_markdown(capitalised(said))}"
        elif isinstance(event, TurnEnded) and event.reason == "rejected":
            said = rejected_by(event.by_name, event.option)
            self._cut_off(said)
            self._end_lines("cancelled")  # the rejected call's own line says who
            self._stop_plan(f"⛔ {said}")
            self._stopped = f"⛔ {discord.utils.escape_markdown(capitalised(said))}"
        elif isinstance(event, TurnEnded) and event.reason in _PLAN_ENDS:
            self._stop_plan(_PLAN_ENDS[event.reason])
        elif isinstance(event, SteeringInjected) and event.cut:
            self._cut_off("a new message redirected the agent")
            self._end_lines("cancelled")

    def _cut_off(self, why: str) -> None:
        """Mark where the open message's words stopped, so they do not read as finished."""
        mark = CUT_OFF.format(why=discord.utils.escape_markdown(why))
        if self._doc is not None and self._doc.cut_off(mark):
            self._show_document()

    def _end_lines(self, status: ToolStatus, ended: str | None = None) -> None:
        """The turn stopped: every call still running or waiting ended with it
        (``ended``: in words naming who, ``cancelled by @alice``)."""
        for call_id in list(self._lines):
            self._end_line(call_id, status, ended)

    def _end_line(self, call_id: str, status: ToolStatus, ended: str | None) -> None:
        """One call ended other than by running: ``ended`` says how, naming who."""
        found = self._lines.get(call_id)
        if found is None or found[0].final:
            return
        found[0].ended = ended
        self._set_line(call_id, status)

    def _show_plan(self, event: PlanShown) -> None:
        """The plan line: posted at the turn's first plan, edited as it moves."""
        if self._plan is None:
            self._plan = StreamingMessage(
                BotSink(self._delivery, self._record),
                clock=self._clock,
                min_interval=self._interval,
            )
        self._plan_entries = event.entries
        self._plan.replace(plan_text(event.entries))

    def _stop_plan(self, how: str) -> None:
        """The turn ended without completing: the plan line's steps not done show as
        stopped and the line says ``how``; then it is closed, as at any turn's end."""
        if self._plan is not None and self._plan_entries:
            self._plan.replace(plan_text(self._plan_entries, stopped=how))
        self._close_plan()

    def _close_plan(self) -> None:
        plan, self._plan = self._plan, None
        self._plan_entries = ()
        if plan is not None:
            self._then(plan.close())

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        self._doc = None
        if stream is not None:
            self._then(stream.close())

    def _then(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` after what was scheduled before it, so messages keep their order."""
        previous = self._chain

        async def run() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            with contextlib.suppress(DeliveryError):  # logged as delivery.failed already
                await work

        self._chain = asyncio.ensure_future(run())

    async def _notice(self, text: str) -> None:
        await self._delivery.send(self._record, self._persona, text)

    async def _bot_notice(self, text: str) -> None:
        """A line from the bot about the agent's tools (a server down, a timeout)."""
        await self._delivery.bot_send(self._record, text)
