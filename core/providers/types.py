"""The provider port: chat messages in, a stream of events out.

Everything the agent loop knows about a model is in this module. Messages are
the provider-neutral form the loop derives from the session tree (one conversion
boundary, as in Pi's ``convertToLlm``); each provider translates them to its wire
format. A stream is a closed set of three events, so a consumer's ``match`` is
exhaustive: text pieces as they arrive, each tool call once its arguments are
complete, and a final ``StreamDone``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = [
    "ChatMessage",
    "ImagePart",
    "Provider",
    "ProviderEvent",
    "StreamDone",
    "TextDelta",
    "ToolCall",
    "ToolCallReady",
    "ToolSpec",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]


class _Value(BaseModel):
    """Frozen and strict about unknown fields: these values are compared and logged."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Value):
    """One tool call the model asked for.

    ``arguments`` is the raw JSON text exactly as the model produced it. It may be
    invalid JSON; parsing it is the loop's job, so it can report the problem back to
    the model as a tool result instead of failing the turn.
    """

    id: str
    name: str
    arguments: str


class ImagePart(_Value):
    """A picture in a user message: its MIME type and its bytes, base64-encoded."""

    mime: str
    data_base64: str


class ChatMessage(_Value):
    """A provider-neutral chat message.

    ``tool_calls`` only on assistant messages; ``tool_call_id`` (and ``name``, the
    tool's name) only on tool results. Checked here, because a malformed history is
    otherwise only discovered as an HTTP 400 from a real provider.
    """

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    images: tuple[ImagePart, ...] = ()
    """Pictures (user messages only), for models that read images."""

    @model_validator(mode="after")
    def _fields_fit_role(self) -> ChatMessage:
        if self.images and self.role != "user":
            raise ValueError(f"only user messages carry images, not {self.role!r} ones")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role!r} ones")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError(f"only tool messages carry a tool_call_id, not {self.role!r} ones")
        return self


class ToolSpec(_Value):
    """A tool offered to the model; ``parameters`` is the JSON schema of its arguments object."""

    name: str
    description: str
    parameters: dict[str, Any]


class Usage(_Value):
    """Tokens (and, when the provider reports it, cost) of one model call.

    ``cached_tokens`` is the part of the prompt the provider served from its cache
    (OpenAI's ``prompt_tokens_details.cached_tokens``), already counted in ``prompt_tokens``.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None


class TextDelta(_Value):
    """A piece of the answer's text, in order."""

    type: Literal["text"] = "text"
    text: str


class ToolCallReady(_Value):
    """A tool call whose arguments are complete; emitted once per call."""

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class StreamDone(_Value):
    """The last event of every successful stream.

    ``finish_reason`` is the provider's (``"stop"``, ``"tool_calls"``, ``"length"``...),
    ``None`` when it sent none; ``usage`` is ``None`` when the provider reported none.
    """

    type: Literal["done"] = "done"
    finish_reason: str | None = None
    usage: Usage | None = None


ProviderEvent = TextDelta | ToolCallReady | StreamDone


class Provider(Protocol):
    """A model endpoint the agent loop can call.

    ``stream`` is an async generator: nothing happens until the consumer iterates it.
    A successful stream ends with exactly one ``StreamDone``; a failed one raises a
    ``ProviderError``. Cancelling the consuming task or calling ``aclose()`` on the
    generator releases the underlying connection promptly; a consumer that may stop
    early iterates inside ``contextlib.aclosing`` so that happens at once, not when
    the generator is garbage-collected.
    """

    @property
    def name(self) -> str:
        """The provider's configured name, for logs and error messages."""
        ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Ask the model to continue ``messages``; ``model`` overrides the configured one."""
        ...
