"""What every ``!`` command family shares: who asked where, and the account it asks.

A command family (:mod:`adapters.matrix.agent_commands`, …) gets an :class:`Asked`
per command and the account's :class:`CommandAccount`; it calls the use cases and
returns the one reply the person reads. Who counts as an administrator is the
room's power levels (:mod:`adapters.matrix.permissions`), read when a command needs
it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from mautrix.client import Client

from adapters.matrix.permissions import is_admin, may_change
from core.bindings.records import ConversationRef, SessionBindingRecord
from core.config import DEFAULT_ADMIN_POWER_LEVEL
from core.subagents.owners import NOT_OWNER
from core.usecases import UseCases

__all__ = [
    "PREFIX",
    "Asked",
    "CommandAccount",
    "Definitions",
    "Handler",
    "Handlers",
    "link",
    "not_a_thread",
]

PREFIX: Final = "!"
NOT_A_THREAD: Final = "This is not a session's thread; use {command} in a subagent's thread."

Definitions = tuple[Mapping[str, Any], ...]
"""Commands in the grammar's definition shape (:mod:`core.command_text`)."""


@dataclass(frozen=True, slots=True)
class Asked:
    """One command: where it was typed, by whom, as which event."""

    conversation: ConversationRef
    """The room, or the thread on a root in it."""
    room_id: str
    sender: str
    """The person's Matrix user id (their id as an owner, a job's owner …)."""
    event_id: str
    seq: int
    """The event's server time in milliseconds: its order among the thread's messages."""


Handler = Callable[[Asked, Mapping[str, Any]], Awaitable[str]]
Handlers = dict[tuple[str, ...], Handler]


def not_a_thread(command: str) -> str:
    """The refusal of a command that acts on a session, typed where none is bound."""
    return NOT_A_THREAD.format(command=f"{PREFIX}{command}")


def link(room_id: str, event_id: str | None = None) -> str:
    """A matrix.to link to ``event_id`` in ``room_id`` (a thread: its root), or to the
    room itself."""
    room = f"https://matrix.to/#/{quote(room_id, safe='')}"
    return room if event_id is None else f"{room}/{quote(event_id, safe='')}"


@dataclass(frozen=True, slots=True)
class CommandAccount:
    """One Matrix account as its commands see it: its id, its client, the use cases."""

    account_id: str
    client: Client
    uses: UseCases

    @property
    def admin_level(self) -> int:
        """The power level that makes an administrator in this account's rooms."""
        account = self.uses.config.channels.matrix.accounts.get(self.account_id)
        return account.admin_power_level if account is not None else DEFAULT_ADMIN_POWER_LEVEL

    async def is_admin(self, asked: Asked) -> bool:
        """Whether the person is an administrator of the room they asked in."""
        return await is_admin(self.client, asked.room_id, asked.sender, level=self.admin_level)

    async def bound_here(
        self, asked: Asked, command: str, *, changes: bool
    ) -> SessionBindingRecord | str:
        """The binding the command was typed in; else the refusal: not a bound thread, or
        (``changes``) a person neither an owner of its session nor an administrator."""
        binding = self.uses.bindings.active_for_conversation(asked.conversation)
        if binding is None:
            return not_a_thread(command)
        if changes and not await may_change(
            self.client,
            self.uses,
            binding.target_session_key,
            room_id=asked.room_id,
            user_id=asked.sender,
            level=self.admin_level,
        ):
            return NOT_OWNER
        return binding
