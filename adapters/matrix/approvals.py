"""Approval requests in a Matrix thread: a prompt with one reaction per choice, and its end.

When an agent's tool call waits for a person, the bot (not the persona: it asks on the
agent's behalf) posts a prompt in the session's thread, in the words of
:mod:`core.approvals_text`, listing the choices with their emoji, then reacts to it once
per choice (``m.annotation``), so a person's client offers them as one tap each:
✅ allow once, ♾️ allow for the session (or always), ❌ deny or reject; an external
agent's own options by their kind (🚫 rejects always) or, when two share a kind, by
keycap digits. The prompt carries its request id and its emoji's choices
(:data:`FIELD`), so a reaction is understood from the prompt alone, after a restart too.
When the request ends (decided, timed out, cancelled, withdrawn) the prompt is edited
(``m.replace``) to say how, as on Discord.

Every send's transaction id is derived from the request id, and a request a restarted
process takes up again is looked for in the room's recent history first, so a prompt is
never posted twice.

A person's reaction is a press (:meth:`MatrixApprovals.on_reaction`): recorded in the
inbox under the reaction's event id before it acts (a replayed sync never decides
twice; one a stopped bot left unfinished is decided at the next start,
:meth:`MatrixApprovals.recover`), then decided through
:meth:`core.approvals.Approvals.decide` if its author is the session's owner or an
administrator of the room (:func:`~adapters.matrix.permissions.may_change`). Anyone
else's reaction is removed (the bot needs the room's redact power; without it the
notice says so) and answered with a short notice in the thread.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import EventID, RoomID

from adapters.matrix.errors import MATRIX_FAILURES, is_retryable, matrix_said
from adapters.matrix.ids import CHANNEL, thread_of
from adapters.matrix.permissions import NOT_OWNER, may_change
from adapters.matrix.replies import reply_content, txn_id
from adapters.matrix.sending import MatrixSender
from adapters.matrix.streaming import edit_content
from core import approvals_text as words
from core.agent.events import ApprovalRequested, ApprovalResolved
from core.approvals import AlreadyDecided, Decided, NoSuchChoice
from core.errors import DeliveryError
from core.inbox import InboxPress
from core.logging import get_logger
from core.sessions.payloads import ApprovalOption
from core.usecases import UseCases

__all__ = ["FIELD", "MatrixApprovals", "reaction_choices"]

_log = get_logger("adapters.matrix.approvals")

FIELD: Final = "org.threadbound.approval"
"""The prompt's own field: ``request_id`` and ``choices`` (emoji -> choice)."""
ACTION: Final = "approval:"
"""The inbox's action of a reaction is this and its choice (Discord's presses alike)."""
HISTORY_LOOKBACK: Final = 50
"""Recent events searched for a prompt an earlier process posted."""
KNOWN_LIMIT: Final = 2_000
"""Events remembered as prompts (or as not prompts) before the memory starts over."""

EMOJI: Final = {"allow": "✅", "session": "♾️", "deny": "❌"}
KIND_EMOJI: Final = {
    "allow_once": "✅",
    "allow_always": "♾️",
    "reject_once": "❌",
    "reject_always": "🚫",
}
KEYCAPS: Final = ("1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟")
"""An external agent's options when two share a kind (at most ten are offered)."""

CANNOT_REMOVE: Final = "(I could not remove the reaction: I lack the power to redact here.)"
NO_SUCH_CHOICE: Final = "This reaction does not match the request's options any more."
NOT_SAVED: Final = "⚠️ This reaction could not be saved, so it decided nothing; try again."
FAILED: Final = "⚠️ This reaction could not be carried out (the details are in the bot's logs)."


def reaction_choices(options: Sequence[ApprovalOption] = ()) -> list[tuple[str, str, str]]:
    """``(emoji, choice, label)`` per choice of a request, in order."""
    if not options:
        return [(EMOJI[choice], choice, label) for choice, label in words.choices()]
    shown = options[: len(KEYCAPS)]
    kinds = [option.kind for option in shown]
    by_kind = len(set(kinds)) == len(kinds)
    return [
        (KIND_EMOJI[option.kind] if by_kind else KEYCAPS[n], choice, label)
        for n, (option, (choice, label)) in enumerate(zip(shown, words.choices(shown), strict=True))
    ]


def _bare(key: str) -> str:
    """An emoji without its variation selector: clients send ♾️ and ♾ alike."""
    return key.replace("\ufe0f", "")


class _Plain:
    """The body's markup: the words as they read without formatting."""

    def bold(self, text: str, /) -> str:
        return f"**{text}**"

    def code(self, text: str, /) -> str:
        return f"`{text}`"

    def note(self, text: str, /) -> str:
        return f"\n{text}"

    def escape(self, text: str, /) -> str:
        return text

    def raw(self, text: str, /) -> str:
        return text


class _Html:
    """The formatted body's markup (``org.matrix.custom.html``)."""

    def bold(self, text: str, /) -> str:
        return f"<strong>{html.escape(text)}</strong>"

    def code(self, text: str, /) -> str:
        return f"<code>{html.escape(text)}</code>"

    def note(self, text: str, /) -> str:
        return f"<br><sub>{html.escape(text)}</sub>"

    def escape(self, text: str, /) -> str:
        return html.escape(text)

    def raw(self, text: str, /) -> str:
        return html.escape(text)


PLAIN: Final = _Plain()
HTML: Final = _Html()


def _content(plain: str, formatted: str) -> dict[str, Any]:
    """An ``m.text`` that pings nobody (``m.mentions`` empty: names in it are words)."""
    return {
        "msgtype": "m.text",
        "body": plain,
        "format": "org.matrix.custom.html",
        "formatted_body": formatted,
        "m.mentions": {},
    }


@dataclass(frozen=True, slots=True)
class _Prompt:
    """A prompt the bot posted: where it is, what it asks, and what its emoji mean."""

    room_id: str
    event_id: str
    root: str
    request_id: str
    choices: Mapping[str, str]
    """Emoji (without variation selector) -> choice."""
    name: str = ""
    arguments: str = ""
    external: bool = False


class MatrixApprovals:
    """One Matrix account's approval prompts: posted, found again, ended; reactions decided."""

    def __init__(
        self,
        account_id: str,
        client: Client,
        sender: MatrixSender,
        uses: UseCases,
        *,
        admin_level: int,
    ) -> None:
        self.account_id = account_id
        self._client = client
        self._sender = sender
        self._uses = uses
        self._admin_level = admin_level
        self._asked: dict[str, _Prompt] = {}
        """Requests asked (or found again) in this process, by request id."""
        self._known: dict[str, _Prompt | None] = {}
        """Events looked at for reactions: the prompt each is, or None."""

    # -- the prompt --------------------------------------------------------------------

    async def ask(self, room_id: str, root: str, agent: str, event: ApprovalRequested) -> None:
        """Post the prompt for ``event`` in the thread on ``root`` and react once per choice
        (a request asked before a restart is found again instead). Raises
        :class:`~core.errors.DeliveryError` when the prompt cannot be posted."""
        if event.request_id in self._asked:
            return
        call = event.call
        external = bool(event.options)
        offered = reaction_choices(event.options)
        prompt = _Prompt(
            room_id,
            "",
            root,
            event.request_id,
            {_bare(emoji): choice for emoji, choice, _ in offered},
            call.name,
            call.arguments,
            external,
        )
        found = await self._find(room_id, event.request_id) if event.resumed else None
        if found is None:
            content = self._prompt_content(agent, event, offered)
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": root},
            }
            event_id = await self._sender.send(
                room_id, content, txn=txn_id("approval", event.request_id)
            )
        else:
            event_id = found.event_id
        prompt = dataclasses.replace(prompt, event_id=event_id)
        self._asked[event.request_id] = prompt
        self._remember(event_id, prompt)
        for emoji, _, _ in offered:
            await self._react(prompt, emoji)

    async def settle(self, room_id: str, event: ApprovalResolved) -> None:
        """Edit the prompt to say how the request ended. A request asked by an earlier
        process (withdrawn at a restart) is found in the room's recent history."""
        prompt = self._asked.pop(event.request_id, None)
        if prompt is None:
            if event.reason != "restart":
                return
            prompt = await self._find(room_id, event.request_id)
            if prompt is None:
                return
            prompt = dataclasses.replace(prompt, name=event.name, external=True)
        said = {
            markup: words.resolved_text(
                prompt.name or event.name,
                event.arguments or prompt.arguments,
                event.decision,
                event.by_name,
                markup,
                option=event.option,
                reason=event.reason,
                external=prompt.external,
            )
            for markup in (PLAIN, HTML)
        }
        content = edit_content(prompt.event_id, _content(said[PLAIN], said[HTML]))
        content["m.mentions"] = {}
        await self._sender.send(
            room_id, content, txn=txn_id("approval-end", event.request_id, event.decision)
        )
        await self._take_back_choices(room_id, prompt.event_id)

    async def _take_back_choices(self, room_id: str, prompt_id: str) -> None:
        """The bot's own choice reactions go once the request has ended (as Discord's
        buttons do): what is left on the prompt is what people did. A reaction that
        cannot be taken back stays (logged); a later one still gets "Already decided"."""
        try:
            page = await self._client.api.request(
                Method.GET,
                Path.v1.rooms[RoomID(room_id)].relations[EventID(prompt_id)]["m.annotation"],
                query_params={"limit": "50"},
            )
        except MATRIX_FAILURES as exc:
            _log.warning("approval.choices_kept", event_id=prompt_id, error=matrix_said(exc))
            return
        mine = [
            str(e["event_id"])
            for e in page.get("chunk") or ()
            if e.get("sender") == self._client.mxid and e.get("type") == "m.reaction"
        ]
        for event_id in mine:
            try:
                await self._sender.redact(
                    room_id, event_id, txn=txn_id("approval-unreact", event_id)
                )
            except DeliveryError as exc:
                _log.warning("approval.choices_kept", event_id=event_id, error=str(exc))

    def _prompt_content(
        self, agent: str, event: ApprovalRequested, offered: list[tuple[str, str, str]]
    ) -> dict[str, Any]:
        call = event.call
        external = bool(event.options)
        plain = words.request_text(
            agent, call.name, call.arguments, event.timeout_s, PLAIN, external=external
        )
        formatted = words.request_text(
            agent, call.name, call.arguments, event.timeout_s, HTML, external=external
        )
        plain += "".join(f"\n{emoji} {label}" for emoji, _, label in offered)
        formatted += "".join(f"<br>{emoji} {html.escape(label)}" for emoji, _, label in offered)
        content = _content(plain, formatted)
        content[FIELD] = {
            "request_id": event.request_id,
            "choices": {emoji: choice for emoji, choice, _ in offered},
        }
        return content

    async def _react(self, prompt: _Prompt, emoji: str) -> None:
        content = {
            "m.relates_to": {"rel_type": "m.annotation", "event_id": prompt.event_id, "key": emoji}
        }
        try:
            await self._sender.send(
                prompt.room_id,
                content,
                txn=txn_id("approval-key", prompt.request_id, emoji),
                event_type="m.reaction",
            )
        except DeliveryError as exc:  # already there (a restart), or refused: the words stay
            _log.info(
                "approval.reaction_failed",
                request_id=prompt.request_id,
                emoji=emoji,
                error=str(exc),
            )

    async def _find(self, room_id: str, request_id: str) -> _Prompt | None:
        """The prompt a previous process posted for ``request_id``, if still recent."""
        try:
            page = await self._client.api.request(
                Method.GET,
                Path.v3.rooms[RoomID(room_id)].messages,
                query_params={"dir": "b", "limit": str(HISTORY_LOOKBACK)},
            )
        except MATRIX_FAILURES as exc:
            _log.warning("approval.lookup_failed", request_id=request_id, error=matrix_said(exc))
            return None
        for event in page.get("chunk") or ():
            prompt = self._prompt_of(room_id, event)
            if prompt is not None and prompt.request_id == request_id:
                return prompt
        return None

    def _prompt_of(self, room_id: str, event: Mapping[str, Any]) -> _Prompt | None:
        """``event`` as one of this bot's prompts; None when it is not one."""
        content = event.get("content") or {}
        asked = content.get(FIELD)
        relates = content.get("m.relates_to") or {}
        if (
            event.get("sender") != self._client.mxid
            or event.get("type") != "m.room.message"
            or not isinstance(asked, Mapping)
            or not isinstance(asked.get("request_id"), str)
            or not isinstance(asked.get("choices"), Mapping)
            or relates.get("rel_type") != "m.thread"
        ):
            return None
        return _Prompt(
            room_id,
            str(event.get("event_id") or ""),
            str(relates.get("event_id") or ""),
            asked["request_id"],
            {_bare(str(k)): str(v) for k, v in asked["choices"].items()},
        )

    def _remember(self, event_id: str, prompt: _Prompt | None) -> None:
        if len(self._known) >= KNOWN_LIMIT:
            self._known.clear()
        self._known[event_id] = prompt

    # -- reactions ----------------------------------------------------------------------

    async def on_reaction(self, room_id: str, event: Mapping[str, Any]) -> None:
        """A reaction in the room: a person's choice on one of the prompts is decided (or
        refused); every other reaction, the bot's own included, is left alone."""
        sender = str(event.get("sender") or "")
        relates = (event.get("content") or {}).get("m.relates_to") or {}
        target, key = relates.get("event_id"), relates.get("key")
        if (
            not sender
            or sender == self._client.mxid
            or relates.get("rel_type") != "m.annotation"
            or not isinstance(target, str)
            or not isinstance(key, str)
        ):
            return
        prompt = await self._prompt(room_id, target)
        choice = prompt.choices.get(_bare(key)) if prompt is not None else None
        if prompt is None or choice is None:
            return
        press = InboxPress(
            conversation=thread_of(self.account_id, room_id, prompt.root),
            item_id=str(event["event_id"]),
            seq=int(event.get("origin_server_ts") or 0),
            action=ACTION + choice,
            target=prompt.request_id,
            message_id=prompt.event_id,
            author_id=sender,
            author_name=await self._display_name(room_id, sender),
        )
        inbox = self._uses.inbox
        try:
            fresh = await inbox.record_press(press)
        except Exception:
            _log.error(
                "press.record_failed", action=press.action, target=press.target, exc_info=True
            )
            await self._notice(press, NOT_SAVED)
            return
        if not fresh:
            return  # the same reaction handed over again: it acted the first time
        status = "done"
        try:
            await self._decide(press, choice)
        except Exception as exc:
            status = "failed"
            _log.error("press.failed", action=press.action, target=press.target, exc_info=exc)
            await self._notice(press, FAILED)
        try:
            await inbox.finish_press(press, status)
        except Exception:  # still pending: the next start decides it
            _log.warning(
                "press.finish_failed", action=press.action, target=press.target, exc_info=True
            )

    async def recover(self) -> int:
        """At start-up: decide every reaction a stopped bot recorded but never finished,
        if its request still waits; returns how many. Its author was allowed to decide
        when it was recorded only if they were: whether they are an administrator is
        asked again here (the room is known), unlike on Discord."""
        done = 0
        for press in await self._uses.inbox.pending_presses(CHANNEL, self.account_id):
            if not press.action.startswith(ACTION):
                continue
            try:
                await self._decide(press, press.action.removeprefix(ACTION))
                await self._uses.inbox.finish_press(press, "done")
            except Exception:  # still pending: the next start tries again
                _log.warning(
                    "press.recover_failed", action=press.action, target=press.target, exc_info=True
                )
                continue
            done += 1
        return done

    async def _decide(self, press: InboxPress, choice: str) -> None:
        approvals = self._uses.approvals
        request = await approvals.find(press.target)
        if request is None:
            await self._notice(press, words.GONE)
            return
        room_id = press.conversation.parent_conversation_id or ""
        person = press.author_id or ""
        if not await may_change(
            self._client,
            self._uses,
            request.session_key,
            room_id=room_id,
            user_id=person,
            level=self._admin_level,
        ):
            removed = await self._remove(room_id, press.item_id)
            await self._notice(press, NOT_OWNER if removed else f"{NOT_OWNER} {CANNOT_REMOVE}")
            return
        decided = await approvals.decide(
            request, choice, by_user_id=person, by_name=press.author_name or person
        )
        if isinstance(decided, Decided):
            return  # the thread's presenter edits the prompt
        if isinstance(decided, AlreadyDecided):
            await self._notice(press, words.already_decided_text(decided.record))
        elif isinstance(decided, NoSuchChoice):
            await self._notice(press, NO_SUCH_CHOICE)
        else:
            await self._notice(press, words.NOT_WAITING)

    async def _prompt(self, room_id: str, event_id: str) -> _Prompt | None:
        """The prompt ``event_id`` is, from memory or the homeserver; None if not one."""
        if event_id in self._known:
            return self._known[event_id]
        try:
            event = await self._client.api.request(
                Method.GET, Path.v3.rooms[RoomID(room_id)].event[EventID(event_id)]
            )
        except MATRIX_FAILURES as exc:
            if is_retryable(exc):  # the batch is read again: the person's choice is not lost
                raise
            _log.info("approval.event_unread", event_id=event_id, error=matrix_said(exc))
            return None  # not remembered: a later reaction asks again
        prompt = self._prompt_of(room_id, event)
        self._remember(event_id, prompt)
        return prompt

    async def _display_name(self, room_id: str, user_id: str) -> str:
        """The person's name in the room, as their reaction's prompt will say it."""
        try:
            member = await self._client.api.request(
                Method.GET, Path.v3.rooms[RoomID(room_id)].state["m.room.member"][user_id]
            )
        except MATRIX_FAILURES:
            return user_id
        name = member.get("displayname")
        return name if isinstance(name, str) and name.strip() else user_id

    async def _remove(self, room_id: str, event_id: str) -> bool:
        """Redact a reaction that decides nothing; False when the bot may not."""
        try:
            await self._sender.redact(
                room_id, event_id, txn=txn_id("approval-remove", event_id), reason=NOT_OWNER
            )
        except DeliveryError as exc:
            _log.warning("approval.unremoved", event_id=event_id, error=str(exc))
            return False
        return True

    async def _notice(self, press: InboxPress, text: str) -> None:
        """``text`` to the person who reacted: a reply to the prompt in its thread, naming
        them (and mentioning only them)."""
        ref = press.conversation
        who = press.author_name or press.author_id or "someone"
        content = reply_content(
            f"{who}: {text}", to=press.message_id or ref.conversation_id, thread=ref.conversation_id
        )
        content["m.mentions"] = {"user_ids": [press.author_id]} if press.author_id else {}
        try:
            await self._sender.send(
                ref.parent_conversation_id or "",
                content,
                txn=txn_id("approval-notice", press.item_id, text),
            )
        except DeliveryError as exc:
            _log.warning("approval.notice_failed", item_id=press.item_id, error=str(exc))
