"""The turns of a session whose agent is an external agent, spoken to over ACP.

The twin of :func:`core.agent.loop.run_turns` for an agent that runs its own loop:
the bot records the turn exactly as it records a model's (``turn_started``, the
user messages, one ``assistant_message``, ``usage``, ``turn_ended``), so the
router, the outbox, ``/usage``, ``/export`` and a handoff read it as any other,
and the agent's events become the same events a model's turn emits (words under
the persona, tool lines, approval buttons), so the thread shows it the same way.

What ACP changes:

- The agent asks before a tool call with options of its own; the person's
  choice is recorded as an approval decision naming the option, and answered
  with exactly that option. No answer in time, a ``/cancel``, a steer or a stop
  answers ``cancelled``. An agent that stops (``cancelled``) after a person
  chose its reject option ends the turn ``rejected``, by that person: the
  person's choice, not the agent's failure.
- A prompt cannot take a message while it runs. A steer cancels the prompt
  (``session/cancel``); once the agent answers ``cancelled``, the steering is
  recorded as steer messages and sent as the next prompt, labelled as steering.
  Follow-ups wait on the bot's side, as for any session.
- The agent keeps the conversation itself. A session it cannot load after a
  restart (or one it never saw, taking a conversation over) starts fresh, and the
  conversation so far in the thread is given to it with the first prompt.
- A prompt is a list of content blocks: what a person wrote is a text block of its
  own, exactly their words; what the bot adds (the conversation so far, who wrote,
  that a message steers) is a note, a text block of its own addressed to the agent
  alone (``annotations.audience = ["assistant"]``, and ``_meta.threadbound.note``
  naming it). OpenCode takes such a block as synthetic context, kept apart from the
  user's message; Codex passes each block as a separate input. Neither mistakes
  the note for the person's request, to echo back or write into files.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Final

from acp import image_block, text_block
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AllowedOutcome,
    Annotations,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
)
from acp.schema import Usage as AcpUsage

from core.acp.connection import AcpConnection, Opened, cancelled
from core.acp.payloads import AcpSessionPayload, AcpToolCallPayload
from core.agent.events import (
    AgentErrorEvent,
    AgentEvent,
    AgentNotice,
    FileShown,
    MessageQueued,
    PlanShown,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from core.agent.loop import (
    EndReason,
    LoopHost,
    NextBatch,
    PendingMessage,
    ResumedTurn,
    inject_steering,
    user_payload,
)
from core.agent.messages import ImageLoader, readable, steering_source, user_words
from core.agent.usage import estimate_text, usage_payload
from core.errors import ProviderError
from core.logging import get_logger
from core.providers.types import ToolCall, Usage
from core.sessions.events import SessionEvent
from core.sessions.log import AppendItem, as_item
from core.sessions.payloads import (
    ApprovalOption,
    AssistantMessagePayload,
    DeliveryMode,
    TurnEndedPayload,
    TurnStartedPayload,
    UserMessagePayload,
)
from core.sessions.tree import ApprovalRecord, SessionTree

__all__ = ["DIFF_INLINE_LINES", "HISTORY_LIMIT", "AcpTurns", "stored_session"]

_log = get_logger("core.acp")

DIFF_INLINE_LINES: Final = 12
"""A diff longer than this goes to the thread as a ``.diff`` file."""
HISTORY_LIMIT: Final = 24_000
"""Characters of earlier conversation given to an agent that starts without it."""
OUTPUT_LIMIT: Final = 4_000
CANCEL_WAIT_SECONDS: Final = 2.0
UNANSWERED: Final = (
    "nobody answered the agent's request in time, so it was told to cancel, and it stopped"
)
"""Why a turn ended when the agent stopped after the bot answered its request for it."""
_STOP_REASONS: Final[dict[str, tuple[EndReason, str | None]]] = {
    "end_turn": ("completed", None),
    "max_tokens": ("max_steps", None),
    "max_turn_requests": ("max_steps", None),
    "refusal": ("error", "the external agent refused to go on with this request"),
    "cancelled": ("error", "the external agent stopped the turn"),
}
"""How a prompt's stop reason ends the turn; ``cancelled`` is an error only when nobody
asked for it (a steer prompts again, a person's reject ends it ``rejected``, a
``/cancel`` cancels the turn)."""


def stored_session(tree: SessionTree, agent: str) -> dict[str, Any] | None:
    """The agent's session the log names last (``acp.session``), if it is ``agent``'s."""
    for event in reversed(tree.events):  # a system event: beside the path, not on it
        if (stored := event.data_as(AcpSessionPayload)) is not None:
            return stored.model_dump() if stored.agent == agent else None
    return None


class AcpTurns:
    """A :class:`~core.agent.loop.TurnRunner` for one session's external agent."""

    def __init__(
        self,
        connection: AcpConnection,
        *,
        display_name: str,
        load_image: ImageLoader | None = None,
    ) -> None:
        self.connection = connection
        self._name = display_name
        self._load_image = load_image

    async def __call__(
        self,
        host: LoopHost,
        first: list[PendingMessage],
        next_batch: NextBatch,
        *,
        resumed: ResumedTurn | None = None,
    ) -> None:
        # ``resumed`` is never given: a restart cannot take an external agent's waiting
        # permission request up again (see core.agent.loop.resumable_turn).
        batch = first
        while batch:
            await _Turn(host, self.connection, self._name, self._load_image).run(batch)
            batch = await next_batch()


@dataclass(slots=True)
class _Call:
    """One of the agent's tool calls, under the id the bot gives it (unique in the log)."""

    call: ToolCall
    kind: str | None
    output: str = ""
    raw_output: Any = None
    """The agent's ``rawOutput``, latest: read when ``content`` said nothing (Codex)."""
    done: bool = False


@dataclass(frozen=True, slots=True)
class _Rejection:
    """A reject option chosen by a person: who, which (its label), on which call."""

    call_id: str
    by_user_id: str | None
    by_name: str | None
    option: str


@dataclass(slots=True)
class _Prompt:
    """What one prompt produced so far."""

    round: int
    parts: list[str] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)
    records: list[AppendItem] = field(default_factory=list)
    cost_usd: float | None = None
    rejection: _Rejection | None = None
    """The person's choice of one of the agent's reject options, if one was made."""
    unanswered: bool = False
    """A request of the agent's was answered ``cancelled`` because nobody answered it in
    time: the bot's doing, should the agent then stop."""


class _Turn:
    """One turn: the prompt, and the prompts a steer sends after it."""

    def __init__(
        self,
        host: LoopHost,
        connection: AcpConnection,
        name: str,
        load_image: ImageLoader | None,
    ) -> None:
        self.host = host
        self.conn = connection
        self.name = name
        self.load_image = load_image
        self.turn_id = uuid.uuid4().hex
        self.prompt = _Prompt(round=0)
        self.waiters: dict[str, asyncio.Future[ApprovalRecord]] = {}
        """Permission requests waiting for a person, by the bot's tool call id."""
        self.images = False

    async def run(self, batch: list[PendingMessage]) -> None:
        host, turn_id = self.host, self.turn_id
        earlier = _conversation(host.tree)

        # -- open the turn, as a model's: the marker, then the messages, recorded
        await host.append(TurnStartedPayload(turn_id=turn_id, trigger=batch[0].delivered))
        host.emit(TurnStarted(host.session_key, turn_id, batch[0].delivered))
        said: list[SessionEvent] = []
        for message in batch:
            said.append(await host.append(user_payload(message), message.delivered))
            if message.recorded is not None and not message.recorded.done():
                message.recorded.set_result(None)

        reason: EndReason = "completed"
        error: str | None = None
        unsubscribe = host.subscribe(self._on_event)
        try:
            opened = await self.conn.open(stored_session(host.tree, self.conn.name))
            context = await self._opened(opened, earlier) if opened is not None else ""
            blocks = self._blocks(said, context)
            while True:
                response = await self._prompt(blocks)
                if response.stop_reason == "cancelled" and host.tree.steering_queue:
                    # -- a steer cancelled the prompt: record it, send it as the next one
                    queued = len(host.tree.path())
                    await inject_steering(host, turn_id, cut=True)
                    steering = [
                        e
                        for e in host.tree.path()[queued:]
                        if e.data_as(UserMessagePayload) is not None
                    ]
                    blocks = self._blocks(steering, "")
                    continue
                reason, error = _STOP_REASONS.get(response.stop_reason, ("completed", None))
                if response.stop_reason == "cancelled" and self.prompt.rejection is not None:
                    reason, error = "rejected", None  # it stopped where a person said no
                elif response.stop_reason == "cancelled" and self.prompt.unanswered:
                    error = UNANSWERED  # it stopped where the bot said cancelled
                break
        except ProviderError as exc:
            reason, error = "error", str(exc)
            if not self.conn.alive:
                await self.conn.close()  # its group too; the next message starts it again
        except asyncio.CancelledError:
            await self._abandon()
            raise
        finally:
            unsubscribe()
        if error is not None:  # one notice in the thread; the completion says it failed
            host.emit(AgentErrorEvent(host.session_key, turn_id, error, external=True))

        # -- close the turn durably before any follow-up may start
        rounds = self.prompt.round
        rejected = self.prompt.rejection if reason == "rejected" else None
        by_user_id, by_name, option = (
            (rejected.by_user_id, rejected.by_name, rejected.option) if rejected else (None,) * 3
        )
        await host.append(
            TurnEndedPayload(
                turn_id=turn_id,
                reason=reason,
                steps=rounds,
                error=error,
                by_user_id=by_user_id,
                by_name=by_name,
                option=option,
            )
        )
        host.emit(
            TurnEnded(
                host.session_key,
                turn_id,
                reason,
                rounds,
                by_user_id=by_user_id,
                by_name=by_name,
                option=option,
            )
        )

    # -- opening ----------------------------------------------------------------

    async def _opened(self, opened: Opened, earlier: str) -> str:
        """Record the agent's session; the earlier conversation it lacks, if any."""
        host = self.host
        stored = stored_session(host.tree, self.conn.name)
        if stored is None or stored.get("session_id") != opened.session_id:
            await host.append(
                AcpSessionPayload(
                    agent=self.conn.name, session_id=opened.session_id, can_load=opened.can_load
                )
            )
        self.images = opened.images
        if opened.loaded:
            return ""
        if stored is not None:
            why = (
                "it cannot load earlier sessions"
                if not stored.get("can_load")
                else "it could not load its earlier session"
            )
            host.emit(
                AgentNotice(
                    host.session_key,
                    f"🔌 **{self.name}** started again without its earlier session ({why}); "
                    "it was given the conversation so far in this thread.",
                )
            )
        return earlier

    def _blocks(self, events: Sequence[SessionEvent], context: str) -> list[Any]:
        """The prompt: the earlier conversation as a note (if the agent lacks it), then
        each message: a note saying who wrote it or that it steers (when it must be
        said), and the person's own words as a block of their own."""
        named = self.host.tree.people > 1
        blocks: list[Any] = []
        if context:
            blocks.append(_note(context, "context"))
        for event in events:
            said = event.data_as(UserMessagePayload)
            if said is None:
                continue
            label = _label(said, event.delivery_mode, named=named)
            if label is not None:
                blocks.append(_note(*label))
            text, images = user_words(said, load_image=self.load_image)
            blocks.append(text_block(text))
            for image in images:
                if self.images:
                    blocks.append(image_block(image.data_base64, image.mime))
        if not blocks:
            blocks.append(text_block(""))
        return blocks

    # -- one prompt -------------------------------------------------------------

    async def _prompt(self, blocks: list[Any]) -> PromptResponse:
        self.prompt = _Prompt(round=self.prompt.round + 1)
        sent = sum(len(getattr(b, "text", "") or "") for b in blocks)
        response: PromptResponse | None = None
        cut = False
        try:
            response = await self.conn.prompt(blocks, self)
        except asyncio.CancelledError:
            cut = True  # the turn is cancelled: its open requests are the cancel's to end
            raise
        finally:
            # What it said and did is kept, whether it answered, failed or was cancelled.
            if not cut:
                await self._withdraw()
            await self._record(sent, response)
        return response

    async def _record(self, sent: int, response: PromptResponse | None) -> None:
        """The prompt's words, tool calls and usage, in the log (also when it failed).

        Calls it left unfinished are recorded ``cancelled``; when the prompt was cut
        (a cancel, a steer, a reject, a crash) their lines are the turn's ending's to
        close (``⏹️ cancelled by @alice``), not an error of theirs."""
        prompt, host = self.prompt, self.host
        usage = response.usage if response is not None else None
        cut = response is None or response.stop_reason == "cancelled"
        text = "".join(prompt.parts)
        for state in prompt.calls.values():
            if not state.done:
                self._finish(state, "cancelled", is_error=True, shown=not cut)
        items = list(prompt.records)
        items.append(
            as_item(
                AssistantMessagePayload(
                    turn_id=self.turn_id, text=text, tool_calls=[], finish_reason="stop"
                )
            )
        )
        counted = self._usage(usage, sent, text)
        items.append(
            as_item(
                usage_payload(
                    self.turn_id,
                    counted[0],
                    host.model_info,
                    model=self.conn.name,
                    estimated=counted[1],
                )
            )
        )
        await host.append_many(items)

    def _usage(self, reported: AcpUsage | None, sent: int, text: str) -> tuple[Usage, bool]:
        """The prompt's tokens as the agent reported them (estimated when it reported
        none), and its cost: what the agent's running total grew by."""
        cost = None
        if self.prompt.cost_usd is not None:
            cost = max(0.0, self.prompt.cost_usd - (self.conn.reported_cost or 0.0))
            self.conn.reported_cost = self.prompt.cost_usd
        if reported is not None and (reported.input_tokens or reported.output_tokens):
            return (
                Usage(
                    prompt_tokens=reported.input_tokens,
                    completion_tokens=reported.output_tokens + (reported.thought_tokens or 0),
                    cached_tokens=reported.cached_read_tokens or 0,
                    cost_usd=cost,
                ),
                False,
            )
        estimate = Usage(
            prompt_tokens=(sent + 3) // 4, completion_tokens=estimate_text(text), cost_usd=cost
        )
        return estimate, True

    # -- what the agent sends during a prompt (the connection's Listener) --------

    def update(self, update: Any) -> None:
        """One ``session/update``: shown at once, in order; recorded when the prompt ends."""
        host, prompt = self.host, self.prompt
        if isinstance(update, AgentMessageChunk):
            if isinstance(update.content, TextContentBlock) and update.content.text:
                prompt.parts.append(update.content.text)
                host.emit(
                    TextDelta(host.session_key, self.turn_id, prompt.round, update.content.text)
                )
        elif isinstance(update, ToolCallStart):
            self._call(update.tool_call_id, update.title, update.kind)
            self._progress(update)
        elif isinstance(update, ToolCallProgress):
            self._call(update.tool_call_id, update.title or "", update.kind)
            self._progress(update)
        elif isinstance(update, AgentPlanUpdate):
            entries = tuple((e.content, e.status) for e in update.entries)
            host.emit(PlanShown(host.session_key, self.turn_id, entries))
        elif (
            isinstance(update, UsageUpdate)
            and update.cost is not None
            and update.cost.currency.upper() == "USD"
        ):
            prompt.cost_usd = update.cost.amount  # the session's total so far
        # thoughts, replays of the user's words, commands and modes: not shown

    async def permission(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        """The agent asks before a call: buttons with its options; the choice, exactly."""
        state = self._call(tool_call.tool_call_id, tool_call.title or "", tool_call.kind)
        if tool_call.title and tool_call.title != state.call.name:
            state.call = state.call.model_copy(update={"arguments": tool_call.title})
        offered = tuple(
            ApprovalOption(option_id=o.option_id, label=o.name, kind=o.kind) for o in options
        )
        waiter = asyncio.ensure_future(
            self.host.request_approval(self.turn_id, self.prompt.round, state.call, offered)
        )
        self.waiters[state.call.id] = waiter
        try:
            record = await waiter
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return cancelled()  # the turn was cancelled, or the bot is stopping
        finally:
            self.waiters.pop(state.call.id, None)
        chosen = next((o for o in options if o.option_id == record.option_id), None)
        if chosen is None:
            self.prompt.unanswered = record.decision == "timeout"
            return cancelled()  # no answer in time, or withdrawn
        if chosen.kind in ("reject_once", "reject_always"):
            self.prompt.rejection = _Rejection(
                state.call.id, record.by_user_id, record.by_name, chosen.name
            )
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=chosen.option_id, outcome="selected")
        )

    # -- tool calls ---------------------------------------------------------------

    def _call(self, acp_id: str, title: str, kind: str | None) -> _Call:
        prompt = self.prompt
        state = prompt.calls.get(acp_id)
        if state is None:
            own_id = f"acp_{self.turn_id[:8]}_{prompt.round}_{len(prompt.calls)}"
            call = ToolCall(id=own_id, name=title or acp_id, arguments="")
            state = prompt.calls[acp_id] = _Call(call, kind)
            self.host.emit(ToolStarted(self.host.session_key, self.turn_id, state.call))
        elif title and title != state.call.name and title != state.call.arguments:
            # The agent names the call better as it goes ("bash", then the command).
            state.call = state.call.model_copy(update={"arguments": title})
        if kind and state.kind is None:
            state.kind = kind
        return state

    def _progress(self, update: ToolCallStart | ToolCallProgress) -> None:
        state = self.prompt.calls[update.tool_call_id]
        for item in update.content or ():
            if isinstance(item, ContentToolCallContent) and isinstance(
                item.content, TextContentBlock
            ):
                state.output = item.content.text
            elif isinstance(item, FileEditToolCallContent):
                state.output = self._diff(item)
        if update.raw_output is not None:
            state.raw_output = update.raw_output
        if update.status in ("completed", "failed") and not state.done:
            self._finish(state, update.status, is_error=update.status == "failed")

    def _finish(self, state: _Call, status: str, *, is_error: bool, shown: bool = True) -> None:
        """The call's end, recorded; ``shown``: also told to the thread (a call a cut
        prompt left unfinished is closed by the turn's ending instead). A call a person
        rejected is reported denied, not as the agent's error."""
        state.done = True
        host = self.host
        if state.raw_output is not None:
            text, failed = _raw_result(state.raw_output)
            if not state.output.strip():
                state.output = text
            if failed:
                status, is_error = "failed", True
        content = state.output or ("failed" if is_error else "done")
        rejection = self.prompt.rejection
        denied = rejection is not None and rejection.call_id == state.call.id
        if shown:
            host.emit(
                ToolFinished(
                    host.session_key, self.turn_id, state.call, content, is_error, denied=denied
                )
            )
        acp_id = next(k for k, v in self.prompt.calls.items() if v is state)
        self.prompt.records.append(
            as_item(
                AcpToolCallPayload(
                    turn_id=self.turn_id,
                    tool_call_id=acp_id,
                    title=_title(state.call),
                    kind=state.kind,
                    status=status,
                    output=state.output[:OUTPUT_LIMIT],
                )
            )
        )

    def _diff(self, edit: FileEditToolCallContent) -> str:
        """A file edit: a short diff stays in the tool line, a long one goes as a file."""
        name = PurePath(edit.path).name or "file"
        lines = list(
            difflib.unified_diff(
                (edit.old_text or "").splitlines(keepends=True),
                edit.new_text.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )
        added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
        removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
        summary = f"{edit.path}: +{added} -{removed}"
        if len(lines) > DIFF_INLINE_LINES:
            data = "".join(x if x.endswith("\n") else x + "\n" for x in lines).encode()
            host = self.host
            host.emit(
                FileShown(host.session_key, self.turn_id, f"{name}.diff", data, f"📝 {summary}")
            )
        return summary

    # -- steering and ending ------------------------------------------------------

    def _on_event(self, event: AgentEvent) -> None:
        """A steer cannot join a running prompt: the prompt is cancelled, and the steer
        sent as the next one once the agent has answered ``cancelled``."""
        if isinstance(event, MessageQueued) and event.mode == "steer":
            task = asyncio.ensure_future(self.conn.cancel())
            _background.add(task)
            task.add_done_callback(_background.discard)

    async def _withdraw(self) -> None:
        """The prompt ended with a request still open (the agent stopped, or answered
        without waiting): withdrawn, so its buttons say so and the agent gets ``cancelled``."""
        for call_id in list(self.waiters):
            await self.host.decide(call_id, "withdrawn", reason="ended")

    async def _abandon(self) -> None:
        """The turn is cancelled (``/cancel``, a stop): the agent is told, its open
        requests answered ``cancelled``; :meth:`Agent.cancel` records their withdrawal,
        naming who cancelled."""
        for waiter in list(self.waiters.values()):
            waiter.cancel()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CANCEL_WAIT_SECONDS):
                await asyncio.shield(self.conn.cancel())


_background: set[asyncio.Future[Any]] = set()
"""Cancellations on their way to an agent (a task nobody holds may be collected)."""


RAW_JSON_LIMIT: Final = 500
"""Characters of a ``rawOutput`` of no known shape shown as JSON."""
_RAW_TEXT_FIELDS: Final = ("formatted_output", "aggregated_output", "stdout")


def _raw_result(raw: Any) -> tuple[str, bool]:
    """What a tool call's ``rawOutput`` says it returned, and whether it failed.

    Codex's adapter reports a command only there, as the command's end event
    (``stdout``, ``aggregated_output``, ``formatted_output``, ``exit_code``): the
    longest of those three texts is the most complete (the formatted one may be
    cut for the model; stdout lacks stderr), and a non-zero exit code fails the
    call. Any other shape is shown as short JSON, never as nothing.
    """
    if isinstance(raw, str):
        return raw, False
    if isinstance(raw, dict) and any(k in raw for k in (*_RAW_TEXT_FIELDS, "exit_code")):
        texts = [raw[k] for k in _RAW_TEXT_FIELDS if isinstance(raw.get(k), str)]
        text = max((t for t in texts if t.strip()), key=len, default="")
        code = raw.get("exit_code")
        failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
        if failed and not text:
            text = f"exit code {code}"
        return text, failed
    rendered = json.dumps(raw, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(rendered) > RAW_JSON_LIMIT:
        rendered = rendered[: RAW_JSON_LIMIT - 1] + "…"
    return rendered, False


NOTE_AUDIENCE: Final = ("assistant",)
"""Who a note is for: the agent alone (MCP's annotation, which ACP content blocks carry)."""


def _note(text: str, kind: str) -> TextContentBlock:
    """Words the bot adds for the agent, apart from what a person wrote: addressed to the
    assistant alone, and named in ``_meta`` (``context``, ``steering``, ``author``)."""
    return TextContentBlock(
        type="text",
        text=text,
        annotations=Annotations(audience=list(NOTE_AUDIENCE)),
        field_meta={"threadbound": {"note": kind}},
    )


def _label(
    said: UserMessagePayload, delivered: DeliveryMode | None, *, named: bool
) -> tuple[str, str] | None:
    """The note before a message, and its kind: that it steers (and who sent it), or
    who wrote it in a thread where several people write; None when nothing needs saying."""
    author = said.author_name if named else None
    if delivered == "steer":
        if steering_source(said.author_id) == "system":
            return (
                "(threadbound, the chat bridge: the next block was sent by the bot itself, "
                "not by a person, while you were working; your previous prompt was stopped "
                "for it. Take it into account and carry on.)",
                "steering",
            )
        who = f"{author} wrote" if author else "was written"
        return (
            "(threadbound, the chat bridge: the next block is a steering message that "
            f"{who} in the thread while you were working; your previous prompt was "
            "stopped for it. Take it into account and carry on.)",
            "steering",
        )
    if author:
        return f"(threadbound, the chat bridge: the next block is {author}'s message.)", "author"
    return None


def _title(call: ToolCall) -> str:
    return f"{call.name}: {call.arguments}" if call.arguments else call.name


def _conversation(tree: SessionTree) -> str:
    """The thread's conversation so far as plain text, its latest part if it is long."""
    summary, events = readable(tree)
    lines: list[str] = []
    if summary:
        lines.append(f"(summary of the earlier conversation) {summary}")
    for event in events:
        match event.data:
            case UserMessagePayload(author_name=author, text=text):
                lines.append(f"{author or 'user'}: {text}")
            case AssistantMessagePayload(text=text) if text:
                lines.append(f"assistant: {text}")
    if not lines:
        return ""
    text = "\n\n".join(lines)
    if len(text) > HISTORY_LIMIT:
        text = "…" + text[-HISTORY_LIMIT:]
    return (
        "The conversation so far in this thread, which you are taking over "
        f"(for context; answer the message after it):\n\n{text}"
    )
