"""People's messages in bound Matrix threads, into the core inbox; and what it shows them.

A bound conversation on Matrix is a thread in a room: the ``m.thread`` relation on
a root event, so its conversation id is the root's event id and its parent the
room (:mod:`adapters.matrix.ids`). Each sync batch is read in the order the
homeserver gave it, and a person's ``m.room.message`` in a bound thread is
recorded in the inbox (:mod:`core.inbox`), keyed by its event id, before anything
else happens to it; a ``!`` command, in a thread or not, goes to
:mod:`adapters.matrix.commands` instead.

Nothing lost, nothing twice:

- the sync position is saved (:meth:`MatrixInbox.handled`) only after every
  message of the batch before it is recorded, so a restart resumes before
  anything not recorded, and reads what was written while the bot was down;
- a batch whose room timeline is *limited* (more happened than one sync carries)
  has its gap read back with ``/messages`` down to the previous position first;
- an event already recorded is known by its id: a homeserver that hands back an
  older position gives the same events again, and the inbox does not act on them.

What became of a message shows on it as on Discord (:mod:`core.inbox.shown`): an
annotation (reaction) for how it was delivered, and a reply in its thread
(``m.in_reply_to``) when it could not be saved or handed over.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import ContentURI, RoomID

from adapters.matrix.approvals import MatrixApprovals
from adapters.matrix.commands import MatrixCommands, is_command
from adapters.matrix.errors import MATRIX_FAILURES, matrix_said
from adapters.matrix.ids import CHANNEL, thread_of, thread_root
from adapters.matrix.replies import reply_content, txn_id
from adapters.matrix.sending import MatrixSender
from core.bindings.records import ConversationRef
from core.bindings.service import SessionBindingService
from core.errors import DeliveryError
from core.inbox import FileRef, FileUnavailable, Inbox, InboxMessage, Outcome, Source
from core.inbox.shown import FAILED_MARK, mark_of, not_saved_text, replies_of
from core.logging import get_logger

__all__ = ["MatrixInbox"]

_log = get_logger("adapters.matrix.inbox")


SAID: Final = frozenset({"m.text", "m.notice", "m.emote"})
"""The message types that carry a person's words."""
FILES: Final = frozenset({"m.file", "m.image", "m.audio", "m.video"})
"""The message types that carry a file (``url``, an ``mxc://`` address)."""

GAP_PAGE: Final = 100
"""Events per ``/messages`` request while a limited timeline's gap is read back."""


class MatrixInbox:
    """One Matrix account's side of the inbox: its sync batches in, the outcomes shown."""

    channel = CHANNEL

    def __init__(
        self,
        account_id: str,
        client: Client,
        inbox: Inbox,
        bindings: SessionBindingService,
        *,
        commands: MatrixCommands | None = None,
        approvals: MatrixApprovals | None = None,
        sender: MatrixSender | None = None,
    ) -> None:
        """``sender``: the account's paced sends (a rate limit holds the marks and replies
        too, rather than losing them); one of its own when not given."""
        self.account_id = account_id
        self._sender = sender or MatrixSender(client)
        self._commands = commands
        self._approvals = approvals
        self._client = client
        self._inbox = inbox
        self._bindings = bindings
        self.on_received: Callable[[InboxMessage, Outcome], None] | None = None
        """Told what became of each person's message (the account's catch-up counts them)."""
        self._last_seq: dict[str, int] = {}
        """The newest ``seq`` given per conversation, so a thread's messages keep their order
        even when two share a millisecond."""

    # -- the sync loop's handler -----------------------------------------------------

    async def resume_from(self) -> str | None:
        """The saved position; commands a stopped bot left unfinished are closed first,
        and the approval reactions it left undecided are decided."""
        if self._commands is not None:
            await self._commands.recover()
        if self._approvals is not None:
            await self._approvals.recover()
        return await self._inbox.position(CHANNEL, self.account_id)

    async def handle(self, rooms: Mapping[str, Any], /, *, since: str | None) -> None:
        """Record every person's message of the batch in bound threads, and answer every
        ``!`` command, in timeline order.

        The account's first sync ever (``since`` None) shows each room's recent history:
        commands typed there before the bot ever read the room are not answered.
        """
        for room_id, room in (rooms.get("join") or {}).items():
            for event in await self._timeline(room_id, room, since):
                if self._commands is not None and is_command(event, self._client.mxid):
                    if since is not None:
                        await self._commands.on_command(room_id, event)
                elif self._approvals is not None and event.get("type") == "m.reaction":
                    if since is not None:
                        await self._approvals.on_reaction(room_id, event)
                else:
                    await self.on_event(room_id, event)

    async def handled(self, next_batch: str, /) -> None:
        await self._inbox.save_position(CHANNEL, self.account_id, next_batch)

    async def _timeline(
        self, room_id: str, room: Mapping[str, Any], since: str | None
    ) -> list[Mapping[str, Any]]:
        """The room's events of this batch, oldest first, a limited timeline's gap included."""
        timeline = room.get("timeline") or {}
        events: list[Mapping[str, Any]] = list(timeline.get("events") or ())
        start = timeline.get("prev_batch")
        if not timeline.get("limited") or since is None or start is None:
            return events  # complete, or a first sync: nothing was bound before it
        gap: list[Mapping[str, Any]] = []
        while start is not None:
            page = await self._client.api.request(
                Method.GET,
                Path.v3.rooms[RoomID(room_id)].messages,
                query_params={"from": start, "to": since, "dir": "b", "limit": str(GAP_PAGE)},
            )
            chunk = page.get("chunk") or []
            gap.extend(chunk)
            start = page.get("end") if chunk else None
        _log.info("matrix.gap_read", account=self.account_id, room_id=room_id, events=len(gap))
        return [*reversed(gap), *events]

    # -- one event ------------------------------------------------------------------

    async def on_event(self, room_id: str, event: Mapping[str, Any]) -> bool:
        """A timeline event: a person's message in a bound thread goes to its session, via
        the inbox. Returns whether the thread is bound (whoever wrote in it)."""
        root = thread_root(event)
        if root is None:
            return False
        conversation = thread_of(self.account_id, room_id, root)
        if self._bindings.active_for_conversation(conversation) is None:
            return False
        if not self._from_a_person(event):
            return True
        item = self._inbox_message(conversation, event)
        try:
            outcome = await self._inbox.receive(item)
            if self.on_received is not None:
                self.on_received(item, outcome)
        except Exception as exc:  # not even recorded: say so, visibly
            _log.error(
                "inbox.record_failed",
                conversation=conversation.describe(),
                item_id=item.item_id,
                exc_info=exc,
            )
            await self._mark(item, FAILED_MARK)
            await self._reply(item, not_saved_text(self._name(conversation)))
        return True

    def _from_a_person(self, event: Mapping[str, Any]) -> bool:
        """A message with words, not the bot's own."""
        if event.get("type") != "m.room.message" or event.get("sender") == self._client.mxid:
            return False
        content = event.get("content") or {}
        if content.get("msgtype") in FILES:
            return isinstance(content.get("url"), str)
        return content.get("msgtype") in SAID and isinstance(content.get("body"), str)

    def _inbox_message(
        self, conversation: ConversationRef, event: Mapping[str, Any], source: Source = "live"
    ) -> InboxMessage:
        key = conversation.conversation_id
        stamp = int(event.get("origin_server_ts") or 0) * 1000
        seq = max(stamp, self._last_seq.get(key, -1) + 1)
        self._last_seq[key] = seq
        sender = str(event.get("sender") or "")
        text, files = _words_and_files(event.get("content") or {})
        return InboxMessage(
            conversation=conversation,
            item_id=str(event["event_id"]),
            seq=seq,
            text=text,
            author_id=sender or None,
            author_name=sender or None,
            files=files,
            source=source,
        )

    # -- the inbox's port ------------------------------------------------------------

    async def fetch_file(self, file: FileRef, /) -> bytes:
        """Download through the homeserver's (authenticated) media API; every failure
        becomes a reason for the sender."""
        try:
            return await self._client.download_media(ContentURI(file.url))
        except MATRIX_FAILURES as exc:
            raise FileUnavailable(
                file.name, f"the homeserver's media store answered {matrix_said(exc)}"
            ) from exc

    async def acknowledge(self, message: InboxMessage, outcome: Outcome, /) -> None:
        """Show on the message what became of it: an annotation, and a reply if one is owed."""
        if message.source in ("command", "schedule"):  # nothing written to react to
            return
        mark = mark_of(outcome)
        if mark is not None:
            await self._mark(message, mark)
        for text in replies_of(outcome, self._name(message.conversation)):
            await self._reply(message, text)

    # -- helpers -------------------------------------------------------------------

    def _name(self, conversation: ConversationRef) -> str:
        binding = self._bindings.resolve_by_conversation(conversation)
        return binding.meta.persona.shown_name if binding is not None else "the agent"

    async def _mark(self, message: InboxMessage, key: str) -> None:
        room_id = RoomID(message.conversation.parent_conversation_id or "")
        relates = {"rel_type": "m.annotation", "event_id": message.item_id, "key": key}
        try:
            await self._sender.send(
                room_id,
                {"m.relates_to": relates},
                txn=txn_id("mark", message.item_id, key),
                event_type="m.reaction",
            )
        except DeliveryError as exc:
            _log.warning("bot.reaction_failed", item_id=message.item_id, emoji=key, error=str(exc))

    async def _reply(self, message: InboxMessage, text: str) -> None:
        """``text`` in the message's thread, as a reply to it."""
        ref = message.conversation
        try:
            await self._sender.send(
                ref.parent_conversation_id or "",
                reply_content(text, to=message.item_id, thread=ref.conversation_id),
                txn=txn_id("inbox", message.item_id, text),
            )
        except DeliveryError as exc:
            _log.warning("inbox.reply_failed", item_id=message.item_id, error=str(exc))


def _words_and_files(content: Mapping[str, Any]) -> tuple[str, tuple[FileRef, ...]]:
    """A message's words, and its file as a reference (not downloaded yet).

    A file message's ``body`` is its file name, unless ``filename`` names the file:
    then the body is a caption, and so words.
    """
    body = str(content.get("body") or "")
    if content.get("msgtype") not in FILES:
        return body, ()
    info = content.get("info") or {}
    name = str(content.get("filename") or body or "file")
    caption = body if content.get("filename") and body != name else ""
    size = info.get("size")
    ref = FileRef(
        name,
        str(content["url"]),
        size if isinstance(size, int) else 0,
        info.get("mimetype") if isinstance(info.get("mimetype"), str) else None,
    )
    return caption, (ref,)
