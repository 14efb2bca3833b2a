"""Agent: one per session; owns the queues' entry points and the running loop task.

State lives in the session tree (fed only by the session log), so an agent
can be dropped and rebuilt from the log at any time. The agent adds what must
not be persisted: the running task, observers, and one lock that makes
"is a turn running? then queue, else start one" atomic with the loop's own
"any follow-up left? else stop" — without it a message sent just as a turn
ends could be queued after the loop's last look and stranded.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from core.agent.compaction import CompactionSettings, NotCompacted, compact
from core.agent.endings import CANCEL
from core.agent.events import (
    AgentErrorEvent,
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    Compacted,
    MessageQueued,
    TurnCancelled,
)
from core.agent.loop import (
    PendingMessage,
    ResumedTurn,
    TurnRunner,
    carry_over_steering,
    resumable_turn,
    run_turns,
)
from core.agent.messages import MessageDeriver, unanswered_results
from core.agent.policy import ContinuationHook, StopPolicy, default_should_continue
from core.agent.tools import ToolRegistry
from core.agent.usage import ModelInfo
from core.attachments import AttachmentRecord
from core.clock import Clock, SystemClock
from core.config import AgentConfig
from core.errors import ThreadboundError
from core.logging import bind_context, get_logger
from core.providers.types import ChatMessage, Provider, ToolCall
from core.sessions.events import DeliveryMode, SessionEvent
from core.sessions.log import AppendItem, SessionLog, as_item
from core.sessions.payloads import (
    ApprovalDecidedPayload,
    ApprovalDecision,
    ApprovalOption,
    ApprovalRequestedPayload,
    MessageQueuedPayload,
    ModelChangedPayload,
    QueueClearedPayload,
    SteerOrFollowUp,
    TurnCancelledPayload,
)
from core.sessions.tree import (
    ApprovalRecord,
    PendingApproval,
    QueuedMessage,
    SessionSnapshot,
    SessionTree,
)

__all__ = [
    "Agent",
    "AgentBusy",
    "AgentSettings",
    "ApprovalOutcome",
    "NotRecorded",
    "Submission",
    "resolved",
    "withdrawal",
]

_log = get_logger("core.agent")

CANCELLED_RESULT = "not run: the user cancelled the turn"


class AgentBusy(ThreadboundError):
    """``send`` while a turn runs: the caller must say whether to steer or queue."""

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key
        super().__init__(
            f"session {session_key!r} is running a turn; use steer() to redirect it now "
            "or follow_up() to queue the message for after this turn"
        )


class NotRecorded(ThreadboundError):
    """The turn a message started stopped before the message reached the log."""

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key
        super().__init__(
            f"the turn of session {session_key!r} stopped before the message was recorded"
        )


@dataclass(frozen=True, slots=True)
class AgentSettings:
    system_prompt: str | None = None
    model: str | None = None
    agent_name: str | None = None
    steer_skips_pending_tools: bool = True
    follow_up_mode: Literal["one-at-a-time", "all"] = "one-at-a-time"
    stop_policy: StopPolicy = field(default_factory=StopPolicy)
    should_continue: ContinuationHook = default_should_continue
    approval_timeout_s: float = 600.0
    model_info: ModelInfo = field(default_factory=ModelInfo)
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    load_image: Callable[[str], bytes] | None = None
    """Reads stored image attachments for the model (None: images are not sent)."""
    acp: str | None = None
    """The external agent (``[acp_agents.<name>]``) this agent is; None: a model the bot
    calls. An external agent has its own model, tools and context."""

    @classmethod
    def from_config(cls, config: AgentConfig, **profile: Any) -> AgentSettings:
        """Settings from the ``[agent]`` table; ``profile`` adds per-agent values
        (system prompt, model, name)."""
        return cls(
            steer_skips_pending_tools=config.steer_skips_pending_tools,
            follow_up_mode=config.follow_up_mode,
            stop_policy=StopPolicy(
                max_steps_per_turn=config.max_steps_per_turn,
                max_total_tokens=config.max_total_tokens or None,
                max_cost_usd=config.max_cost_usd or None,
            ),
            approval_timeout_s=config.approval_timeout_seconds,
            compaction=CompactionSettings(
                reserve_tokens=config.compaction_reserve_tokens,
                keep_recent_tokens=config.keep_recent_tokens,
            ),
            **profile,
        )


@dataclass(frozen=True, slots=True)
class Submission:
    """What happened to a message: delivered now (it started a turn) or queued."""

    requested: DeliveryMode
    delivered: DeliveryMode | None
    queued_item_id: str | None = None
    recorded: asyncio.Future[None] | None = None
    """For a message that started a turn: resolved once the turn has written it to the
    log (failed with :class:`NotRecorded` if the turn stopped first). None: the message
    was in the log before the call returned (it was queued)."""

    @property
    def queued(self) -> bool:
        return self.queued_item_id is not None

    async def wait_recorded(self) -> None:
        """Return once the message is in the session log, durably."""
        if self.recorded is not None:
            await asyncio.shield(self.recorded)


@dataclass(frozen=True, slots=True)
class ApprovalOutcome:
    """The answer to a press: ``recorded`` when this decision is the one that counts;
    otherwise ``record`` is the earlier decision (or None: no such request)."""

    recorded: bool
    record: ApprovalRecord | None


class Agent:
    """The public face of one session's agent: send, steer, follow_up, cancel."""

    def __init__(
        self,
        tree: SessionTree,
        log: SessionLog,
        provider: Provider,
        tools: ToolRegistry | None = None,
        settings: AgentSettings | None = None,
        *,
        on_crash: Callable[[Agent, BaseException], None] | None = None,
        clock: Clock | None = None,
        turns: TurnRunner = run_turns,
    ) -> None:
        self._turns = turns
        self.tree = tree
        self.session_key = tree.session_key
        self._session_log = log
        self.provider = provider
        self.tools = tools or ToolRegistry()
        settings = settings or AgentSettings()
        self.settings = settings
        self.system_prompt = settings.system_prompt
        self.model = settings.model
        self.agent_name = settings.agent_name
        self.stop_policy = settings.stop_policy
        self.should_continue = settings.should_continue
        self.steer_skips_pending_tools = settings.steer_skips_pending_tools
        self.model_info = settings.model_info
        self.compaction = settings.compaction
        self._on_crash = on_crash
        self._entry = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._listeners: list[Callable[[AgentEvent], None]] = []
        self._deriver = MessageDeriver(load_image=settings.load_image)
        self._clock: Clock = clock or SystemClock()
        # Calls waiting for a person, by tool call id; a decision sets the future.
        self._approvals: dict[str, asyncio.Future[ApprovalRecord]] = {}
        self._deciding = asyncio.Lock()

    # -- state -----------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._task is not None

    def snapshot(self) -> SessionSnapshot:
        return self.tree.snapshot()

    def derive_messages(self) -> list[ChatMessage]:
        """The provider messages of the active path, converting only events new since last time."""
        return self._deriver.derive(self.tree, system_prompt=self.system_prompt)

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """The estimated tokens of ``messages`` (tools aside); cheap for the list
        :meth:`derive_messages` returned last, whatever the history's length."""
        return self._deriver.estimate(messages)

    async def wait_idle(self) -> None:
        """Return once no turn runs and no follow-up is waiting to start one."""
        await self._idle.wait()

    # -- entry points ----------------------------------------------------------

    async def send(
        self,
        content: str,
        *,
        author_id: str | None = None,
        author_name: str | None = None,
        attachments: Sequence[AttachmentRecord] = (),
        inbound_id: str | None = None,
    ) -> Submission:
        """Start a turn with this message; refused (AgentBusy) while a turn runs."""
        async with self._entry:
            if self.running:
                raise AgentBusy(self.session_key)
            return self._start(
                "normal",
                "normal",
                content,
                author_id,
                author_name,
                tuple(attachments),
                inbound_id=inbound_id,
            )

    async def steer(
        self,
        content: str,
        *,
        author_id: str | None = None,
        author_name: str | None = None,
        attachments: Sequence[AttachmentRecord] = (),
        inbound_id: str | None = None,
    ) -> Submission:
        """Redirect the running turn at its next safe point; idle, it starts a turn."""
        return await self._submit(
            "steer", content, author_id, author_name, attachments, inbound_id=inbound_id
        )

    async def follow_up(
        self,
        content: str,
        *,
        author_id: str | None = None,
        author_name: str | None = None,
        attachments: Sequence[AttachmentRecord] = (),
        inbound_id: str | None = None,
    ) -> Submission:
        """Queue for after the running turn; idle, it starts a turn."""
        return await self._submit(
            "follow_up", content, author_id, author_name, attachments, inbound_id=inbound_id
        )

    async def resume(self) -> bool:
        """Start on queued messages (after a restart); False when idle with nothing queued.

        A turn a previous process left waiting for an approval goes on waiting (its
        buttons still work). Steering a stopped turn never took is queued again as a
        follow-up first.
        """
        async with self._entry:
            if self.running:
                return True
            waiting = resumable_turn(self.tree)
            if waiting is not None:
                self._spawn([], resumed=waiting)
                return True
            await carry_over_steering(self)
            batch = self._take_follow_ups()
            if not batch:
                return False
            self._spawn(batch)
            return True

    async def _submit(
        self,
        mode: SteerOrFollowUp,
        content: str,
        author_id: str | None,
        author_name: str | None = None,
        attachments: Sequence[AttachmentRecord] = (),
        *,
        inbound_id: str | None = None,
    ) -> Submission:
        async with self._entry:
            if not self.running:
                # Nothing to steer or queue behind: deliver as an ordinary message,
                # and keep what was asked for in the log.
                return self._start(
                    mode,
                    "normal",
                    content,
                    author_id,
                    author_name,
                    tuple(attachments),
                    inbound_id=inbound_id,
                )
            item_id = uuid.uuid4().hex
            await self.append(
                MessageQueuedPayload(
                    item_id=item_id,
                    mode=mode,
                    text=content,
                    author_id=author_id,
                    author_name=author_name,
                    attachments=list(attachments),
                    inbound_id=inbound_id,
                )
            )
        self.emit(MessageQueued(self.session_key, item_id, mode, content))
        if mode == "steer":
            # A steer redirects the turn now: a call still waiting for approval is not run.
            for pending in self.tree.pending_approvals:
                await self.decide(pending.tool_call_id, "withdrawn", reason="steer")
        return Submission(requested=mode, delivered=None, queued_item_id=item_id)

    def _start(
        self,
        requested: DeliveryMode,
        delivered: DeliveryMode,
        content: str,
        author: str | None,
        author_name: str | None = None,
        attachments: tuple[AttachmentRecord, ...] = (),
        *,
        inbound_id: str | None = None,
    ) -> Submission:
        recorded: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending = PendingMessage(
            content,
            delivered,
            requested,
            author,
            author_name=author_name,
            attachments=attachments,
            inbound_id=inbound_id,
            recorded=recorded,
        )
        self._spawn([pending])
        return Submission(requested=requested, delivered=delivered, recorded=recorded)

    # -- cancel ----------------------------------------------------------------

    async def cancel(
        self,
        *,
        keep_queues: bool = False,
        by_user_id: str | None = None,
        by_name: str | None = None,
        reason: str | None = None,
    ) -> list[QueuedMessage]:
        """Stop the running turn at its next await point; returns the dropped messages.

        The model stream is closed and a running tool is cancelled; calls left
        without a result get a synthetic one so the history stays valid. Both
        queues are cleared unless ``keep_queues``. ``by_user_id``/``by_name``: the
        person who cancelled, recorded and shown as such; a cancel of the bot's own
        names none and gives its ``reason`` instead (see :mod:`core.agent.endings`),
        so it is never taken for a person's.
        """
        async with self._entry:
            task = self._task
            turn_id = self.tree.running_turn_id
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            # Writes the loop had already started still land; see them before
            # deciding which tool calls were left without a result.
            await self._session_log.settled(self.session_key)
            dropped = [] if keep_queues else [*self.tree.steering_queue, *self.tree.follow_up_queue]
            if task is None and turn_id is None and not dropped:
                return []
            withdrawn = self.tree.pending_approvals
            why = reason or CANCEL
            items: list[AppendItem] = [
                as_item(withdrawal(p, why, by_user_id=by_user_id, by_name=by_name))
                for p in withdrawn
            ]
            items += [
                as_item(payload)
                for payload in unanswered_results(self.tree, CANCELLED_RESULT, turn_id)
            ]
            dropped_ids = [m.item_id for m in dropped]
            items.append(
                as_item(
                    TurnCancelledPayload(
                        turn_id=turn_id,
                        dropped_item_ids=dropped_ids,
                        by_user_id=by_user_id,
                        by_name=by_name,
                        reason=reason,
                    )
                )
            )
            if dropped:
                items.append(as_item(QueueClearedPayload(item_ids=dropped_ids, reason="cancelled")))
            await self.append_many(items)
            self._mark_idle()
        for pending in withdrawn:
            self.emit(resolved(self.session_key, pending, "withdrawn", by_name, reason=why))
        self.emit(
            TurnCancelled(
                self.session_key,
                turn_id,
                tuple(m.text for m in dropped),
                by_user_id=by_user_id,
                by_name=by_name,
                reason=reason,
            )
        )
        return dropped

    async def switch_model(
        self,
        name: str,
        provider: Provider,
        model: str,
        info: ModelInfo,
        *,
        by_user_id: str | None = None,
    ) -> None:
        """From the next model call on, use ``model`` on the provider configured as ``name``
        (recorded in the log, so a restart keeps it). A running turn's current call ends
        on the old one."""
        async with self._entry:
            await self.append(
                ModelChangedPayload(provider=name, model=model, by_user_id=by_user_id)
            )
            self.provider = provider
            self.model = model
            self.model_info = info

    async def compact(self, instructions: str | None = None) -> Compacted | NotCompacted:
        """``/compact``: summarise the older conversation now, if that makes it smaller
        (else :class:`NotCompacted` says why, and the conversation is unchanged).
        Refused (AgentBusy) while a turn runs.

        Raises:
            ProviderError: the model could not write the summary; nothing changed.
        """
        async with self._entry:
            if self.running:
                raise AgentBusy(self.session_key)
            done = await compact(self, turn_id=None, reason="command", instructions=instructions)
        if isinstance(done, Compacted):
            self.emit(done)
        return done

    async def suspend(self) -> bool:
        """At shutdown: stop a turn that waits for an approval without recording anything,
        so the next process takes it up (its buttons keep working). False, and nothing
        done, when no turn waits for one."""
        async with self._entry:
            task = self._task
            if task is None or resumable_turn(self.tree) is None:
                return False
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self._session_log.settled(self.session_key)
            self._mark_idle()
            return True

    # -- approvals ---------------------------------------------------------------

    async def request_approval(
        self,
        turn_id: str,
        step: int,
        call: ToolCall,
        options: Sequence[ApprovalOption] = (),
    ) -> ApprovalRecord:
        """Ask for a person's decision on ``call`` and wait for it (the loop calls this).

        The request is recorded first, so it survives a restart: a process that finds
        it recorded (``resume``) waits again, for what is left of the timeout. No
        decision within ``approval_timeout_s`` of the request is a denial.
        """
        decided = self.tree.approval_decision(call.id)
        if decided is not None:  # decided while no process was waiting
            return decided
        resumed = any(p.tool_call_id == call.id for p in self.tree.pending_approvals)
        if not resumed:
            await self.append(
                ApprovalRequestedPayload(
                    turn_id=turn_id,
                    step=step,
                    tool_call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    options=list(options),
                )
            )
        pending = next(p for p in self.tree.pending_approvals if p.tool_call_id == call.id)
        future: asyncio.Future[ApprovalRecord] = asyncio.get_running_loop().create_future()
        self._approvals[call.id] = future
        waited = max(0.0, (self._clock.now() - pending.requested_at).total_seconds())
        left = max(0.0, self.settings.approval_timeout_s - waited)
        self.emit(
            ApprovalRequested(
                self.session_key, turn_id, call, pending.node_id, left, resumed, pending.options
            )
        )
        timer: asyncio.Future[Any] = asyncio.ensure_future(self._clock.sleep(left))
        waiting: list[asyncio.Future[Any]] = [future, timer]
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if not future.done():
                await self.decide(call.id, "timeout")
            return await future
        finally:
            timer.cancel()
            self._approvals.pop(call.id, None)

    async def decide(
        self,
        tool_call_id: str,
        decision: ApprovalDecision,
        *,
        by_user_id: str | None = None,
        by_name: str | None = None,
        reason: str | None = None,
        option_id: str | None = None,
    ) -> ApprovalOutcome:
        """Record the decision on a pending request, once: a second press (or a timeout
        racing a press) gets the decision that was recorded first. ``option_id``: the
        external agent's option chosen (one of the request's own)."""
        async with self._deciding:
            pending = next(
                (p for p in self.tree.pending_approvals if p.tool_call_id == tool_call_id), None
            )
            if pending is None:
                return ApprovalOutcome(False, self.tree.approval_decision(tool_call_id))
            await self.append(
                ApprovalDecidedPayload(
                    turn_id=pending.turn_id,
                    tool_call_id=tool_call_id,
                    name=pending.name,
                    decision=decision,
                    by_user_id=by_user_id,
                    by_name=by_name,
                    reason=reason,
                    option_id=option_id,
                )
            )
            record = self.tree.approval_decision(tool_call_id)
            assert record is not None  # just appended
            future = self._approvals.get(tool_call_id)
            if future is not None and not future.done():
                future.set_result(record)
        self.emit(
            resolved(
                self.session_key, pending, decision, by_name, reason=reason, option_id=option_id
            )
        )
        return ApprovalOutcome(True, record)

    def pending_approval(self, request_id: str) -> str | None:
        """The tool call id of the pending request whose event is ``request_id``."""
        return next(
            (p.tool_call_id for p in self.tree.pending_approvals if p.node_id == request_id), None
        )

    # -- the running task ------------------------------------------------------

    def _spawn(self, batch: list[PendingMessage], *, resumed: ResumedTurn | None = None) -> None:
        self._idle.clear()
        # The task copies the context it is created in: every line its turns log
        # (tools, providers, the store) carries the session key.
        with bind_context(session_key=self.session_key):
            self._task = asyncio.create_task(
                self._turns(self, batch, self._next_batch, resumed=resumed),
                name=f"agent:{self.session_key}",
            )
        self._task.add_done_callback(self._loop_done)
        waiting = [m.recorded for m in batch if m.recorded is not None]
        if waiting:
            self._task.add_done_callback(lambda _: self._unrecorded(waiting))

    def _unrecorded(self, waiting: list[asyncio.Future[None]]) -> None:
        """The loop ended: a message it never wrote to the log was not delivered."""
        for recorded in waiting:
            if not recorded.done():
                recorded.set_exception(NotRecorded(self.session_key))
                recorded.exception()  # retrieved: its caller may have stopped waiting

    async def _next_batch(self) -> list[PendingMessage]:
        """The loop's "anything left?", atomic with the entry points' "is it running?"."""
        async with self._entry:
            await carry_over_steering(self)
            batch = self._take_follow_ups()
            if not batch:
                self._mark_idle()
            return batch

    def _take_follow_ups(self) -> list[PendingMessage]:
        queue = self.tree.follow_up_queue
        if self.settings.follow_up_mode == "one-at-a-time":
            queue = queue[:1]
        return [
            PendingMessage(
                m.text,
                "follow_up",
                "follow_up",
                m.author_id,
                m.item_id,
                m.author_name,
                m.attachments,
            )
            for m in queue
        ]

    def _mark_idle(self) -> None:
        self._task = None
        self._idle.set()

    def _loop_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        # A bug or a store failure, not a model error (those end the turn in-band).
        if self._task is task:
            self._mark_idle()
        _log.error("agent.crashed", session_key=self.session_key, exc_info=exc)
        self.emit(
            AgentErrorEvent(self.session_key, self.tree.running_turn_id, str(exc), internal=True)
        )
        if self._on_crash is not None:
            self._on_crash(self, exc)

    # -- log and observers (used by the loop) -----------------------------------

    async def append(
        self, payload: BaseModel, delivery_mode: DeliveryMode | None = None
    ) -> SessionEvent:
        """Record one typed event (its model names its type).

        Once an event is on its way to the store, cancelling the turn does not
        leave the tree behind the store: the log applies it when it commits, and
        ``cancel()`` waits for that (:meth:`SessionLog.settled`).
        """
        return await self._session_log.append(self.tree, payload, delivery_mode=delivery_mode)

    async def append_many(self, items: Sequence[AppendItem]) -> list[SessionEvent]:
        return await self._session_log.append_many(self.tree, items)

    def subscribe(self, listener: Callable[[AgentEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with every event; returns the function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Every event from now on, as an async iterator (unsubscribes when closed)."""
        queue: asyncio.Queue[AgentEvent] = asyncio.Queue()
        unsubscribe = self.subscribe(queue.put_nowait)
        try:
            while True:
                yield await queue.get()
        finally:
            unsubscribe()

    def emit(self, event: AgentEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                _log.warning("agent.listener_failed", session_key=self.session_key, exc_info=True)


def withdrawal(
    pending: PendingApproval,
    reason: str,
    *,
    by_user_id: str | None = None,
    by_name: str | None = None,
) -> ApprovalDecidedPayload:
    """The decision that ends ``pending`` without an answer to it (``reason``: cancel,
    restart, stopping, timed_out); ``by_*``: the person whose ``/cancel`` ended it."""
    return ApprovalDecidedPayload(
        turn_id=pending.turn_id,
        tool_call_id=pending.tool_call_id,
        name=pending.name,
        decision="withdrawn",
        by_user_id=by_user_id,
        by_name=by_name,
        reason=reason,
    )


def resolved(
    session_key: str,
    pending: PendingApproval,
    decision: str,
    by_name: str | None = None,
    *,
    reason: str | None = None,
    option_id: str | None = None,
) -> ApprovalResolved:
    """The event saying how ``pending`` ended, with what its message needs to say so."""
    option = next((o.label for o in pending.options if o.option_id == option_id), None)
    return ApprovalResolved(
        session_key,
        pending.tool_call_id,
        pending.node_id,
        decision,
        by_name,
        name=pending.name,
        arguments=pending.arguments,
        option=option,
        reason=reason,
    )
