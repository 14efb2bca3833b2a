"""``/schedule``: scheduled work into bound threads and channels.

``add`` makes a job where it is typed: in a bound thread, each run is a new turn
of that thread's session; in a plain channel, each run spawns a subagent there.
``list`` shows the caller's jobs in this server (an administrator's: everyone's)
with Pause / Resume / Delete buttons; ``pause``, ``resume`` and ``remove`` change
one job, for its owner or an administrator only. The rules are
:class:`core.scheduler.service.Schedules`'s; this module parses and words.
Refusals are private; a job made is confirmed in the channel for all to see.
"""

from __future__ import annotations

from typing import Any, Final

import discord
from discord import app_commands

from adapters.discord.account import AccountRuntime
from adapters.discord.ids import conversation_of
from bot.commands.bound import uses_of
from bot.commands.permissions import is_admin
from bot.presses import ButtonId, IdButton, account_of
from core.errors import ThreadboundError
from core.logging import get_logger
from core.scheduler.records import Job
from core.scheduler.service import JobView, NewJob
from core.scheduler.shown import (
    Action,
    JobWords,
    as_sentence,
    changed_text,
    no_jobs_text,
    scheduled_text,
)
from core.scheduler.shown import job_lines as core_job_lines

__all__ = ["ScheduleButton", "ScheduleGroup", "job_lines", "setup_schedules"]

_log = get_logger("bot.commands.schedule")
_NO_MENTIONS: Final = discord.AllowedMentions.none()
SCHEDULE_ID: Final = ButtonId(
    "schedule", (("action", "pause|resume|remove"), ("job_id", "[0-9a-f]{8}"))
)
BUTTONS_LIMIT: Final = 12
"""Jobs that get buttons in one list (two each, five to a row, within Discord's 25)."""


class ScheduleGroup(
    app_commands.Group, name="schedule", description="Scheduled work into this thread or channel."
):
    """``/schedule add | list | pause | resume | remove``."""

    def __init__(self, account: AccountRuntime) -> None:
        super().__init__()
        self.account = account
        self.uses = uses_of(account)

    @app_commands.command(name="add", description="Run a task later or on a schedule, here.")
    @app_commands.describe(
        when='"in 20m", "every 1d", "2026-12-24T09:00" or a cron line like "0 9 * * 1-5"',
        task="What to do at each run (the turn carries it word for word)",
        agent="Agent profile a channel job spawns (default: the first)",
        name="A label for the job (default: the task's first words)",
        tz="IANA time zone for date-times and cron, e.g. Europe/Paris",
    )
    async def add(
        self,
        interaction: discord.Interaction,
        when: str,
        task: str,
        agent: str | None = None,
        name: str | None = None,
        tz: str | None = None,
    ) -> None:
        if interaction.guild_id is None or interaction.channel is None:
            await _private(interaction, "Jobs are scheduled in a server channel or thread.")
            return
        user = interaction.user
        request = NewJob(
            where=conversation_of(self.account.account_id, interaction.channel),
            scope=str(interaction.guild_id),
            owner_id=str(user.id),
            owner_name=user.display_name,
            when=when,
            task=task,
            agent=agent,
            name=name,
            timezone=tz,
            admin=is_admin(interaction),
        )
        try:
            added = await self.uses.schedules.add(request)
        except ThreadboundError as exc:
            await _private(interaction, _sentence(str(exc)))
            return
        await interaction.response.send_message(
            scheduled_text(added)[:2000],
            allowed_mentions=_NO_MENTIONS,
        )

    @app_commands.command(name="list", description="Your scheduled jobs in this server.")
    async def list_jobs(self, interaction: discord.Interaction) -> None:
        if interaction.guild_id is None:
            await _private(interaction, "Jobs are listed per server; use this in a server.")
            return
        admin = is_admin(interaction)
        views = await self.uses.schedules.list(
            str(interaction.guild_id), str(interaction.user.id), admin=admin
        )
        if not views:
            await _private(interaction, no_jobs_text(prefix="/"))
            return
        text = "\n".join(job_lines(views, everyone=admin))
        await interaction.response.send_message(
            text[:2000],
            ephemeral=True,
            allowed_mentions=_NO_MENTIONS,
            view=_buttons([v.job for v in views[:BUTTONS_LIMIT]]),
        )

    @app_commands.command(name="pause", description="Pause a job (its owner or an admin).")
    @app_commands.describe(id="The job's id, as /schedule list shows it")
    async def pause(self, interaction: discord.Interaction, id: str) -> None:
        await change(self.account, interaction, "pause", id)

    @app_commands.command(name="resume", description="Let a paused job run again.")
    @app_commands.describe(id="The job's id, as /schedule list shows it")
    async def resume(self, interaction: discord.Interaction, id: str) -> None:
        await change(self.account, interaction, "resume", id)

    @app_commands.command(name="remove", description="Delete a job (its owner or an admin).")
    @app_commands.describe(id="The job's id, as /schedule list shows it")
    async def remove(self, interaction: discord.Interaction, id: str) -> None:
        await change(self.account, interaction, "remove", id)


async def change(
    account: AccountRuntime, interaction: discord.Interaction, action: Action, job_id: str
) -> None:
    """Pause, resume or remove one job; a refusal (not found here, not yours) is private."""
    schedules = uses_of(account).schedules
    scope = str(interaction.guild_id) if interaction.guild_id is not None else None
    caller, admin = str(interaction.user.id), is_admin(interaction)
    act = {"pause": schedules.pause, "resume": schedules.resume, "remove": schedules.remove}
    try:
        job = await act[action](job_id, scope, caller, admin=admin)
    except ThreadboundError as exc:
        await _private(interaction, _sentence(str(exc)))
        return
    next_run = schedules.next_run(job) if action == "resume" else None
    await _private(interaction, changed_text(action, job, next_run, prefix="/"))


WORDS: Final = JobWords(
    place=lambda ref: f"<#{ref.conversation_id}>",
    person=lambda user_id: f"<@{user_id}>",
    escape=lambda text: discord.utils.escape_markdown(discord.utils.escape_mentions(text)),
)
"""Discord's links, mentions and escaping for core's job lines."""


def job_lines(views: list[JobView], *, everyone: bool) -> list[str]:
    """``/schedule list``'s lines (core's wording, Discord's links)."""
    return core_job_lines(views, WORDS, everyone=everyone)


def _buttons(jobs: list[Job]) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for job in jobs:
        toggle: Action = "resume" if job.state == "paused" else "pause"
        view.add_item(
            discord.ui.Button(
                label=f"{'Resume' if toggle == 'resume' else 'Pause'} {job.job_id}",
                style=discord.ButtonStyle.secondary,
                custom_id=SCHEDULE_ID.format(action=toggle, job_id=job.job_id),
            )
        )
        view.add_item(
            discord.ui.Button(
                label=f"Delete {job.job_id}",
                style=discord.ButtonStyle.danger,
                custom_id=SCHEDULE_ID.format(action="remove", job_id=job.job_id),
            )
        )
    view.stop()  # every press goes through the registered dynamic item, restart or not
    return view


class ScheduleButton(IdButton, template=SCHEDULE_ID.template):
    """Pause / Resume / Delete under ``/schedule list``: understood from its id alone, so a
    press after a restart works; the same checks as the commands (owner or admin). Not
    recorded as a press: each acts idempotently, and says what it did."""

    def __init__(self, item: discord.ui.Button[Any], /, *, action: str, job_id: str) -> None:
        super().__init__(item)
        self.action: Action = action  # type: ignore[assignment]  # the template's choices
        self.job_id = job_id

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            await change(account_of(interaction), interaction, self.action, self.job_id)
        except Exception:
            _log.error("schedule.press_failed", job_id=self.job_id, exc_info=True)
            await _private(interaction, "⚠️ That did not work (it was logged); try again.")


def setup_schedules(client: discord.Client) -> None:
    """Register the list's buttons, once per client."""
    client.add_dynamic_items(ScheduleButton)


_sentence = as_sentence


async def _private(interaction: discord.Interaction, text: str) -> None:
    if interaction.response.is_done():
        await interaction.followup.send(text[:2000], ephemeral=True, allowed_mentions=_NO_MENTIONS)
    else:
        await interaction.response.send_message(
            text[:2000], ephemeral=True, allowed_mentions=_NO_MENTIONS
        )
