"""``!schedule add | list | pause | resume | remove`` in a Matrix room or thread.

The same options, rules and words as Discord's ``/schedule``: the rules are
:class:`core.scheduler.service.Schedules`'s and the words
:mod:`core.scheduler.shown`'s. A room is the scope (its jobs, its flags), the
person's Matrix user id is a job's owner, and a room administrator (power level)
may list and change everyone's. ``add`` in a session's thread makes each run a turn
of that session; in the room, each run spawns a subagent there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from adapters.matrix.agent_commands import place
from adapters.matrix.command_context import (
    PREFIX,
    Asked,
    CommandAccount,
    Definitions,
    Handler,
    Handlers,
)
from core.errors import ThreadboundError
from core.scheduler.service import NewJob
from core.scheduler.shown import (
    Action,
    JobWords,
    as_sentence,
    changed_text,
    job_lines,
    no_jobs_text,
    scheduled_text,
)

__all__ = ["DEFINITIONS", "WORDS", "ScheduleCommands"]

_CHANGES: Final[tuple[Action, ...]] = ("pause", "resume", "remove")
_ID: Final = {
    "type": 3,
    "name": "id",
    "description": "The job's id, as !schedule list shows it",
    "required": True,
}
DEFINITIONS: Final[Definitions] = (
    {
        "type": 1,
        "name": "schedule",
        "description": "Scheduled work into this thread or room.",
        "options": [
            {
                "type": 1,
                "name": "add",
                "description": "Run a task later or on a schedule, here.",
                "options": [
                    {
                        "type": 3,
                        "name": "when",
                        "description": '"in 20m", "every 1d", "2026-12-24T09:00" or a cron line',
                        "required": True,
                    },
                    {
                        "type": 3,
                        "name": "task",
                        "description": "What to do at each run",
                        "required": True,
                    },
                    {"type": 3, "name": "agent", "description": "Agent profile a room job spawns"},
                    {"type": 3, "name": "name", "description": "A label for the job"},
                    {"type": 3, "name": "tz", "description": "IANA time zone, e.g. Europe/Paris"},
                ],
            },
            {"type": 1, "name": "list", "description": "Your scheduled jobs in this room."},
            {
                "type": 1,
                "name": "pause",
                "description": "Pause a job (its owner or an admin).",
                "options": [_ID],
            },
            {
                "type": 1,
                "name": "resume",
                "description": "Let a paused job run again.",
                "options": [_ID],
            },
            {
                "type": 1,
                "name": "remove",
                "description": "Delete a job (its owner or an admin).",
                "options": [_ID],
            },
        ],
    },
)


def _inert(text: str) -> str:
    """A person's words made unable to ping (``@room``) or to look like code."""
    return text.replace("@", "@\u2060").replace("`", "'")


WORDS: Final = JobWords(place=place, person=lambda user_id: f"`{user_id}`", escape=_inert)
"""Matrix's links, people and escaping for core's job lines."""


class ScheduleCommands:
    """One account's ``!schedule`` commands."""

    def __init__(self, account: CommandAccount) -> None:
        self._account = account

    def handlers(self) -> Handlers:
        found: Handlers = {("schedule", "add"): self.add, ("schedule", "list"): self.list}
        for action in _CHANGES:
            found[("schedule", action)] = self._changes(action)
        return found

    async def add(self, asked: Asked, options: Mapping[str, Any]) -> str:
        account = self._account
        request = NewJob(
            where=asked.conversation,
            scope=asked.room_id,
            owner_id=asked.sender,
            owner_name=asked.sender,
            when=str(options["when"]),
            task=str(options["task"]),
            agent=options.get("agent"),
            name=options.get("name"),
            timezone=options.get("tz"),
            admin=await account.is_admin(asked),
        )
        try:
            added = await account.uses.schedules.add(request)
        except ThreadboundError as exc:
            return as_sentence(str(exc))
        return scheduled_text(added)

    async def list(self, asked: Asked, _options: Mapping[str, Any]) -> str:
        admin = await self._account.is_admin(asked)
        views = await self._account.uses.schedules.list(asked.room_id, asked.sender, admin=admin)
        if not views:
            return no_jobs_text(prefix=PREFIX)
        return "\n".join(job_lines(views, WORDS, everyone=admin))

    def _changes(self, action: Action) -> Handler:
        async def change(asked: Asked, options: Mapping[str, Any]) -> str:
            return await self.change(asked, action, str(options["id"]))

        return change

    async def change(self, asked: Asked, action: Action, job_id: str) -> str:
        """Pause, resume or remove one job of this room (its owner or an administrator)."""
        schedules = self._account.uses.schedules
        admin = await self._account.is_admin(asked)
        act = {"pause": schedules.pause, "resume": schedules.resume, "remove": schedules.remove}
        try:
            job = await act[action](job_id, asked.room_id, asked.sender, admin=admin)
        except ThreadboundError as exc:
            return as_sentence(str(exc))
        next_run = schedules.next_run(job) if action == "resume" else None
        return changed_text(action, job, next_run, prefix=PREFIX)
