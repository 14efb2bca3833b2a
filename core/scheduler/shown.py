"""What a ``schedule`` command answers, on every platform alike.

Discord's ``/schedule`` and Matrix's ``!schedule`` make, list and change the same
jobs (:class:`core.scheduler.service.Schedules`) and word them the same; only how a
conversation is linked, a person mentioned and a name escaped are the platform's
(:class:`JobWords`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from core.bindings.records import ConversationRef
from core.scheduler.records import Job
from core.scheduler.service import Added, JobView

__all__ = [
    "Action",
    "JobWords",
    "as_sentence",
    "changed_text",
    "job_lines",
    "no_jobs_text",
    "scheduled_text",
]

Action = Literal["pause", "resume", "remove"]
_DONE: Final = {"pause": "Paused", "resume": "Resumed", "remove": "Removed"}


@dataclass(frozen=True, slots=True)
class JobWords:
    """How one platform shows a job's parts.

    Attributes:
        place: a link to a conversation.
        person: a person by their id.
        escape: a job's name made inert (no markup, no mention).
    """

    place: Callable[[ConversationRef], str]
    person: Callable[[str], str]
    escape: Callable[[str], str]


def scheduled_text(added: Added) -> str:
    """The answer to a job made, for everyone in the conversation to see."""
    return f"⏰ Scheduled “{added.job.name}”. {added.sentence}"


def no_jobs_text(*, prefix: str) -> str:
    return f"No scheduled jobs. `{prefix}schedule add` makes one."


def changed_text(action: Action, job: Job, next_run: str | None, *, prefix: str) -> str:
    """The answer to a job paused, resumed or removed."""
    text = f"{_DONE[action]} “{job.name}” (`{job.job_id}`)."
    if action == "resume":
        text += f" Next run {next_run}." if next_run else ""
    elif action == "pause":
        text += f" `{prefix}schedule resume id:{job.job_id}` lets it run again."
    return text


def job_lines(views: list[JobView], words: JobWords, *, everyone: bool) -> list[str]:
    """One line per job: name, id, spec, where it runs, next run, last result (and owner,
    for an administrator's list of everyone's)."""
    lines = []
    for view in views:
        job = view.job
        parts = [f"**{words.escape(job.name)}** `{job.job_id}`", f"{job.spec} ({job.timezone})"]
        parts.append(_where(job, words))
        if job.state == "paused":
            parts.append(f"⏸️ paused: {job.paused_reason or 'paused'}")
        elif view.next_run:
            parts.append(f"next {view.next_run}")
        parts.append(f"last: {job.last_result or 'not run yet'}")
        if everyone:
            parts.append(f"owner {words.person(job.owner_id)}")
        lines.append(" · ".join(parts))
    return lines


def _where(job: Job, words: JobWords) -> str:
    place = words.place(job.conversation)
    if job.kind == "channel":
        agent = f" as {job.agent}" if job.agent else ""
        return f"spawns{agent} in {place}"
    if job.kind == "wakeup":
        return f"wake-up in {place}"
    return f"in {place}"


def as_sentence(text: str) -> str:
    """A refusal as a sentence: capital first letter, one full stop."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
