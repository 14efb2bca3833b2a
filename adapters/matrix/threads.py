"""Opening a Matrix thread for a binding: a root message in the room, the thread hung on it.

A Matrix thread is not a channel of its own but the ``m.thread`` relation on a root
event, so a new conversation is a message the bot posts in the room, naming who works
there and on what (``🧵 **Scout** — <task>``); the binding's conversation is then the
thread on that root (:func:`adapters.matrix.ids.thread_of`). The binding service calls
:meth:`MatrixThreads.create_conversation` when a bind names no conversation yet, and
records the binding only once it has returned.

The root is sent with a transaction id derived from the session it is for, so a send
retried after a dropped connection posts one root, not two.
"""

from __future__ import annotations

from typing import Any, Final

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import RoomID

from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from adapters.matrix.ids import CHANNEL, thread_of
from adapters.matrix.replies import txn_id
from core.bindings.records import BindingMetadata, ConversationRef
from core.errors import BindingError

__all__ = ["MatrixThreads", "root_text"]

TASK_LIMIT: Final = 4_000
"""Characters of the task shown at the root (the thread holds the rest of the work)."""


def root_text(name: str, task: str | None) -> str:
    """The root message of a session's thread: who works there, and on what."""
    head = f"🧵 **{name}**"
    if not task:
        return head
    shown = task if len(task) <= TASK_LIMIT else task[: TASK_LIMIT - 1] + "…"
    return f"{head} — {shown}"


class MatrixThreads:
    """Opens threads for one Matrix account (the binding service's channel adapter)."""

    channel = CHANNEL

    def __init__(self, account_id: str, client: Client) -> None:
        self.account_id = account_id
        self._client = client

    async def create_conversation(
        self,
        requested: ConversationRef,
        *,
        target_session_key: str,
        metadata: dict[str, Any],
    ) -> ConversationRef:
        """A new thread in the requester's room, on a root message naming the persona and
        the task. Spawning from inside a thread opens the new one in that thread's room:
        Matrix threads do not nest.

        Raises:
            BindingError: no room was named, or the homeserver refused the root message.
        """
        room_id = requested.parent_conversation_id
        if not room_id:
            raise BindingError("a Matrix thread needs a room; the request named none")
        meta = BindingMetadata.model_validate(metadata)
        text = root_text(meta.persona.shown_name, meta.task)
        try:
            root = await self._client.api.request(
                Method.PUT,
                Path.v3.rooms[RoomID(room_id)].send["m.room.message"][
                    txn_id("thread", target_session_key)
                ],
                {"msgtype": "m.text", "body": text},
            )
        except MATRIX_FAILURES as exc:
            raise BindingError(
                f"the thread's first message could not be posted in {room_id} "
                f"({matrix_said(exc)}); invite the bot to the room and let it write there"
            ) from exc
        return thread_of(self.account_id, room_id, str(root["event_id"]))
