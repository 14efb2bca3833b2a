"""Keeping a long session inside the model's context window: the compaction node.

Before a model call whose prompt would leave less than ``compaction_reserve_tokens``
of the window, the older part of the active path is summarised by the session's
own model into a ``compaction`` event. From then on the model reads the system
prompt, that summary, and the recent part word for word (about
``keep_recent_tokens``; :class:`~core.agent.messages.MessageDeriver` does the
reading). Nothing is rewritten: every event stays in the log, and
``continue_from`` a node before the compaction reads the full history again.

Where the cut may fall: before a user message that opened a turn (not a steer),
or before a model step whose previous node is not a steer. So a tool call is
never separated from its result (results come before the next step) and a steer
never from the step it steered. A provider that answers "context length
exceeded" gets one compaction and one retry (:func:`is_context_overflow`).

A compaction only ever makes the prompt smaller. When the part that may be cut
is too small for any summary to be shorter, the model is not asked; when the
summary it writes is no shorter than what it would replace, the summary is
thrown away (its tokens are still counted as spent). Either way the session
stays as it was and the caller gets a :class:`NotCompacted` saying why.

Token counts here are the estimate of :mod:`core.agent.usage`, also used for
the thread's notice ("12,345 → 2,345 tokens").
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from core.agent.events import Compacted
from core.agent.messages import is_conversation, readable, summary_message, to_message
from core.agent.usage import (
    ModelInfo,
    counted,
    estimate_message,
    estimate_prompt,
    estimate_text,
    usage_payload,
)
from core.errors import ProviderError
from core.providers.types import ChatMessage, Provider, StreamDone, TextDelta, Usage
from core.sessions.events import SessionEvent
from core.sessions.log import AppendItem, as_item
from core.sessions.payloads import (
    AssistantMessagePayload,
    CompactionPayload,
    UserMessagePayload,
)
from core.sessions.tree import SessionTree

__all__ = [
    "Compacted",
    "CompactionSettings",
    "NotCompacted",
    "compact",
    "is_context_overflow",
    "needs_compaction",
    "plan_cut",
]

Reason = Literal["threshold", "overflow", "command"]

SUMMARY_SYSTEM: Final = (
    "You compact a conversation between a user and an AI agent so the agent can go on "
    "without the full history. Write a faithful summary of everything below: the user's "
    "requests and decisions, facts, names, numbers and results found, files and tools "
    "used and what they returned, open questions and what the agent was doing last. "
    "Keep every fact that may matter later; drop chit-chat. Write plain text, no preamble."
)
MESSAGE_CHARS: Final = 2_000
"""Each message is quoted in the summarisation request up to this many characters."""
MIN_SUMMARISED: Final = 2
"""Fewer events than this are not worth a summary (it would be longer than they are)."""
REQUEST_OVERHEAD: Final = 256
"""Tokens kept free in a summarisation request besides the reserve (the instructions)."""

_OVERFLOW: Final = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long"
    r"|reduce the length|context_length_exceeded",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    reserve_tokens: int = 4096
    keep_recent_tokens: int = 8192


@dataclass(frozen=True, slots=True)
class NotCompacted:
    """Why a compaction left the session as it was.

    ``reason``: ``"too-little"`` (nothing may be cut, or what may be is smaller
    than any summary could be) or ``"not-smaller"`` (the model's summary came out
    no shorter than the conversation it would have replaced). ``tokens`` is the
    prompt as it stays; ``with_summary`` what it would have been with the summary.
    """

    reason: Literal["too-little", "not-smaller"]
    tokens: int
    with_summary: int | None = None


class CompactionHost(Protocol):
    """What a compaction needs from the agent."""

    session_key: str
    tree: SessionTree
    provider: Provider
    model: str | None
    system_prompt: str | None
    model_info: ModelInfo
    compaction: CompactionSettings

    async def append_many(self, items: Sequence[AppendItem]) -> list[SessionEvent]: ...


def is_context_overflow(exc: ProviderError) -> bool:
    """Whether the provider refused the prompt for being longer than the model's window."""
    return bool(_OVERFLOW.search(str(exc)))


def needs_compaction(prompt_tokens: int, info: ModelInfo, settings: CompactionSettings) -> bool:
    return prompt_tokens > info.context_window - settings.reserve_tokens


def _readable(tree: SessionTree) -> tuple[str | None, list[SessionEvent]]:
    """The previous summary and the conversation events the model reads after it."""
    summary, events = readable(tree)
    return summary, [e for e in events if is_conversation(e)]


def _may_cut_before(events: Sequence[SessionEvent], index: int) -> bool:
    event = events[index]
    previous = events[index - 1] if index > 0 else None
    after_steer = (
        previous is not None
        and isinstance(previous.data, UserMessagePayload)
        and previous.delivery_mode == "steer"
    )
    match event.data:
        case UserMessagePayload():
            return event.delivery_mode != "steer"
        case AssistantMessagePayload():
            return not after_steer
    return False


def plan_cut(events: Sequence[SessionEvent], keep_recent_tokens: int) -> int | None:
    """Index of the first event to keep: the earliest allowed cut whose recent part fits
    ``keep_recent_tokens``, else the latest allowed cut; None when nothing can be cut."""
    allowed = [i for i in range(MIN_SUMMARISED, len(events)) if _may_cut_before(events, i)]
    if not allowed:
        return None
    tail = [0] * (len(events) + 1)
    for i in range(len(events) - 1, -1, -1):
        tail[i] = tail[i + 1] + estimate_message(to_message(events[i]))
    fitting = [i for i in allowed if tail[i] <= keep_recent_tokens]
    return fitting[0] if fitting else allowed[-1]


def _quote(message: ChatMessage) -> str:
    text = message.content or ""
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS] + " …[cut]"
    if message.role == "tool":
        return f"[tool result of {message.name}] {text}"
    calls = "".join(f"\n[calls {c.name} with {c.arguments[:300]}]" for c in message.tool_calls)
    return f"[{message.role}] {text}{calls}"


def _chunks(older: Sequence[ChatMessage], budget_tokens: int) -> list[str]:
    """The older messages quoted, in pieces that each fit ``budget_tokens``."""
    chunks: list[str] = []
    lines: list[str] = []
    used = 0
    for message in older:
        line = _quote(message)
        cost = estimate_text(line) + 1
        if lines and used + cost > budget_tokens:
            chunks.append("\n".join(lines))
            lines, used = [], 0
        lines.append(line)
        used += cost
    if lines:
        chunks.append("\n".join(lines))
    return chunks


async def _summarise(
    host: CompactionHost, summary: str | None, chunk: str, instructions: str | None
) -> tuple[str, Usage, bool]:
    """One summarisation call: the summary so far and the next piece of conversation."""
    ask = f"Summary of what came before:\n{summary}\n\n" if summary else ""
    ask += "Conversation:\n" + chunk
    if instructions:
        ask += f"\n\nWhen summarising, follow these instructions: {instructions}"
    messages = [
        ChatMessage(role="system", content=SUMMARY_SYSTEM),
        ChatMessage(role="user", content=ask),
    ]
    parts: list[str] = []
    done = StreamDone()
    async with aclosing(host.provider.stream(messages, tools=(), model=host.model)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, StreamDone):
                done = event
    text = "".join(parts).strip()
    usage, estimated = counted(
        done.usage, prompt=estimate_prompt(messages), answer=estimate_text(text)
    )
    return text, usage, estimated


async def compact(
    host: CompactionHost,
    *,
    turn_id: str | None,
    reason: Reason,
    instructions: str | None = None,
) -> Compacted | NotCompacted:
    """Summarise the older part of the conversation, if that makes the prompt smaller.

    Raises:
        ProviderError: the model could not write the summary (nothing is recorded).
    """
    summary, events = _readable(host.tree)
    cut = plan_cut(events, host.compaction.keep_recent_tokens)
    system = [ChatMessage(role="system", content=host.system_prompt)] if host.system_prompt else []
    earlier = [summary_message(summary)] if summary else []
    named = host.tree.people > 1
    everything = [*system, *earlier, *(to_message(e, named=named) for e in events)]
    before = estimate_prompt(everything)
    if cut is None:
        return NotCompacted("too-little", before)
    older = [to_message(e, named=named) for e in events[:cut]]
    replaced = estimate_prompt([*earlier, *older])
    if replaced <= estimate_message(summary_message("")):  # no summary can be shorter
        return NotCompacted("too-little", before)
    # Each request must fit the window with its answer: the older part goes in pieces
    # when it is long, each folded into the summary so far.
    budget = host.model_info.context_window - host.compaction.reserve_tokens - REQUEST_OVERHEAD
    budget -= estimate_text(summary or "") + estimate_text(SUMMARY_SYSTEM)
    text, usage, estimated = summary or "", Usage(), False
    for chunk in _chunks(older, max(budget, 256)):
        text, used, guessed = await _summarise(host, text or None, chunk, instructions)
        if not text:
            raise ProviderError("the model returned an empty summary; nothing was compacted")
        usage = Usage(
            prompt_tokens=usage.prompt_tokens + used.prompt_tokens,
            completion_tokens=usage.completion_tokens + used.completion_tokens,
            cached_tokens=usage.cached_tokens + used.cached_tokens,
            cost_usd=None if used.cost_usd is None else (usage.cost_usd or 0) + used.cost_usd,
        )
        estimated = estimated or guessed
    kept = [*system, summary_message(text), *(to_message(e, named=named) for e in events[cut:])]
    after = estimate_prompt(kept)
    spent = as_item(
        usage_payload(
            turn_id or f"compact-{uuid.uuid4().hex}",
            usage,
            host.model_info,
            model=host.model,
            estimated=estimated,
            purpose="compaction",
        )
    )
    if after >= before:  # the summary would make it bigger: keep the history as it is
        await host.append_many([spent])
        return NotCompacted("not-smaller", before, after)
    mark = CompactionPayload(
        summary=text,
        first_kept_node_id=events[cut].node_id,
        tokens_before=before,
        tokens_after=after,
        reason=reason,
        instructions=instructions,
        model=host.model,
    )
    await host.append_many([as_item(mark), spent])
    return Compacted(host.session_key, turn_id, before, after, reason)
