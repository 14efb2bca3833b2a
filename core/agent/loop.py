"""The agent loop, to be read top to bottom.

``run_turns`` runs one turn per batch of user messages and keeps going while
follow-ups are queued. Inside a turn, ``run_turn`` calls the model, runs the
tools it asked for, and calls it again while the continuation hook says so
and the stop policy allows. Steering is acted on only at safe points:

- while the model streams, nothing is interrupted; the step finishes first;
- between tool calls: a queued steer skips the calls not yet started (each
  gets a synthetic "skipped" result so the provider history stays valid) and
  the interruption is recorded;
- while a call waits for a person's approval: a steer withdraws the request
  (the call is not run) and the calls after it are skipped as above;
- after the step: queued steering is injected as tagged user messages and the
  model is called again;
- after the turn: steering no safe point took runs as the next follow-up.

Everything the loop decides is appended to the session log before it acts on
it, so a restart sees the same history. The loop holds no state of its own:
the tree (fed by the log) is the state, the host gives it the rest. That is
also why a turn waiting for an approval survives a restart: ``continue_turn``
picks it up at the waiting call (see :func:`resumable_turn`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from core.agent.compaction import (
    CompactionSettings,
    compact,
    is_context_overflow,
    needs_compaction,
)
from core.agent.events import (
    AgentErrorEvent,
    AgentEvent,
    Compacted,
    SteeringInjected,
    TextDelta,
    ToolFinished,
    ToolsSkipped,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from core.agent.messages import SKIPPED_RESULT
from core.agent.policy import ContinuationHook, StepInfo, StopPolicy
from core.agent.tools import ToolContext, ToolOutcome, ToolRegistry
from core.agent.usage import ModelInfo, counted, estimate_text, usage_payload
from core.attachments import AttachmentRecord
from core.errors import ProviderError
from core.providers.types import (
    ChatMessage,
    Provider,
    StreamDone,
    ToolCall,
    ToolCallReady,
    ToolSpec,
)
from core.providers.types import TextDelta as ProviderText
from core.sessions.events import DeliveryMode, SessionEvent
from core.sessions.log import AppendItem, as_item
from core.sessions.payloads import (
    ApprovalDecision,
    ApprovalOption,
    AssistantMessagePayload,
    BudgetStopPayload,
    QueueMovedPayload,
    SteerInterruptionPayload,
    ToolCallRecord,
    ToolResultPayload,
    TurnEndedPayload,
    TurnStartedPayload,
    UserMessagePayload,
)
from core.sessions.tree import ApprovalRecord, QueuedMessage, SessionTree

__all__ = [
    "EndReason",
    "LoopHost",
    "NextBatch",
    "PendingMessage",
    "ResumedTurn",
    "TurnRunner",
    "carry_over_steering",
    "continue_turn",
    "denial_text",
    "inject_steering",
    "resumable_turn",
    "run_turn",
    "run_turns",
    "user_payload",
]

EndReason = Literal["completed", "max_steps", "budget", "error", "rejected"]
"""How a turn ended; ``rejected`` only for an external agent that stopped at a person's
choice of its reject option (:mod:`core.acp.turns`)."""


@dataclass(frozen=True, slots=True)
class PendingMessage:
    """A user message about to open (or continue) a turn."""

    text: str
    delivered: DeliveryMode
    requested: DeliveryMode
    author_id: str | None = None
    queue_item_id: str | None = None
    author_name: str | None = None
    attachments: tuple[AttachmentRecord, ...] = ()
    inbound_id: str | None = None
    """The channel's id for the message (see :mod:`core.inbox`)."""
    recorded: asyncio.Future[None] | None = None
    """Resolved once the message is in the log: whoever handed it over may then
    consider it delivered (the inbox marks it done)."""


class LoopHost(Protocol):
    """What the loop needs from the agent that runs it."""

    session_key: str
    tree: SessionTree
    provider: Provider
    tools: ToolRegistry
    system_prompt: str | None
    model: str | None
    agent_name: str | None
    stop_policy: StopPolicy
    should_continue: ContinuationHook
    steer_skips_pending_tools: bool
    model_info: ModelInfo
    compaction: CompactionSettings

    def derive_messages(self) -> list[ChatMessage]: ...

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """The estimated tokens of ``messages`` without the tools (see :mod:`core.agent.usage`)."""
        ...

    async def append(
        self, payload: BaseModel, delivery_mode: DeliveryMode | None = None
    ) -> SessionEvent: ...

    async def append_many(self, items: Sequence[AppendItem]) -> list[SessionEvent]: ...

    def emit(self, event: AgentEvent) -> None: ...

    def subscribe(self, listener: Callable[[AgentEvent], None]) -> Callable[[], None]: ...

    async def request_approval(
        self,
        turn_id: str,
        step: int,
        call: ToolCall,
        options: Sequence[ApprovalOption] = (),
    ) -> ApprovalRecord:
        """Record the request (unless a restart finds it recorded), wait for its decision."""
        ...

    async def decide(
        self, tool_call_id: str, decision: ApprovalDecision, *, reason: str | None = None
    ) -> object:
        """Record a decision on a pending request (once)."""
        ...


@dataclass(frozen=True, slots=True)
class ResumedTurn:
    """A turn a previous process left waiting for an approval: where to take it up."""

    turn_id: str
    step: int
    calls: tuple[ToolCall, ...]
    """The calls of that step still without a result, the waiting one first."""


NextBatch = Callable[[], Awaitable[list[PendingMessage]]]


class TurnRunner(Protocol):
    """What runs an agent's turns: :func:`run_turns` (a model the bot calls), or an
    external agent's twin of it (:mod:`core.acp.turns`)."""

    def __call__(
        self,
        host: LoopHost,
        first: list[PendingMessage],
        next_batch: NextBatch,
        *,
        resumed: ResumedTurn | None = None,
    ) -> Coroutine[Any, Any, None]: ...


async def run_turns(
    host: LoopHost,
    first: list[PendingMessage],
    next_batch: NextBatch,
    *,
    resumed: ResumedTurn | None = None,
) -> None:
    """Run turns until no follow-up is waiting; ``next_batch`` decides (and may end) that.

    ``next_batch`` runs under the host's entry lock: it calls ``carry_over_steering``
    and then takes the queued follow-ups, so no message can slip in between.
    ``resumed`` is a turn to finish first (``first`` is then empty).
    """
    batch = first
    if resumed is not None:
        await continue_turn(host, resumed)
        batch = await next_batch()
    while batch:
        await run_turn(host, batch)
        batch = await next_batch()


async def run_turn(host: LoopHost, batch: list[PendingMessage]) -> None:
    turn_id = uuid.uuid4().hex

    # -- open the turn: its marker, then the user message(s) that trigger it
    await host.append(TurnStartedPayload(turn_id=turn_id, trigger=batch[0].delivered))
    host.emit(TurnStarted(host.session_key, turn_id, batch[0].delivered))
    for message in batch:
        await host.append(user_payload(message), message.delivered)
        if message.recorded is not None and not message.recorded.done():
            message.recorded.set_result(None)  # in the log: delivered, whatever happens next
    await _steps(host, turn_id, step=0, resumed=())


async def continue_turn(host: LoopHost, resumed: ResumedTurn) -> None:
    """Finish a turn a restart interrupted while a call waited for approval."""
    host.emit(TurnStarted(host.session_key, resumed.turn_id, "normal"))
    await host.tools.refresh()  # a new process knows its tool servers' tools only now
    await _steps(host, resumed.turn_id, step=resumed.step, resumed=resumed.calls)


async def _steps(host: LoopHost, turn_id: str, *, step: int, resumed: Sequence[ToolCall]) -> None:
    """Call the model and run its tools until the turn is done; then close the turn.

    ``resumed``: calls of step ``step`` still to run before the next model call.
    """
    error = None
    reason: EndReason = "completed"
    try:
        go_on = (
            await _act(host, turn_id, StepInfo(step, True, False, ""), resumed) if resumed else True
        )
        while go_on:
            step += 1

            # -- stop policy first: it always wins over the continuation hook
            if step > host.stop_policy.max_steps_per_turn:
                step, reason = step - 1, "max_steps"
                break
            usage = host.tree.total_usage
            exceeded = host.stop_policy.budget_exceeded(
                usage.prompt_tokens + usage.completion_tokens, usage.cost_usd
            )
            if exceeded is not None:
                await host.append(
                    BudgetStopPayload(turn_id=turn_id, limit=exceeded.limit, used=exceeded.used)
                )
                step, reason = step - 1, "budget"
                break

            # -- call the model; a steer arriving now waits for the stream to end
            text, calls = await _model_step(host, turn_id, step)
            go_on = await _act(host, turn_id, StepInfo(step, bool(calls), False, text), calls)
    except ProviderError as exc:
        reason, error = "error", str(exc)
        host.emit(AgentErrorEvent(host.session_key, turn_id, error))

    # -- close the turn durably before any follow-up may start
    await host.append(TurnEndedPayload(turn_id=turn_id, reason=reason, steps=step, error=error))
    host.emit(TurnEnded(host.session_key, turn_id, reason, step))


async def _act(host: LoopHost, turn_id: str, info: StepInfo, calls: Sequence[ToolCall]) -> bool:
    """Run the step's tools in order, inject steering, and say whether to call the model again.

    A queued steer skips the calls not yet started.
    """
    for index, call in enumerate(calls):
        if host.steer_skips_pending_tools and host.tree.steering_queue:
            await _skip_tools(host, turn_id, info.step, calls[index:])
            break
        await _run_tool(host, turn_id, info.step, call)

    # -- inject steering that arrived during this step, then decide
    injected = await inject_steering(host, turn_id)
    return host.should_continue(StepInfo(info.step, info.had_tool_calls, injected, info.text))


async def carry_over_steering(host: LoopHost) -> None:
    """Steering that missed every safe point of a turn becomes the next follow-up.

    The host calls this under the lock its entry points hold, just before it
    takes the next batch. Done at the end of ``run_turn`` instead, a steer whose
    write was still in flight as the turn closed would land after the last look
    and be stranded in the steering queue of an idle agent.
    """
    leftover = host.tree.steering_queue
    if not leftover:
        return
    await host.append(
        QueueMovedPayload(
            item_ids=[m.item_id for m in leftover], from_mode="steer", to_mode="follow_up"
        )
    )


async def _model_step(host: LoopHost, turn_id: str, step: int) -> tuple[str, list[ToolCall]]:
    """Stream one model response, then record it (and its usage) in one go.

    A prompt that would not leave the reserve free in the window is compacted
    first; a provider that still says the context is exceeded gets one
    compaction and one retry.
    """
    await host.tools.refresh()  # a tool server's list may have changed
    specs = host.tools.specs()
    messages = host.derive_messages()
    too_long = needs_compaction(_prompt_tokens(host, messages), host.model_info, host.compaction)
    if too_long and await _compacted(host, turn_id, "threshold"):
        messages = host.derive_messages()
    try:
        parts, calls, done = await _stream(host, turn_id, step, messages, specs)
    except ProviderError as exc:
        if not is_context_overflow(exc) or not await _compacted(host, turn_id, "overflow"):
            raise
        messages = host.derive_messages()
        try:
            parts, calls, done = await _stream(host, turn_id, step, messages, specs)
        except ProviderError as again:
            if not is_context_overflow(again):
                raise
            raise ProviderError(
                "the conversation does not fit the model's context window even after "
                "compacting it; /rewind to an earlier point, or /model a model with a "
                "larger window"
            ) from again
    calls = _unique_ids(calls, turn_id, step)
    text = "".join(parts)
    # What the server did not count is estimated, as documented in core.agent.usage.
    answer = estimate_text(text) + sum(estimate_text(c.arguments) for c in calls)
    usage, estimated = counted(done.usage, prompt=_prompt_tokens(host, messages), answer=answer)
    records = [ToolCallRecord(id=c.id, name=c.name, arguments=c.arguments) for c in calls]
    items: list[AppendItem] = [
        as_item(
            AssistantMessagePayload(
                turn_id=turn_id,
                text=text,
                tool_calls=records,
                finish_reason=done.finish_reason,
            )
        )
    ]
    items.append(
        as_item(
            usage_payload(turn_id, usage, host.model_info, model=host.model, estimated=estimated)
        )
    )
    await host.append_many(items)
    return text, calls


def _prompt_tokens(host: LoopHost, messages: Sequence[ChatMessage]) -> int:
    """The estimated prompt of a call with ``messages`` and the host's tools; both parts
    are kept running (the deriver's, the registry's), so the cost does not grow with the
    history."""
    return host.prompt_tokens(messages) + host.tools.spec_tokens()


async def _stream(
    host: LoopHost,
    turn_id: str,
    step: int,
    messages: list[ChatMessage],
    specs: list[ToolSpec],
) -> tuple[list[str], list[ToolCall], StreamDone]:
    parts: list[str] = []
    calls: list[ToolCall] = []
    done = StreamDone()
    stream = host.provider.stream(messages, tools=specs, model=host.model)
    async with aclosing(stream) as events:  # cancellation closes the HTTP stream
        async for event in events:
            if isinstance(event, ProviderText):
                parts.append(event.text)
                host.emit(TextDelta(host.session_key, turn_id, step, event.text))
            elif isinstance(event, ToolCallReady):
                calls.append(event.call)
            elif isinstance(event, StreamDone):
                done = event
    return parts, calls, done


async def _compacted(
    host: LoopHost, turn_id: str, reason: Literal["threshold", "overflow"]
) -> bool:
    done = await compact(host, turn_id=turn_id, reason=reason)
    if isinstance(done, Compacted):
        host.emit(done)
        return True
    return False


async def _run_tool(host: LoopHost, turn_id: str, step: int, call: ToolCall) -> None:
    # asked for approval before a restart (answered since, or still waiting)
    resumed = host.tree.approval_decision(call.id) is not None or any(
        p.tool_call_id == call.id for p in host.tree.pending_approvals
    )
    host.emit(ToolStarted(host.session_key, turn_id, call, resumed))
    tool = host.tools.get(call.name)
    if tool is not None and tool.requires_approval and not host.tree.allowed_for_session(call.name):
        decision = await host.request_approval(turn_id, step, call)
        if not decision.allowed:
            await _record_result(
                host, turn_id, call, ToolOutcome(denial_text(decision), True), True
            )
            return
    context = ToolContext(host.session_key, turn_id, call.id, host.agent_name)
    outcome = await host.tools.execute(call, context)
    await _record_result(host, turn_id, call, outcome, False)


async def _record_result(
    host: LoopHost, turn_id: str, call: ToolCall, outcome: ToolOutcome, denied: bool
) -> None:
    await host.append(
        ToolResultPayload(
            turn_id=turn_id,
            tool_call_id=call.id,
            name=call.name,
            content=outcome.content,
            is_error=outcome.is_error,
        )
    )
    host.emit(
        ToolFinished(
            host.session_key,
            turn_id,
            call,
            outcome.content,
            outcome.is_error,
            denied=denied,
            notice=outcome.notice,
        )
    )


def denial_text(decision: ApprovalRecord) -> str:
    """What the model reads for a call that did not get approval."""
    match decision.decision:
        case "deny":
            return f"denied by {decision.by_name or 'a person'}: the tool was not run"
        case "timeout":
            return "denied: nobody approved this call in time; the tool was not run"
        case _:
            why = "a steering message arrived" if decision.reason == "steer" else "the turn ended"
            return f"not run: the approval request was withdrawn because {why}"


def resumable_turn(tree: SessionTree) -> ResumedTurn | None:
    """The running turn, if it stopped at a call waiting for approval: that call and
    the ones after it in its step. Any other running turn cannot be resumed."""
    if tree.running_turn_id is None or not tree.pending_approvals:
        return None
    waiting = tree.pending_approvals[0]
    if waiting.options:
        return None  # an external agent's request: its process did not survive the restart
    answered: set[str] = set()
    for event in reversed(tree.path()):
        match event.data:
            case ToolResultPayload(tool_call_id=call_id):
                answered.add(call_id)
            case AssistantMessagePayload(turn_id=waiting.turn_id, tool_calls=records):
                calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in records]
                ids = [c.id for c in calls]
                if waiting.tool_call_id not in ids:
                    return None
                rest = [c for c in calls[ids.index(waiting.tool_call_id) :] if c.id not in answered]
                if not rest or rest[0].id != waiting.tool_call_id:
                    return None
                return ResumedTurn(waiting.turn_id, waiting.step, tuple(rest))
    return None


async def _skip_tools(host: LoopHost, turn_id: str, step: int, skipped: Sequence[ToolCall]) -> None:
    """Answer each superseded call with a synthetic result and record the interruption."""
    items: list[AppendItem] = [
        as_item(
            ToolResultPayload(
                turn_id=turn_id,
                tool_call_id=call.id,
                name=call.name,
                content=SKIPPED_RESULT,
                skipped=True,
            )
        )
        for call in skipped
    ]
    items.append(
        as_item(
            SteerInterruptionPayload(
                turn_id=turn_id,
                step=step,
                skipped_tool_call_ids=[c.id for c in skipped],
                steering_item_ids=[m.item_id for m in host.tree.steering_queue],
            )
        )
    )
    await host.append_many(items)
    host.emit(ToolsSkipped(host.session_key, turn_id, tuple(skipped)))


async def inject_steering(host: LoopHost, turn_id: str, *, cut: bool = False) -> bool:
    """Deliver every queued steering message as a steer user message; ``cut``: the
    steer cut off what the agent was doing (an external agent's cancelled prompt)."""
    queued: tuple[QueuedMessage, ...] = host.tree.steering_queue
    if not queued:
        return False
    await host.append_many(
        [
            as_item(
                user_payload(
                    PendingMessage(
                        text=m.text,
                        delivered="steer",
                        requested="steer",
                        author_id=m.author_id,
                        author_name=m.author_name,
                        attachments=m.attachments,
                        queue_item_id=m.item_id,
                    )
                ),
                "steer",
            )
            for m in queued
        ]
    )
    host.emit(SteeringInjected(host.session_key, turn_id, tuple(m.text for m in queued), cut))
    return True


def user_payload(message: PendingMessage) -> UserMessagePayload:
    """The ``user_message`` event of a message that opens (or steers) a turn."""
    return UserMessagePayload(
        text=message.text,
        requested_mode=message.requested,
        author_id=message.author_id,
        author_name=message.author_name,
        attachments=list(message.attachments),
        queue_item_id=message.queue_item_id,
        inbound_id=message.inbound_id,
    )


def _unique_ids(calls: list[ToolCall], turn_id: str, step: int) -> list[ToolCall]:
    """Some servers omit or repeat call ids; the history needs each to be unique."""
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    for index, call in enumerate(calls):
        if not call.id or call.id in seen:
            call = call.model_copy(update={"id": f"call_{turn_id[:8]}_{step}_{index}"})
        seen.add(call.id)
        fixed.append(call)
    return fixed
