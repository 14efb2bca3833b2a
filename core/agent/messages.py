"""The one conversion from the session tree to provider messages.

Only the active path (root to head) becomes context; side branches never
reach the model. Steering is rendered as a tagged user message so the model
can tell "the user interrupted you" from an ordinary prompt; follow-ups are
plain user messages. Every assistant tool call is answered by exactly one
tool message: a call left without a result (a crash mid-tool) gets a
synthetic one here, because providers reject a history with a dangling call.
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Callable, Sequence
from html import escape

from core.agent.usage import estimate_message, estimate_prompt
from core.attachments import AttachmentRecord
from core.providers.types import ChatMessage, ImagePart, ToolCall
from core.sessions.events import SessionEvent
from core.sessions.payloads import (
    AssistantMessagePayload,
    CompactionPayload,
    ToolResultPayload,
    UserMessagePayload,
)
from core.sessions.tree import SessionTree

__all__ = [
    "INTERRUPTED_RESULT",
    "SKIPPED_RESULT",
    "SYSTEM_AUTHOR_PREFIX",
    "MessageDeriver",
    "derive_messages",
    "is_conversation",
    "readable",
    "render_steering",
    "steering_source",
    "summary_message",
    "to_message",
    "unanswered_results",
    "user_words",
]

ImageLoader = Callable[[str], bytes]
"""Reads a stored image copy by its name (:meth:`core.attachments.AttachmentStore.load`)."""

SKIPPED_RESULT = "skipped: superseded by a steering message from the user"
INTERRUPTED_RESULT = "not run: the turn was interrupted before this tool call finished"


def render_steering(text: str, source: str = "user") -> str:
    """A steering message as the model sees it."""
    return f'<steering source="{escape(source, quote=True)}">{text}</steering>'


SYSTEM_AUTHOR_PREFIX = "system:"
"""Author ids of messages the bot itself sends an agent (``system:subagents``)."""


def steering_source(author_id: str | None) -> str:
    """``system`` for the bot's own steering (a child's result), else ``user``."""
    return "system" if (author_id or "").startswith(SYSTEM_AUTHOR_PREFIX) else "user"


_CONVERSATION_TYPES = frozenset({"user_message", "assistant_message", "tool_result"})
_Conversation = UserMessagePayload | AssistantMessagePayload | ToolResultPayload
"""What a conversation event's data is: :func:`to_message` reads each of them."""


def derive_messages(tree: SessionTree, *, system_prompt: str | None = None) -> list[ChatMessage]:
    """Provider messages for the active path, tool calls and results paired."""
    return MessageDeriver().derive(tree, system_prompt=system_prompt)


def summary_message(summary: str) -> ChatMessage:
    """How a compaction's summary reaches the model: in place of what it summarises."""
    return ChatMessage(
        role="user",
        content=(
            "<conversation_summary>\n"
            f"{summary}\n"
            "</conversation_summary>\n"
            "(The earlier part of this conversation, summarised; it is no longer shown.)"
        ),
    )


class MessageDeriver:
    """Derives messages incrementally: each model step converts only the new events.

    It remembers the head it last derived for. When the head has only moved
    forward (the usual case inside a turn), it walks back from the new head to
    the old one and converts just those events; when the head moved anywhere
    else (continue_from, another branch), or a compaction was added, it starts
    over from the path. A compaction on the path stands for everything before
    its ``first_kept_node_id`` (see :mod:`core.agent.compaction`). Without this a
    long turn rebuilt its whole history at every step.

    It keeps the prompt's token estimate the same way, message by message
    (:meth:`estimate`): the loop asks for it twice a step, and walking the whole
    history for it made a long tool loop quadratic.
    """

    def __init__(self, *, load_image: ImageLoader | None = None) -> None:
        self._load_image = load_image
        self._head: str | None = None
        self._messages: list[ChatMessage] = []
        self._tokens = 0
        """:func:`estimate_message` summed over ``_messages``."""
        self._open_calls: list[ToolCall] = []
        self._named = False
        self._derived: list[ChatMessage] | None = None
        self._derived_tokens = 0

    def derive(self, tree: SessionTree, *, system_prompt: str | None = None) -> list[ChatMessage]:
        new = self._new_events(tree)
        named = tree.people > 1  # a second person wrote: every message says who it is from
        if (
            new is None
            or named != self._named
            or any(e.data_as(CompactionPayload) is not None for e in new)
        ):
            self._named = named
            self._rebuild(tree)
        else:
            for event in new:
                self._add(event)
        self._head = tree.head_id
        prefix = [ChatMessage(role="system", content=system_prompt)] if system_prompt else []
        tail = _unanswered(self._open_calls)
        derived = [*prefix, *self._messages, *tail]
        self._derived = derived
        self._derived_tokens = self._tokens + sum(estimate_message(m) for m in (*prefix, *tail))
        return derived

    def estimate(self, messages: Sequence[ChatMessage]) -> int:
        """``estimate_prompt(messages)`` (without tools), from the running total when
        ``messages`` is the list :meth:`derive` returned last; any other list is walked."""
        if messages is self._derived:
            return self._derived_tokens
        return estimate_prompt(messages)

    def _new_events(self, tree: SessionTree) -> list[SessionEvent] | None:
        """Events from just after the remembered head to the current head, oldest first;
        None when the old head is not an ancestor (start over)."""
        newer: list[SessionEvent] = []
        node_id = tree.head_id
        while node_id is not None and node_id != self._head:
            event = tree.get(node_id)
            newer.append(event)
            node_id = event.parent_id
        if node_id != self._head:
            return None
        newer.reverse()
        return newer

    def _rebuild(self, tree: SessionTree) -> None:
        """The whole path again, the latest compaction standing for what it summarised."""
        summary, events = readable(tree)
        self._messages = [summary_message(summary)] if summary is not None else []
        self._tokens = sum(estimate_message(m) for m in self._messages)
        self._open_calls = []
        for event in events:
            self._add(event)

    def _add(self, event: SessionEvent) -> None:
        if event.type not in _CONVERSATION_TYPES:
            return
        data = event.data
        if not isinstance(data, _Conversation):  # see is_conversation
            return
        if not isinstance(data, ToolResultPayload) and self._open_calls:
            for unanswered in _unanswered(self._open_calls):
                self._messages.append(unanswered)
                self._tokens += estimate_message(unanswered)
            self._open_calls = []
        message = to_message(event, named=self._named, load_image=self._load_image)
        self._messages.append(message)
        self._tokens += estimate_message(message)
        if isinstance(data, AssistantMessagePayload):
            self._open_calls = list(message.tool_calls)
        elif self._open_calls and isinstance(data, ToolResultPayload):
            self._open_calls = [c for c in self._open_calls if c.id != data.tool_call_id]


def readable(tree: SessionTree) -> tuple[str | None, list[SessionEvent]]:
    """What the model reads of the active path: the latest compaction's summary (None if
    there is none) and the events after what it summarised, the compaction left out."""
    path = tree.path()
    # Every node on the path is a conversation node, parsed for the context anyway.
    marks = [(i, c) for i, e in enumerate(path) if isinstance(c := e.data, CompactionPayload)]
    if not marks:
        return None, path
    last, compaction = marks[-1]
    kept_from = compaction.first_kept_node_id
    ids = [e.node_id for e in path[:last]]
    start = ids.index(kept_from) if kept_from in ids else last + 1
    return compaction.summary, path[start:last] + path[last + 1 :]


def is_conversation(event: SessionEvent) -> bool:
    """A user message, an assistant message or a tool result that a model can read: what
    :func:`to_message` converts. One whose payload no longer reads (an old row that no
    longer fits its model) is left out of the context rather than failing every turn."""
    return event.type in _CONVERSATION_TYPES and isinstance(event.data, _Conversation)


def to_message(
    event: SessionEvent, *, named: bool = False, load_image: ImageLoader | None = None
) -> ChatMessage:
    """One conversation event as the provider reads it; ``named``: a user message starts
    with its author's display name (a thread where several people write). Attached
    text files follow the text; images become image parts (``load_image`` reads the
    stored copies; without it, or when a copy is gone, the model is told so).

    Raises:
        TypeError: ``event`` is not a conversation event (see :func:`is_conversation`).
    """
    match event.data:
        case UserMessagePayload() as said:
            text = f"{said.author_name}: {said.text}" if named and said.author_name else said.text
            text, images = _with_attachments(text, said.attachments, load_image)
            if images:
                return ChatMessage(role="user", content=text, images=images)
            if event.delivery_mode == "steer":
                text = render_steering(text, steering_source(said.author_id))
            return ChatMessage(role="user", content=text)
        case AssistantMessagePayload(text=text, tool_calls=tool_calls):
            calls = tuple(ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in tool_calls)
            return ChatMessage(role="assistant", content=text or None, tool_calls=calls)
        case ToolResultPayload() as result:
            return ChatMessage(
                role="tool",
                tool_call_id=result.tool_call_id,
                name=result.name,
                content=result.content,
            )
    raise TypeError(f"a {event.type} event (seq {event.seq}) is no message a model reads")


def user_words(
    message: UserMessagePayload, *, load_image: ImageLoader | None = None
) -> tuple[str, tuple[ImagePart, ...]]:
    """What a person wrote, as they wrote it: the text with its attached text files after
    it, and its images; no author name, no steering label. An external agent gets those
    apart from the words (:mod:`core.acp.turns`), so it never takes them for the task."""
    return _with_attachments(message.text, message.attachments, load_image)


def _with_attachments(
    text: str, attachments: Sequence[AttachmentRecord], load_image: ImageLoader | None
) -> tuple[str, tuple[ImagePart, ...]]:
    parts = [text] if text else []
    images: list[ImagePart] = []
    for item in attachments:
        name = escape(item.name, quote=True)
        if item.kind == "text":
            parts.append(f'<attachment name="{name}">\n{item.text or ""}\n</attachment>')
            continue
        try:
            data = load_image(str(item.stored)) if load_image is not None else None
        except (OSError, ValueError, KeyError):
            data = None
        if data is None:
            parts.append(f'<attachment name="{name}">[image no longer available]</attachment>')
        else:
            parts.append(f'<attachment name="{name}">[image {len(images) + 1}]</attachment>')
            images.append(ImagePart(mime=item.mime, data_base64=b64encode(data).decode()))
    return "\n\n".join(parts), tuple(images)


def _unanswered(calls: Sequence[ToolCall]) -> list[ChatMessage]:
    return [
        ChatMessage(role="tool", tool_call_id=c.id, name=c.name, content=INTERRUPTED_RESULT)
        for c in calls
    ]


def unanswered_results(
    tree: SessionTree, content: str, turn_id: str | None = None
) -> list[ToolResultPayload]:
    """``tool_result`` payloads for the head's tool calls that never got a result.

    Used to close a turn that was cancelled or cut short by a crash, so the
    stored history (not just the derived one) stays valid for the provider.
    """
    path = tree.path()
    answered = {r.tool_call_id for e in path if (r := e.data_as(ToolResultPayload)) is not None}
    for event in reversed(path):
        match event.data:
            case AssistantMessagePayload() as reply:
                return [
                    ToolResultPayload(
                        turn_id=turn_id or reply.turn_id,
                        tool_call_id=call.id,
                        name=call.name,
                        content=content,
                        skipped=True,
                    )
                    for call in reply.tool_calls
                    if call.id not in answered
                ]
            case UserMessagePayload():
                break
    return []
