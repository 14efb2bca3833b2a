"""``!`` commands: a person's message starting with ``!``, answered as a reply in the room.

Matrix has no commands of its own, so a command is a message, parsed with the same
grammar as the playground's typed commands (:mod:`core.command_text`) against
:data:`DEFINITIONS`, in the shape of Discord's application commands: an unknown
command or a bad option gets the same one-sentence error as there, spelled with
``!``. Matrix has no private answers either: every answer is a reply
(``m.in_reply_to``) to the command, in its thread when it was typed in one.

A command is recorded in the inbox before it acts, keyed by its event id
(:meth:`core.inbox.Inbox.record_press`), so a homeserver that hands back an older
position never makes it answer twice. One that a stopped bot recorded but never
finished is closed at the next start with a reply asking for it again
(:meth:`MatrixCommands.recover`).

``!help`` and ``!usage`` are here; the families are modules of their own
(:mod:`~adapters.matrix.agent_commands`, :mod:`~adapters.matrix.steering_commands`,
:mod:`~adapters.matrix.schedule_commands`, :mod:`~adapters.matrix.config_commands`).
What each answers is decided in core (the use cases and their words), not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mautrix.client import Client

from adapters.matrix import agent_commands, config_commands, schedule_commands, steering_commands
from adapters.matrix.command_context import (
    PREFIX,
    Asked,
    CommandAccount,
    Definitions,
    Handlers,
    not_a_thread,
)
from adapters.matrix.ids import CHANNEL, room_of, thread_of, thread_root
from adapters.matrix.replies import reply_content, txn_id
from adapters.matrix.sending import MatrixSender
from core.agent.usage import context_size, usage_text
from core.command_text import CommandTextError, help_entries, parse_command
from core.errors import DeliveryError
from core.inbox import InboxPress
from core.logging import get_logger
from core.usecases import UseCases

__all__ = ["DEFINITIONS", "PREFIX", "MatrixCommands", "help_text", "is_command"]

_log = get_logger("adapters.matrix.commands")

ACTION: Final = "command"
"""The inbox's action for a typed command (its rows beside Discord's button presses)."""

DEFINITIONS: Final[Definitions] = (
    {"type": 1, "name": "help", "description": "How to talk to the agents, and the commands."},
    *agent_commands.DEFINITIONS,
    *steering_commands.DEFINITIONS,
    {"type": 1, "name": "usage", "description": "This session's tokens, cost and context."},
    *schedule_commands.DEFINITIONS,
    *config_commands.DEFINITIONS,
)
"""The commands a Matrix room understands, in the grammar's definition shape."""

IN_A_THREAD: Final = (
    "**In a session's thread** write to the agent: a message while it works steers it "
    "(🧭), `>> text` queues a follow-up for after its turn (📥)."
)
FAILED: Final = "⚠️ This command failed inside the bot (the details are in its logs)."
INTERRUPTED: Final = (
    "⚠️ The bot stopped before it finished this command; send it again if it still matters."
)


def is_command(event: Mapping[str, Any], bot_user_id: str) -> bool:
    """A person's text message starting with ``!``."""
    if event.get("type") != "m.room.message" or event.get("sender") == bot_user_id:
        return False
    content = event.get("content") or {}
    body = content.get("body")
    return content.get("msgtype") == "m.text" and isinstance(body, str) and body.startswith(PREFIX)


def help_text() -> str:
    """``!help``'s answer: how a thread works, then every command with its options."""
    lines = [IN_A_THREAD, "", "**Commands**"]
    lines += [f"`{e.usage}` — {e.description}" for e in help_entries(DEFINITIONS, prefix=PREFIX)]
    return "\n".join(lines)


class MatrixCommands:
    """One Matrix account's ``!`` commands: parsed, answered once, as replies."""

    def __init__(
        self, account_id: str, client: Client, uses: UseCases, *, sender: MatrixSender | None = None
    ) -> None:
        """``sender``: the account's paced sends (one per account, so a rate limit holds
        every send of it); a sender of its own when not given."""
        self.account_id = account_id
        self._client = client
        self._uses = uses
        self._sender = sender or MatrixSender(client)
        account = CommandAccount(account_id, client, uses)
        self._handlers: Handlers = {("help",): self._help, ("usage",): self._usage}
        for family in (
            agent_commands.AgentCommands(account),
            steering_commands.SteeringCommands(account),
            schedule_commands.ScheduleCommands(account),
            config_commands.ConfigCommands(account),
        ):
            self._handlers.update(family.handlers())

    async def on_command(self, room_id: str, event: Mapping[str, Any]) -> None:
        """Answer the command in ``event`` unless it was answered (or begun) before."""
        root = thread_root(event)
        conversation = (
            thread_of(self.account_id, room_id, root)
            if root is not None
            else room_of(self.account_id, room_id)
        )
        body = str(event["content"]["body"])
        press = InboxPress(
            conversation=conversation,
            item_id=str(event["event_id"]),
            seq=int(event.get("origin_server_ts") or 0),
            action=ACTION,
            target=body[:500],
            message_id=room_id,
            author_id=str(event.get("sender") or "") or None,
        )
        if not await self._uses.inbox.record_press(press):
            return  # this very command was taken before: never answered twice
        asked = Asked(
            conversation=conversation,
            room_id=room_id,
            sender=str(event.get("sender") or ""),
            event_id=press.item_id,
            seq=press.seq,
        )
        status = "done"
        try:
            text = await self.answer(asked, body)
        except Exception:
            _log.error("matrix.command_failed", command=body.split()[0], exc_info=True)
            text, status = FAILED, "failed"
        await self._reply(press, text)
        await self._uses.inbox.finish_press(press, status)

    async def answer(self, asked: Asked, body: str) -> str:
        """What the command ``body``, as ``asked``, answers."""
        try:
            parsed = parse_command(body, DEFINITIONS, prefix=PREFIX)
        except CommandTextError as exc:
            return str(exc)
        return await self._handlers[parsed.path](asked, parsed.options)

    async def recover(self) -> int:
        """At start-up: close every command a stopped bot recorded but never finished,
        asking for it again; returns how many."""
        closed = 0
        for press in await self._uses.inbox.pending_presses(CHANNEL, self.account_id):
            if press.action != ACTION:
                continue
            await self._reply(press, INTERRUPTED)
            await self._uses.inbox.finish_press(press, "interrupted")
            closed += 1
        return closed

    # -- the commands ----------------------------------------------------------------

    async def _help(self, _asked: Asked, _options: Mapping[str, Any]) -> str:
        return help_text()

    async def _usage(self, asked: Asked, _options: Mapping[str, Any]) -> str:
        binding = self._uses.bindings.active_for_conversation(asked.conversation)
        if binding is None:
            return not_a_thread("usage")
        view = await self._uses.sessions.view(binding.target_session_key)
        return usage_text(
            view.tree.total_usage,
            model=view.model,
            context_window=view.context_window,
            external=view.external,
            context=context_size(view.tree),
            prefix=PREFIX,
        )

    # -- helpers -------------------------------------------------------------------

    async def _reply(self, press: InboxPress, text: str) -> None:
        """``text`` as a reply to the command, sent at the homeserver's pace (a rate limit
        waits, it does not lose the answer); the transaction id makes a retry post once."""
        ref = press.conversation
        thread = ref.conversation_id if ref.parent_conversation_id is not None else None
        try:
            await self._sender.send(
                press.message_id or ref.conversation_id,
                reply_content(text, to=press.item_id, thread=thread),
                txn=txn_id(ACTION, press.item_id, text),
            )
        except DeliveryError as exc:
            _log.warning("matrix.command_reply_failed", item_id=press.item_id, error=str(exc))
