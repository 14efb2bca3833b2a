"""The pydantic models of a canary report: what :func:`core.canary.build_report` returns.

A module of their own so the report's shape (also the ``--json`` output) reads
in one place, apart from the log replay that fills it and the text rendering.
Import them from :mod:`core.canary`, which re-exports them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

__all__ = [
    "CanaryReport",
    "DuplicateDelivery",
    "DuplicateRun",
    "GroupSummary",
    "HiddenFallback",
    "MalformedLines",
    "WebhookFailure",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class GroupSummary(_Model):
    """Counts for one (account, guild); ``-`` stands for a missing value."""

    account: str
    guild: str
    resolutions_by_mode: dict[str, int]
    resolutions_by_reason: dict[str, int]
    deliveries_by_path: dict[str, int]
    fallbacks: int
    fallbacks_by_reason: dict[str, int]
    failures_by_path: dict[str, int]
    expiries_by_reason: dict[str, int]
    bindings_bound: int
    bindings_unbound: int
    tasks_by_outcome: dict[str, int] = {}
    """Subagent tasks ended, by outcome (``subagent.completed``, each completion once)."""
    task_failures: int = 0
    """Of those, the failures: ``failed`` and ``timed_out``. A person's ``cancelled`` or
    ``rejected`` is their choice, never counted here."""
    runs_started: int = 0
    """Scheduled runs started (``scheduler.run.started``), repeats of one run included."""
    runs_finished_by_result: dict[str, int] = {}
    """Scheduled runs ended (``scheduler.run.finished``), by the head of their ``result``
    (``finished``, a subagent's outcome, ``failed`` whatever the reason after it)."""
    rate_limited_by_scope: dict[str, int] = {}
    """Discord's 429 incidents (``discord.rate_limited``, one per incident) by scope:
    ``global`` ones are what the bot's pacing must prevent."""
    runs_skipped: int = 0
    runs_missed: int = 0
    """``scheduler.run.missed`` lines: runs not made because the bot was down too long."""
    missed_due_times: int = 0
    """The due times those missed runs stood for (the sum of their ``due_count``)."""
    duplicate_runs: int = 0
    """Starts of a run already started (its ``run_key`` seen before): must stay 0."""


class DuplicateDelivery(_Model):
    """A completion delivered more than once (a violation)."""

    completion_id: str
    count: int
    destinations: list[str | None]
    lines: list[int]


class DuplicateRun(_Model):
    """A scheduled run started more than once: one ``run_key``, several
    ``scheduler.run.started`` lines (a violation, like a duplicate delivery)."""

    run_key: str
    job_id: str | None
    count: int
    session_keys: list[str | None]
    lines: list[int]


class HiddenFallback(_Model):
    """A fallback while a binding the router would have matched was active (a violation)."""

    completion_id: str | None
    line: int
    timestamp: datetime
    target_session_key: str
    channel: str
    account: str
    guild: str
    requester_conversation_id: str
    destination: str | None
    binding_id: str
    bound_conversation_id: str
    matched: Literal["conversation", "parent"]


class WebhookFailure(_Model):
    """A ``delivery.failed`` on the webhook path (the bot path should have taken over)."""

    completion_id: str | None
    line: int
    timestamp: datetime
    account: str
    guild: str
    destination: str | None
    binding_id: str | None
    error: str | None
    retryable: bool | None


class MalformedLines(_Model):
    """Lines that are not a JSON object with ``event`` and ``timestamp``."""

    count: int = 0
    first_lines: list[int] = []


class CanaryReport(_Model):
    """Everything the canary found; ``model_dump_json()`` is the ``--json`` output."""

    since: datetime | None
    lines_read: int
    events_counted: int
    first_timestamp: datetime | None
    last_timestamp: datetime | None
    groups: list[GroupSummary]
    duplicates: list[DuplicateDelivery]
    hidden_fallbacks: list[HiddenFallback]
    webhook_failures: list[WebhookFailure]
    malformed: MalformedLines
    duplicate_runs: list[DuplicateRun] = []

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy rejects decorated properties
    @property
    def violations(self) -> int:
        """Duplicate deliveries, hidden fallbacks and duplicate scheduled runs: the number
        that fails the canary."""
        return len(self.duplicates) + len(self.hidden_fallbacks) + len(self.duplicate_runs)
