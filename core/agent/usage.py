"""Tokens and cost of a model call, counted by the provider or estimated by the bot.

Most servers report usage at the end of a streamed answer (the OpenAI-compatible
client asks for it with ``stream_options.include_usage``). Some do not, or leave
a count at zero for an answer that plainly had words (a server that counts only
the prompt; the playground's demo model, which has no tokenizer); then the bot
estimates that count, and says so (``estimated`` on the ``usage`` event, ``≈``
in ``/usage``): **one token per four characters** of every message's text and
tool-call arguments, plus four tokens per message for its role and framing, plus
the tools' JSON schemas the same way. That is the usual rule of thumb for English text and code with
GPT-style tokenizers; it errs a little high on prose, which is the safe side
for deciding when to compact.

How full the context window is now (:func:`context_size`) is the prompt of the
latest model call of a turn, unless a compaction on the active path came after
it: then it is what the compaction left, by the compaction's own estimate (the
"before → after" figure ``/compact`` and the thread's notice report), until the
next call counts it.

The cost is the provider's, when it reports one (OpenRouter does); otherwise
it comes from ``[providers.<name>] input_usd_per_mtok`` and
``output_usd_per_mtok``, and is zero while those are unset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from core.config import DEFAULT_CONTEXT_WINDOW, ProviderConfig
from core.providers.types import ChatMessage, ToolSpec, Usage
from core.sessions.payloads import CompactionPayload, UsagePayload
from core.sessions.snapshot import UsageTotals
from core.sessions.tree import SessionTree

__all__ = [
    "CHARS_PER_TOKEN",
    "ContextSize",
    "ModelInfo",
    "context_size",
    "counted",
    "estimate_message",
    "estimate_prompt",
    "estimate_text",
    "estimate_tools",
    "priced",
    "usage_payload",
    "usage_text",
]

CHARS_PER_TOKEN: Final = 4
MESSAGE_OVERHEAD: Final = 4


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the bot knows about the model a session runs: its window and prices."""

    context_window: int = DEFAULT_CONTEXT_WINDOW
    input_usd_per_mtok: float = 0.0
    output_usd_per_mtok: float = 0.0
    vision: bool = False

    @classmethod
    def of(cls, config: ProviderConfig) -> ModelInfo:
        return cls(
            context_window=config.context_window,
            input_usd_per_mtok=config.input_usd_per_mtok,
            output_usd_per_mtok=config.output_usd_per_mtok,
            vision=config.vision,
        )


@dataclass(frozen=True, slots=True)
class ContextSize:
    """How many tokens the model reads at the next call, and how that is known."""

    tokens: int
    compacted: bool = False
    """The figure is a compaction's estimate: no model call has counted it since."""


def context_size(tree: SessionTree) -> ContextSize:
    """The context's size now: see the module doc. A compaction off the active path (the
    session was rewound to before it) does not count: the model reads everything again."""
    path: set[str] | None = None
    for event in reversed(tree.events):
        usage = event.data_as(UsagePayload)
        if usage is not None and usage.purpose == "turn":
            return ContextSize(usage.prompt_tokens)
        compaction = event.data_as(CompactionPayload)
        if compaction is not None:
            if path is None:
                path = {e.node_id for e in tree.path()}
            if event.node_id in path:
                return ContextSize(compaction.tokens_after, compacted=True)
    return ContextSize(0)


def estimate_text(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_message(message: ChatMessage) -> int:
    tokens = MESSAGE_OVERHEAD + estimate_text(message.content or "")
    for call in message.tool_calls or ():
        tokens += estimate_text(call.name) + estimate_text(call.arguments)
    return tokens


def estimate_tools(tools: Sequence[ToolSpec]) -> int:
    """The tokens the tools' names, descriptions and JSON schemas add to every call.

    Serialising the schemas is the costly part of an estimate, so callers that send
    the same tools at every step keep this figure
    (:meth:`core.agent.tools.ToolRegistry.spec_tokens`).
    """
    tokens = 0
    for tool in tools:
        schema = json.dumps(tool.parameters, separators=(",", ":"))
        tokens += estimate_text(tool.name) + estimate_text(tool.description) + estimate_text(schema)
    return tokens


def estimate_prompt(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> int:
    """The prompt tokens of a call with ``messages`` and ``tools`` (see the module doc).

    Walks every message: the agent loop uses the running figure its
    :class:`~core.agent.messages.MessageDeriver` keeps instead.
    """
    return sum(estimate_message(m) for m in messages) + estimate_tools(tools)


def counted(reported: Usage | None, *, prompt: int, answer: int) -> tuple[Usage, bool]:
    """One model call's usage: what the server reported, each count it left at zero while
    there was something to count replaced by the estimate (``prompt``, ``answer``); True
    when any count is an estimate."""
    if reported is None:
        return Usage(prompt_tokens=prompt, completion_tokens=answer), True
    missing: dict[str, int] = {}
    if reported.prompt_tokens == 0 and prompt:
        missing["prompt_tokens"] = prompt
    if reported.completion_tokens == 0 and answer:
        missing["completion_tokens"] = answer
    if not missing:
        return reported, False
    return reported.model_copy(update=missing), True


def priced(usage: Usage, info: ModelInfo) -> float | None:
    """The call's cost: the provider's, else from the configured prices, else None."""
    if usage.cost_usd is not None:
        return usage.cost_usd
    if not info.input_usd_per_mtok and not info.output_usd_per_mtok:
        return None
    return (
        usage.prompt_tokens * info.input_usd_per_mtok
        + usage.completion_tokens * info.output_usd_per_mtok
    ) / 1_000_000


def usage_payload(
    turn_id: str,
    usage: Usage,
    info: ModelInfo,
    *,
    model: str | None,
    estimated: bool,
    purpose: Literal["turn", "compaction"] = "turn",
) -> UsagePayload:
    """The ``usage`` event of one model call, priced."""
    return UsagePayload(
        turn_id=turn_id,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_usd=priced(usage, info),
        cached_tokens=usage.cached_tokens,
        estimated=estimated,
        model=model,
        purpose=purpose,
    )


def usage_text(
    usage: UsageTotals,
    *,
    model: str | None,
    context_window: int,
    external: str | None = None,
    context: ContextSize | None = None,
    prefix: str = "/",
) -> str:
    """Tokens in (cached) and out, cost, and how full the context is.

    Counts the bot estimated (the model server reported none) are marked ``≈``.
    ``external``: the external agent the session is, which keeps its own context.
    ``context``: the session's :func:`~core.agent.usage.context_size` (by default the
    last call's prompt); after a compaction it is the compaction's own figure, so
    ``/usage`` and ``/compact`` never disagree. ``prefix`` spells a command as the
    channel types it (``!`` on Matrix).
    """
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    approx = "≈" if usage.estimated else ""
    estimated = (
        " (≈: estimated by the bot at four characters a token, where the model server "
        "did not count)"
        if usage.estimated
        else ""
    )
    context = context or ContextSize(usage.last_prompt_tokens)
    share = context.tokens / context_window if context_window else 0.0
    tokens = (
        f"Tokens: {approx}{usage.prompt_tokens:,} in{cached} · "
        f"{approx}{usage.completion_tokens:,} out{estimated}"
    )
    if external is not None:
        return "\n".join(
            [
                f"**Usage of this session** · external agent `{external}`",
                tokens,
                f"Cost: ${usage.cost_usd:.4f}"
                if usage.cost_usd
                else "Cost: unknown (the agent reported none)",
                "Context: kept by the agent itself",
            ]
        )
    lines = [
        "**Usage of this session**" + (f" · model `{model}`" if model else ""),
        tokens,
        f"Cost: ${usage.cost_usd:.4f}" if usage.cost_usd else "Cost: unknown (no prices set)",
        f"Context: ≈{context.tokens:,} of {context_window:,} tokens ({share:.0%}) after the "
        f"compaction (the bot's estimate, as {prefix}compact reported it; the next model call "
        "counts it)"
        if context.compacted
        else f"Context: {context.tokens:,} of {context_window:,} tokens ({share:.0%}) "
        "at the last model call",
    ]
    return "\n".join(lines)
