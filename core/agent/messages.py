"""The one conversion from the session tree to provider messages.

Only the active path (root to head) becomes context; side branches never
reach the model. Steering is rendered as a tagged user message so the model
can tell "the user interrupted you" from an ordinary prompt; follow-ups are
plain user messages. Every assistant tool call is answered by exactly one
tool message: a call left without a result (a crash mid-tool) gets a
synthetic one here, because providers reject a history with a dangling call.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from core.providers.types import ChatMessage, ToolCall
from core.sessions.events import SessionEvent
from core.sessions.tree import SessionTree

__all__ = [
    "INTERRUPTED_RESULT",
    "SKIPPED_RESULT",
    "derive_messages",
    "render_steering",
    "unanswered_results",
]

SKIPPED_RESULT = "skipped: superseded by a steering message from the user"
INTERRUPTED_RESULT = "not run: the turn was interrupted before this tool call finished"


def render_steering(text: str, source: str = "user") -> str:
    """A steering message as the model sees it."""
    return f'<steering source="{escape(source, quote=True)}">{text}</steering>'


_CONVERSATION_TYPES = frozenset({"user_message", "assistant_message", "tool_result"})


def derive_messages(
    tree: SessionTree,
    *,
    system_prompt: str | None = None,
    cache: dict[str, ChatMessage] | None = None,
) -> list[ChatMessage]:
    """Provider messages for the active path, tool calls and results paired.

    Events never change, so ``cache`` (node id -> message) lets an agent convert
    each event once instead of once per model step: without it a long turn
    rebuilds its whole history at every step.
    """
    messages: list[ChatMessage] = []
    if system_prompt:
        messages.append(ChatMessage(role="system", content=system_prompt))
    cache = {} if cache is None else cache
    open_calls: list[ToolCall] = []
    for event in tree.path():
        if event.type not in _CONVERSATION_TYPES:
            continue
        if event.type != "tool_result" and open_calls:
            messages.extend(_unanswered(open_calls))
            open_calls = []
        message = cache.get(event.node_id)
        if message is None:
            message = cache[event.node_id] = _convert(event)
        messages.append(message)
        if event.type == "assistant_message":
            open_calls = list(message.tool_calls)
        elif event.type == "tool_result" and open_calls:
            open_calls = [c for c in open_calls if c.id != message.tool_call_id]
    messages.extend(_unanswered(open_calls))
    return messages


def _convert(event: SessionEvent) -> ChatMessage:
    payload = event.payload
    if event.type == "user_message":
        text = payload["text"]
        if event.delivery_mode == "steer":
            text = render_steering(text)
        return ChatMessage(role="user", content=text)
    if event.type == "assistant_message":
        calls = tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
            for c in payload.get("tool_calls", ())
        )
        return ChatMessage(role="assistant", content=payload.get("text") or None, tool_calls=calls)
    return ChatMessage(
        role="tool",
        tool_call_id=payload["tool_call_id"],
        name=payload["name"],
        content=payload["content"],
    )


def _unanswered(calls: Sequence[ToolCall]) -> list[ChatMessage]:
    return [
        ChatMessage(role="tool", tool_call_id=c.id, name=c.name, content=INTERRUPTED_RESULT)
        for c in calls
    ]


def unanswered_results(tree: SessionTree, content: str, turn_id: str | None = None) -> list[dict]:
    """``tool_result`` payloads for the head's tool calls that never got a result.

    Used to close a turn that was cancelled or cut short by a crash, so the
    stored history (not just the derived one) stays valid for the provider.
    """
    path = tree.path()
    answered = {e.payload["tool_call_id"] for e in path if e.type == "tool_result"}
    for event in reversed(path):
        if event.type == "assistant_message":
            return [
                {
                    "turn_id": turn_id or event.payload["turn_id"],
                    "tool_call_id": call["id"],
                    "name": call["name"],
                    "content": content,
                    "skipped": True,
                }
                for call in event.payload.get("tool_calls", ())
                if call["id"] not in answered
            ]
        if event.type == "user_message":
            break
    return []
