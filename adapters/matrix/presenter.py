"""Showing a session's agent in its bound Matrix thread, under the binding's persona.

A :class:`ThreadPresenter` listens to one agent's events. The model's words go into a
:class:`~adapters.matrix.streaming.MatrixStream`: the first ones post a message in the
thread, later ones edit it. A tool call, the end of the turn (however it ended) or a
failure closes that message, so its final text lands whole and the next words start a
new message below it. Listeners are synchronous: closing runs in a chain of tasks the
presenter owns, and the next message's words wait for it, so messages keep their order.
A delivery failure is logged, never raised into the agent.

Each message's final text is recorded in the transcript as owed before it is sent
(:meth:`core.transcript.Transcript.owe`: its text, the size of its parts, the events
its parts are in) and marked shown once the thread shows it: a process killed
between the two leaves the record, and the next one finishes the message from it
(:class:`~adapters.matrix.transcript.MatrixTranscriptSink`), once. The record's key is
the stream's: the root of its transaction ids, which the sink reuses to post a part
whose post was under way, so the homeserver hands back that event, not a second one.

:class:`MatrixPresenters` decides, for one account, which agent is shown in which
thread: an agent built for a session bound here, or a thread bound while its session's
agent is in memory, gets a presenter; an ended binding's presenter stops.
"""

from __future__ import annotations

import asyncio
import mimetypes
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from adapters.matrix.approvals import MatrixApprovals
from adapters.matrix.commands import PREFIX as COMMAND_PREFIX
from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from adapters.matrix.ids import CHANNEL
from adapters.matrix.personas import PersonaVoices
from adapters.matrix.sending import EventSender, MatrixSender
from adapters.matrix.streaming import MatrixStream
from adapters.matrix.transcript import owed_content
from core.agent import shown
from core.agent.agent import Agent
from core.agent.events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    FileShown,
    TextDelta,
    TurnStarted,
)
from core.bindings.records import SessionBindingRecord
from core.clock import Clock
from core.errors import DeliveryError
from core.events import AgentStarted, BindingEnded, BindingStarted, BindingUpdated, DomainEvent
from core.logging import get_logger
from core.services import Services
from core.transcript import SentPart, ThreadMessage, Transcript

__all__ = ["MatrixPresenters", "ThreadPresenter"]

_log = get_logger("adapters.matrix")


class ThreadPresenter:
    """One agent's words in one bound Matrix thread."""

    def __init__(
        self,
        sender: MatrixSender,
        record: SessionBindingRecord,
        *,
        clock: Clock,
        min_edit_interval: float = 1.0,
        approvals: MatrixApprovals | None = None,
        voices: PersonaVoices | None = None,
        transcript: Transcript | None = None,
    ) -> None:
        """``approvals``: where the agent's approval requests are asked (none: not shown);
        ``voices``: who speaks for the persona (none: the bot, under the persona's name);
        ``transcript``: where each message is recorded as owed until it shows (none: not
        recorded, a message cut by a dead process stays cut)."""
        room_id = record.conversation.parent_conversation_id
        if not room_id:
            raise ValueError("a Matrix thread's binding names its room as the parent")
        self._sender = sender
        self._record = record
        self._room_id = room_id
        self._root = record.conversation.conversation_id
        self._name = record.meta.persona.shown_name
        self._clock = clock
        self._interval = min_edit_interval
        self._approvals = approvals
        self._transcript = transcript
        self._speaker: tuple[EventSender, str | None] = (
            voices.sender_for(record.meta.persona, room_id)
            if voices is not None
            else (sender, self._name)
        )
        self._path = "bot" if self._speaker[1] is not None else "persona"
        """How the parts are sent, for the record: by the bot under the persona's name,
        or by the persona's own user."""
        self._stream: MatrixStream | None = None
        self._keys: dict[MatrixStream, tuple[str, str | None]] = {}
        """Each open or landing message's record key, and the turn it belongs to."""
        self._turn_id: str | None = None
        self._chain: asyncio.Future[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        """The persona the presenter speaks as."""
        return self._name

    def attach(self, agent: Agent) -> None:
        """Start showing ``agent``."""
        self._unsubscribe = agent.subscribe(self.on_event)

    def detach(self) -> None:
        """Show nothing more; the message being written lands what it has."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._close_stream()

    def on_event(self, event: AgentEvent) -> None:
        """What the thread shows of ``event``: words stream into the open message; what
        ends it (:func:`core.agent.shown.closes_message`) lands it whole, marked where a
        cancel, a reject or a steer cut it off; the bot's notices and the agent's files
        come below it, in order."""
        if isinstance(event, TurnStarted):
            self._turn_id = event.turn_id
        if isinstance(event, TextDelta):
            self._append(event.text)
            return
        if isinstance(event, ApprovalRequested) and self._approvals is not None:
            self._close_stream()  # the model's next words come below the prompt
            self._then(self._ask(self._approvals, event))
            return
        if isinstance(event, ApprovalResolved) and self._approvals is not None:
            self._then(self._settle(self._approvals, event))
            return
        why = shown.cut_off_reason(event)
        if why is not None:
            self._cut_off(why)
        if shown.closes_message(event):
            self._close_stream()
        if isinstance(event, FileShown):
            self._then(self._upload(event))
        notice = shown.notice_of(event, self._name, prefix=COMMAND_PREFIX)
        if notice:
            self._then(self._notice(notice))

    async def drain(self) -> None:
        """Wait until everything shown so far has reached the homeserver."""
        while self._chain is not None and not self._chain.done():
            await asyncio.shield(self._chain)
        if self._stream is not None:
            await self._stream.flush()

    def _append(self, text: str) -> None:
        if self._stream is None:
            speaker, name = self._speaker
            key = uuid.uuid4().hex
            self._stream = MatrixStream(
                speaker,
                self._room_id,
                self._root,
                key=key,
                name=name,
                clock=self._clock,
                min_interval=self._interval,
            )
            self._keys[self._stream] = (key, self._turn_id)
        stream = self._stream
        self._in_order(lambda: stream.append(text))

    def _cut_off(self, why: str) -> None:
        """Mark where the open message's words stopped, so they do not read as finished.
        Words still waiting for an earlier message to land (a prompt's edit) are not in
        the stream yet: the mark waits behind them, else it would find none to mark."""
        stream = self._stream
        if stream is None:
            return
        mark = "\n\n" + shown.CUT_OFF.format(why=why)

        def mark_it() -> None:
            if stream.text.strip():
                stream.append(mark)

        self._in_order(mark_it)

    def _in_order(self, step: Callable[[], None]) -> None:
        """``step`` now when nothing is landing; else after what is (an earlier message,
        a prompt's edit), so the thread shows things in the order they happened."""
        if self._chain is None or self._chain.done():
            step()
            return

        async def later() -> None:
            step()

        self._then(later())

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            self._then(self._land(stream))

    async def _land(self, stream: MatrixStream) -> None:
        """Land the message's final text, recorded first as owed to the thread and marked
        shown once it is. Trouble with the store never keeps the words from the thread:
        it is logged, and the text is sent anyway."""
        key, turn_id = self._keys.pop(stream)
        transcript = self._transcript
        if transcript is None or stream.shown:  # nothing owed: it shows it all already
            await self._close(stream)
            return
        owed = self._message(key, turn_id, stream)
        await transcript.land(
            owed,
            self._close(stream),
            lambda: self._message(key, turn_id, stream),
            failed=lambda: stream.failure is not None,
        )

    async def _close(self, stream: MatrixStream) -> None:
        await stream.close()
        if stream.failure is not None:
            _log.warning(
                "matrix.answer_failed",
                binding_id=self._record.binding_id,
                room_id=self._room_id,
                error=str(stream.failure),
            )

    def _message(self, key: str, turn_id: str | None, stream: MatrixStream) -> ThreadMessage:
        """The message as the transcript records it: what
        :class:`~adapters.matrix.transcript.MatrixTranscriptSink` finishes it from."""
        return ThreadMessage(
            key=key,
            binding_id=self._record.binding_id,
            session_key=self._record.target_session_key,
            turn_id=turn_id,
            content=owed_content(stream.text, limit=stream.part_limit),
            sent=tuple(SentPart(event_id, self._path) for event_id in stream.event_ids),
        )

    async def _ask(self, approvals: MatrixApprovals, event: ApprovalRequested) -> None:
        try:
            await approvals.ask(self._room_id, self._root, self._name, event)
        except DeliveryError as exc:
            _log.warning(
                "matrix.approval_failed",
                binding_id=self._record.binding_id,
                request_id=event.request_id,
                error=str(exc),
            )

    async def _settle(self, approvals: MatrixApprovals, event: ApprovalResolved) -> None:
        try:
            await approvals.settle(self._room_id, event)
        except DeliveryError as exc:
            _log.warning(
                "matrix.approval_failed",
                binding_id=self._record.binding_id,
                request_id=event.request_id,
                error=str(exc),
            )

    def _in_thread(self, content: dict[str, Any]) -> dict[str, Any]:
        return content | {
            "m.relates_to": {
                "rel_type": "m.thread",
                "event_id": self._root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": self._root},
            }
        }

    async def _notice(self, text: str) -> None:
        """The bot's own line in the thread (an ``m.notice``), never a ping."""
        content = self._in_thread({"msgtype": "m.notice", "body": text, "m.mentions": {}})
        try:
            await self._sender.send(self._room_id, content, txn=uuid.uuid4().hex)
        except DeliveryError as exc:
            _log.warning("matrix.notice_failed", binding_id=self._record.binding_id, error=str(exc))

    async def _upload(self, event: FileShown) -> None:
        """A file the agent shows (a long diff, an export): its caption, then the file,
        uploaded to the homeserver's media repository."""
        try:
            mxc = await self._sender.client.upload_media(
                event.data, mime_type=mime_of(event.name), filename=event.name
            )
        except MATRIX_FAILURES as exc:
            _log.warning(
                "matrix.file_failed", binding_id=self._record.binding_id, error=matrix_said(exc)
            )
            await self._notice(f"{event.caption}\n⚠️ The file {event.name} could not be uploaded.")
            return
        if event.caption:
            await self._notice(event.caption)
        content = self._in_thread(
            {
                "msgtype": "m.file",
                "body": event.name,
                "filename": event.name,
                "url": str(mxc),
                "info": {"size": len(event.data), "mimetype": mime_of(event.name)},
            }
        )
        try:
            await self._sender.send(self._room_id, content, txn=uuid.uuid4().hex)
        except DeliveryError as exc:
            _log.warning("matrix.file_failed", binding_id=self._record.binding_id, error=str(exc))

    def _then(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after what was scheduled before it."""
        self._chain = asyncio.ensure_future(_after(self._chain, work))


def mime_of(name: str) -> str:
    """The media type a file's name says (a diff is text)."""
    return mimetypes.guess_type(name)[0] or "text/plain"


async def _after(previous: asyncio.Future[None] | None, work: Coroutine[Any, Any, None]) -> None:
    try:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
    except BaseException:
        work.close()
        raise
    await work


class MatrixPresenters:
    """Which agent is shown in which of one Matrix account's threads."""

    def __init__(
        self,
        account_id: str,
        sender: MatrixSender,
        services: Services,
        *,
        clock: Clock | None = None,
        min_edit_interval: float = 1.0,
        approvals: MatrixApprovals | None = None,
        voices: PersonaVoices | None = None,
    ) -> None:
        """``approvals``: the account's approval prompts (none: requests are not shown);
        ``voices``: who speaks for each persona (none: the bot, under its name)."""
        self.account_id = account_id
        self._sender = sender
        self._services = services
        self._clock = clock or services.clock
        self._interval = min_edit_interval
        self._approvals = approvals
        self._voices = voices
        self._shown: dict[str, tuple[Agent, ThreadPresenter]] = {}

    def on_event(self, event: DomainEvent) -> None:
        """What the services tell this account (subscribed once, where it is built)."""
        match event:
            case AgentStarted(agent=agent):
                for binding in self._services.bindings.list_by_session(agent.session_key):
                    if self._shows(binding):
                        self.present(binding, agent)
            case BindingStarted(record=record):
                self._show_resident(record)
            case BindingUpdated(record=record, changed=changed) if "persona" in changed:
                self._show_resident(record)
            case BindingEnded(record=record):
                entry = self._shown.pop(record.binding_id, None)
                if entry is not None:
                    entry[1].detach()
            case _:
                pass

    def present(self, record: SessionBindingRecord, agent: Agent) -> ThreadPresenter:
        """Show ``agent`` in ``record``'s thread (once per agent instance and persona)."""
        current = self._shown.get(record.binding_id)
        if (
            current is not None
            and current[0] is agent
            and current[1].name == record.meta.persona.shown_name
        ):
            return current[1]
        if current is not None:
            current[1].detach()  # the agent was rebuilt, or speaks as another persona
        presenter = ThreadPresenter(
            self._sender,
            record,
            clock=self._clock,
            min_edit_interval=self._interval,
            approvals=self._approvals,
            voices=self._voices,
            transcript=self._services.transcript,
        )
        presenter.attach(agent)
        self._shown[record.binding_id] = (agent, presenter)
        return presenter

    def presenter(self, binding_id: str) -> ThreadPresenter | None:
        entry = self._shown.get(binding_id)
        return entry[1] if entry else None

    async def drain(self) -> None:
        """Wait for everything the presenters queued to be sent (tests, shutdown)."""
        for _, presenter in list(self._shown.values()):
            await presenter.drain()

    def _show_resident(self, record: SessionBindingRecord) -> None:
        agent = self._services.runtime.peek(record.target_session_key)
        if agent is not None and self._shows(record):
            self.present(record, agent)

    def _shows(self, binding: SessionBindingRecord) -> bool:
        conversation = binding.conversation
        return (
            binding.status == "active"
            and conversation.channel == CHANNEL
            and conversation.account_id == self.account_id
            and bool(conversation.parent_conversation_id)
        )
