"""``!agents spawn`` and ``!agents list`` in a Matrix room.

What a spawn becomes is core's (:meth:`core.subagents.service.SubagentService.request_for`,
``check``, ``spawn``), asked with the room as the requester (typed in a thread, the
thread's room: Matrix threads do not nest) and the room as the scope whose flags
apply (``channels.matrix.threadBindings.…``). With ``spawnSubagentSessions`` on
there the subagent gets a thread of its own, and the reply links to its root; off,
a run answers where it was asked. A refusal is the use case's one sentence.
``!agents list`` is core's lines (:func:`core.subagents.overview.overview_lines`),
a thread shown as a matrix.to link.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from adapters.matrix.command_context import Asked, CommandAccount, Definitions, Handlers, link
from adapters.matrix.ids import room_of
from core.bindings.records import ConversationRef
from core.errors import ThreadboundError
from core.logging import get_logger
from core.subagents.overview import overview_lines

__all__ = ["DEFINITIONS", "AgentCommands"]

_log = get_logger("adapters.matrix.commands")

UNEXPECTED: Final = (
    "The subagent could not start because of an unexpected error (it was logged); "
    "try again, and tell an admin if it keeps happening."
)
"""Discord's words for a spawn that failed inside the bot."""
REPLY_STARTED: Final = "Working on it; the answer will be posted here."

DEFINITIONS: Final[Definitions] = (
    {
        "type": 1,
        "name": "agents",
        "description": "Start and list subagents.",
        "options": [
            {
                "type": 1,
                "name": "spawn",
                "description": "Start a subagent on a task.",
                "options": [
                    {
                        "type": 3,
                        "name": "task",
                        "description": "What the subagent should do",
                        "required": True,
                    },
                    {
                        "type": 3,
                        "name": "agent",
                        "description": "Agent profile (its name is the persona)",
                    },
                    {
                        "type": 3,
                        "name": "mode",
                        "description": "run: one task; session: stays available in its thread",
                        "choices": [
                            {"name": "run", "value": "run"},
                            {"name": "session", "value": "session"},
                        ],
                    },
                ],
            },
            {
                "type": 1,
                "name": "list",
                "description": "Subagents: state, thread, queues and usage.",
            },
        ],
    },
)


def place(ref: ConversationRef) -> str:
    """A conversation as a link: a thread to its root in its room, a room to itself."""
    if ref.parent_conversation_id is None:
        return link(ref.conversation_id)
    return link(ref.parent_conversation_id, ref.conversation_id)


class AgentCommands:
    """One account's ``!agents`` commands."""

    def __init__(self, account: CommandAccount) -> None:
        self._account = account

    def handlers(self) -> Handlers:
        return {("agents", "spawn"): self.spawn, ("agents", "list"): self.list}

    async def spawn(self, asked: Asked, options: Mapping[str, Any]) -> str:
        """Start a subagent on the task; the reply says where, or why not."""
        account = self._account
        spawns = account.uses.spawns
        try:
            request = spawns.request_for(
                room_of(account.account_id, asked.room_id),
                task=str(options["task"]),
                agent=options.get("agent"),
                mode=options.get("mode", "run"),
                requested_by=asked.sender,
                requested_by_name=asked.sender,
                scope=asked.room_id,
            )
            spawned = await spawns.spawn(request)
        except ThreadboundError as exc:
            return str(exc)
        except Exception:
            _log.error("agents.spawn_failed", exc_info=True)
            return UNEXPECTED
        if spawned.binding is None:
            return REPLY_STARTED
        root = spawned.binding.conversation.conversation_id
        return f"Started **{spawned.display_name}** in its thread: {link(asked.room_id, root)}"

    async def list(self, _asked: Asked, _options: Mapping[str, Any]) -> str:
        """This account's subagents on Matrix, newest first."""
        overview = await self._account.uses.subagents.overview(
            self._account.account_id, channel="matrix"
        )
        return "\n".join(overview_lines(overview, place=place)) or "No subagents."
