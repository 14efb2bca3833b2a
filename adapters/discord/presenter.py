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
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import discord

from adapters.discord.approvals import ApprovalMessages
from adapters.discord.delivery import Persona, ThreadDelivery
from adapters.discord.pacing import Lane
from adapters.discord.sinks import BotSink, StatusSink, ThreadSink
from adapters.discord.streaming import StreamingMessage
from adapters.discord.tool_lines import ToolLine, ToolStatus, TranscriptDoc
from core.agent import shown
from core.agent.agent import Agent
from core.agent.endings import cancelled_by, capitalised, is_cancel, rejected_by
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
from core.agent.shown import compaction_notice, failure_notice, interrupted_notice
from core.bindings.records import SessionBindingRecord
from core.clock import Clock, SystemClock
from core.errors import DeliveryError
from core.logging import get_logger
from core.providers.types import ToolCall
from core.sessions.tree import SessionSnapshot
from core.subagents.delivery import Posted
from core.transcript import SentPart, ThreadMessage, Transcript

__all__ = [
    "ThreadPresenter",
    "after",
    "failure_notice",
    "interrupted_notice",
    "plan_text",
    "status_text",
]

_log = get_logger("adapters.discord")

_STATUS_EVENTS = (
    TurnStarted,
    TurnEnded,
    TurnCancelled,
    MessageQueued,
    SteeringInjected,
)


PLAN_LIMIT = 1_900
_PLAN_MARKS = {"completed": "✅", "in_progress": "🔄", "pending": "⬜"}
_PLAN_STOPPED = "⏹️"
_PLAN_ENDS = {
    "max_steps": "⏹️ stopped: out of steps",
    "budget": "⏹️ stopped: the budget is used up",
}
"""How a plan line ends when its turn ended other than by completing or a person."""
CUT_OFF = f"-# {shown.CUT_OFF}"
"""The mark under words a cancel, a steer or a reject cut off mid-way, in small text."""


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


@dataclass(frozen=True, slots=True)
class _Record:
    """A persona message's record in the transcript: its key, the sink it is sent
    through (which knows how each part was sent), the turn it belongs to."""

    key: str
    sink: ThreadSink
    turn_id: str | None


async def after(previous: asyncio.Future[Any] | None, work: Coroutine[Any, Any, Any]) -> None:
    """Await ``work`` once ``previous`` has ended (however it ended).

    A chain cancelled before ``work``'s turn (a stop, the loop closing) closes ``work``
    unstarted: left alone it would be collected later with a "coroutine was never
    awaited" warning, far from here.
    """
    try:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
    except BaseException:
        work.close()
        raise
    with contextlib.suppress(DeliveryError):  # logged as delivery.failed already
        await work


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
        transcript: Transcript | None = None,
    ) -> None:
        self._delivery = delivery
        self._transcript = transcript
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
        self._records: dict[StreamingMessage, _Record] = {}
        """Each persona message's record in the transcript (what the thread owes)."""
        self._turn_id: str | None = None
        self._restoring = False
        """Lines of an earlier process's messages are being (or were) looked up."""

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
            self._turn_id = event.turn_id
        turn_over = isinstance(event, TurnEnded | TurnCancelled)
        if isinstance(event, _STATUS_EVENTS) and not turn_over:
            self._show_status()
        if isinstance(event, TextDelta):
            self._document().add_text(event.text)
            self._show_document()
        elif isinstance(event, ToolStarted) and self._show_tools:
            call = event.call
            if not (event.resumed and self._elsewhere(lambda: self._resume_line(call))):
                self._add_line(ToolLine(call.id, call.name, call.arguments))
        elif isinstance(event, ApprovalRequested):
            call = event.call
            if not self._set_line(call.id, "waiting", call=call) and event.resumed:
                self._elsewhere(lambda: self._set_line(call.id, "waiting", call=call))
            self._close_stream()  # the model's next words come below the buttons
            self._then(self._approvals.ask(self._record, self._persona.name, event))
        elif isinstance(event, ApprovalResolved):
            self._resolve_line(event)
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
            if not event.stopping and event.turn_id is not None:
                self._elsewhere(lambda: self._cut_lines(event.turn_id))
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
                growing=Lane.DELIVERY,  # an announcement waits for it: never behind streams
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
            self._records[self._stream] = _Record(uuid.uuid4().hex, sink, self._turn_id)
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
        named = (line.name, line.arguments) if call is None else (call.name, call.arguments)
        if (line.status, line.result, line.name, line.arguments) == (status, result, *named):
            return True  # it shows that already (a restart's request asked again)
        line.status, line.result = status, result
        line.name, line.arguments = named
        if stream is self._stream:
            self._show_document()
        else:  # a closed message: edited in place, after what was scheduled before
            self._then(self._land(stream, doc, revise=True))
        return True

    def _finish_line(self, event: ToolFinished, *, looked: bool = False) -> None:
        """A call's outcome, and its result shortened when it ran. A call this presenter
        has no line for may have one in an earlier process's message (``looked``: that
        was looked up already): there it is edited, else it gets a line here."""
        if not self._show_tools:
            return
        status: ToolStatus = "denied" if event.denied else "error" if event.is_error else "ok"
        result = None if event.denied else event.content
        if self._set_line(event.call.id, status, result, call=event.call):
            return
        if not looked and self._elsewhere(lambda: self._finish_line(event, looked=True)):
            return
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
            self._cut_off(shown.STEER_CUT)
            self._end_lines("cancelled")

    def _cut_off(self, why: str) -> None:
        """Mark where the open message's words stopped, so they do not read as finished."""
        mark = CUT_OFF.format(why=discord.utils.escape_markdown(why))
        if self._doc is not None and self._doc.cut_off(mark):
            self._show_document()

    def _resolve_line(self, event: ApprovalResolved, *, looked: bool = False) -> None:
        """A request ended: its line says how (allowed: the call runs now). A request
        asked before a restart has its line in an earlier process's message (``looked``:
        that was looked up already): it is edited there."""
        call_id = event.call_id
        resolve = lambda: self._resolve_line(event, looked=True)  # noqa: E731
        if not looked and call_id not in self._lines and self._elsewhere(resolve):
            return
        if event.decision in ("allow", "allow_session"):
            self._set_line(call_id, "running")  # it runs now
        elif event.decision == "deny" and event.option is not None:  # an agent's reject
            self._end_line(call_id, "rejected", rejected_by(event.by_name, event.option))
        elif event.decision == "withdrawn" and is_cancel(event.reason):
            self._end_line(call_id, "cancelled", cancelled_by(event.by_name, event.reason))
        elif event.decision == "withdrawn":
            self._set_line(call_id, "withdrawn")

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
        doc, self._doc = self._doc, None
        if stream is not None and doc is not None:
            self._then(self._land(stream, doc))

    async def _land(
        self, stream: StreamingMessage, doc: TranscriptDoc, *, revise: bool = False
    ) -> None:
        """Land a persona message's final text (``revise``: a closed one's new text),
        recorded first as owed to the thread, and marked shown once it is.

        A process killed before the thread shows it leaves the record; the next one
        finishes the message from it (:class:`~core.transcript.Transcript`). Trouble
        with the store never keeps the words from Discord: it is logged, and the text
        is posted anyway.
        """
        record = self._records.get(stream)
        transcript = self._transcript
        settled = not revise and stream.shown and not doc.open_calls
        if record is None or transcript is None or settled:  # nothing owed: it shows it all
            await (stream.revise(doc.render()) if revise else stream.close())
            if settled:
                self._records.pop(stream, None)
            return
        owed = self._message(record, stream, doc)
        await transcript.land(
            owed,
            stream.revise(doc.render()) if revise else stream.close(),
            lambda: self._message(record, stream, doc),
            failed=lambda: stream.failure is not None,
        )
        if not doc.open_calls:
            self._records.pop(stream, None)  # nothing in it changes any more

    def _message(
        self, record: _Record, stream: StreamingMessage, doc: TranscriptDoc
    ) -> ThreadMessage:
        content = doc.to_content()
        content["limit"] = stream.part_limit
        return ThreadMessage(
            key=record.key,
            binding_id=self._record.binding_id,
            session_key=self._record.target_session_key,
            turn_id=record.turn_id,
            content=content,
            sent=tuple(
                SentPart(p.message_id, p.path) for p in record.sink.posted(stream.message_ids)
            ),
            open_calls=doc.open_calls,
        )

    # -- lines in an earlier process's messages ---------------------------------------

    def _elsewhere(self, then: Callable[[], object]) -> bool:
        """Run ``then`` once the lines still open in messages an earlier process recorded
        are known here (looked up once per presenter, in order with everything else);
        False when there is no record to look in."""
        if self._transcript is None or not self._show_tools:
            return False
        if not self._restoring:
            self._restoring = True
            self._then(self._restore())

        async def run() -> None:
            then()

        self._then(run())
        return True

    async def _restore(self) -> None:
        """Take over the open lines of the binding's recorded messages: each is edited in
        its message from now on, never written a second time."""
        assert self._transcript is not None
        for message in await self._transcript.with_open_calls(self._record.binding_id):
            doc = TranscriptDoc.from_content(message.content)
            sink = ThreadSink(self._delivery, self._record, self._persona)
            for part in message.sent:
                sink.adopt(Posted(part.message_id, "bot" if part.path == "bot" else "webhook"))
            limit = message.content.get("limit")
            stream = StreamingMessage.resumed(
                sink,
                [part.message_id for part in message.sent],
                doc.render(),
                clock=self._clock,
                min_interval=self._interval,
                limit=limit if isinstance(limit, int) else sink.limit,
            )
            self._records[stream] = _Record(message.key, sink, message.turn_id)
            for call_id in message.open_calls:
                line = doc.line(call_id)
                if line is not None and call_id not in self._lines:
                    self._lines[call_id] = (line, doc, stream)

    def _resume_line(self, call: ToolCall) -> None:
        """A call started before a restart: its line shows where it was, or, recorded
        nowhere, it gets one here."""
        if call.id not in self._lines:
            self._add_line(ToolLine(call.id, call.name, call.arguments))

    def _cut_lines(self, turn_id: str | None) -> None:
        """A restart found ``turn_id`` cut off: its calls still under way say so."""
        for call_id, (line, _doc, stream) in list(self._lines.items()):
            record = self._records.get(stream)
            if record is not None and record.turn_id == turn_id and line.status == "running":
                self._set_line(call_id, "interrupted")

    def _then(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` after what was scheduled before it, so messages keep their order."""
        self._chain = asyncio.ensure_future(after(self._chain, work))

    async def _notice(self, text: str) -> None:
        await self._delivery.send(self._record, self._persona, text)

    async def _bot_notice(self, text: str) -> None:
        """A line from the bot about the agent's tools (a server down, a timeout)."""
        await self._delivery.bot_send(self._record, text)
