"""The canary report: routing and delivery outcomes read back from the JSON log.

Operators run it (``python -m bot canary LOGFILE [--since 2h] [--json]``)
before widening a rollout. It is pure: :func:`build_report` turns log lines into
a :class:`CanaryReport`, :func:`render_text` turns that into text, and
:func:`run_canary` only adds file reading and the exit status.
The report models (:mod:`core.canary.models`) and the text rendering
(:mod:`core.canary.render`) live apart; :mod:`core.canary` re-exports all three.

Three findings are violations (of the routing invariants in SPEC.md, and of the
scheduler's run-once promise) and make the exit status 1:

- a **duplicate delivery**: one ``completion_id`` with more than one
  ``delivery.sent`` anywhere in the log (reported when its last send is inside
  the window);
- a **hidden fallback**: a ``delivery.fallback`` for session S with requester
  conversation R on (channel, account) while S had an active binding there whose
  conversation or parent conversation is R: the router would have matched it,
  so the fallback hid a bound destination;
- a **duplicate run**: one scheduled run's ``run_key`` with more than one
  ``scheduler.run.started`` anywhere in the log (reported, like a duplicate
  delivery, when its last start is inside the window): a job's due time ran twice.

Scheduled runs are counted per group: started, finished by the head of their
``result`` (``failed: could not start: ...`` counts as ``failed``), skipped, missed,
and the due times the missed ones stood for (their ``due_count``).

Subagent tasks are counted by outcome (``subagent.completed``); only ``failed`` and
``timed_out`` count as task failures: a person's ``cancelled`` or ``rejected`` is
what that person chose, not something that went wrong. Neither is a violation.

Binding state comes from replaying ``binding.bound`` / ``binding.unbound`` /
``binding.expired`` (and a bound ``expires_at``) in timestamp, then line,
order, over the whole file: ``--since`` limits what is counted, not what is
known, so a binding made last week is still active today. Malformed lines are
counted and listed, never fatal. Counts are grouped by ``account`` and ``guild``;
a line without them that names a ``binding_id`` is grouped as that binding was
bound (a writer that had only the binding at hand). The file field names and the ``timestamp``
format are those of :mod:`core.logging` and :mod:`core.log_events`.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TextIO

from core.canary.models import (
    CanaryReport,
    DuplicateDelivery,
    DuplicateRun,
    GroupSummary,
    HiddenFallback,
    MalformedLines,
    WebhookFailure,
)
from core.canary.render import render_text
from core.clock import utcnow
from core.log_events import LogEvent
from core.logging import TIMESTAMP_KEY

__all__ = ["build_report", "parse_duration", "run_canary"]

MISSING = "-"
TASK_FAILURES = frozenset({"failed", "timed_out"})
"""The task outcomes that are failures; ``cancelled`` and ``rejected`` are a person's doing."""
MAX_LISTED_MALFORMED = 5
_EVENTS = frozenset(e.value for e in LogEvent)
_DURATION = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_DURATION_UNITS = ("weeks", "days", "hours", "minutes", "seconds")


def parse_duration(text: str) -> timedelta:
    """Parse ``90s``, ``30m``, ``2h``, ``7d``, ``1w`` or combinations like ``1h30m``.

    Raises:
        ValueError: the text is not such a duration, or it is zero.
    """
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or match is None:
        raise ValueError(
            f"invalid duration {text!r}: use a number and a unit (s, m, h, d, w), "
            "e.g. 90s, 30m, 2h, 7d or 1h30m"
        )
    parts = {unit: int(v) for unit, v in zip(_DURATION_UNITS, match.groups(), strict=True) if v}
    duration = timedelta(**parts)
    if duration <= timedelta(0):
        raise ValueError(f"invalid duration {text!r}: it must be longer than zero")
    return duration


# -- building -------------------------------------------------------------------


@dataclass
class _Entry:
    ts: datetime
    line: int
    event: str
    data: dict[str, Any]

    def get(self, key: str) -> str | None:
        value = self.data.get(key)
        return None if value is None else str(value)


@dataclass
class _Binding:
    binding_id: str
    conversation_id: str | None
    parent_conversation_id: str | None
    expires_at: datetime | None


@dataclass
class _Group:
    by_mode: Counter[str] = field(default_factory=Counter)
    by_reason: Counter[str] = field(default_factory=Counter)
    by_path: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    expiries: Counter[str] = field(default_factory=Counter)
    tasks: Counter[str] = field(default_factory=Counter)
    runs_finished: Counter[str] = field(default_factory=Counter)
    rate_limited: Counter[str] = field(default_factory=Counter)
    bound: int = 0
    unbound: int = 0
    runs_started: int = 0
    runs_skipped: int = 0
    runs_missed: int = 0
    missed_due_times: int = 0
    duplicate_runs: int = 0

    @property
    def empty(self) -> bool:
        """Nothing counted: only events the report does not count (a config change, say)."""
        counters = (
            self.by_mode,
            self.by_path,
            self.fallbacks,
            self.failures,
            self.expiries,
            self.tasks,
            self.runs_finished,
            self.rate_limited,
        )
        numbers = (self.bound, self.unbound, self.runs_started, self.runs_skipped, self.runs_missed)
        return not any(counters) and not any(numbers)

    def summary(self, account: str, guild: str) -> GroupSummary:
        return GroupSummary(
            account=account,
            guild=guild,
            resolutions_by_mode=dict(sorted(self.by_mode.items())),
            resolutions_by_reason=dict(sorted(self.by_reason.items())),
            deliveries_by_path=dict(sorted(self.by_path.items())),
            fallbacks=self.fallbacks.total(),
            fallbacks_by_reason=dict(sorted(self.fallbacks.items())),
            failures_by_path=dict(sorted(self.failures.items())),
            expiries_by_reason=dict(sorted(self.expiries.items())),
            bindings_bound=self.bound,
            bindings_unbound=self.unbound,
            tasks_by_outcome=dict(sorted(self.tasks.items())),
            task_failures=sum(n for outcome, n in self.tasks.items() if outcome in TASK_FAILURES),
            runs_started=self.runs_started,
            runs_finished_by_result=dict(sorted(self.runs_finished.items())),
            runs_skipped=self.runs_skipped,
            runs_missed=self.runs_missed,
            missed_due_times=self.missed_due_times,
            duplicate_runs=self.duplicate_runs,
            rate_limited_by_scope=dict(sorted(self.rate_limited.items())),
        )


def _parse_ts(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        return None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def _parse(lines: Iterable[str]) -> tuple[list[_Entry], int, MalformedLines]:
    entries: list[_Entry] = []
    malformed: list[int] = []
    read = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        read += 1
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        ts = _parse_ts(data.get(TIMESTAMP_KEY)) if isinstance(data, dict) else None
        if ts is None or not isinstance(data, dict) or not isinstance(data.get("event"), str):
            malformed.append(number)
            continue
        if data["event"] in _EVENTS:
            entries.append(_Entry(ts, number, data["event"], data))
    entries.sort(key=lambda e: (e.ts, e.line))
    found = MalformedLines(count=len(malformed), first_lines=malformed[:MAX_LISTED_MALFORMED])
    return entries, read, found


class _Replay:
    """Binding state over time, keyed like the router matches: session, channel, account."""

    def __init__(self) -> None:
        self._scopes: dict[tuple[str, str, str], dict[str, _Binding]] = defaultdict(dict)
        self._where: dict[str, tuple[str, str, str]] = {}
        self._groups: dict[str, tuple[str | None, str | None]] = {}
        """Each binding's (account, guild) as bound, kept after it ends."""

    def group(self, entry: _Entry) -> tuple[str, str]:
        """The (account, guild) an entry is counted under: its own fields, else those its
        binding was bound with (a line written where only the binding was at hand)."""
        account, guild = entry.get("account"), entry.get("guild")
        if account is None or guild is None:
            bound_account, bound_guild = self._groups.get(
                entry.get("binding_id") or "", (None, None)
            )
            account, guild = account or bound_account, guild or bound_guild
        return (account or MISSING, guild or MISSING)

    @staticmethod
    def _scope(entry: _Entry) -> tuple[str, str, str]:
        channel = (entry.get("channel") or MISSING).lower()
        return (entry.get("target_session_key") or MISSING, channel, entry.get("account") or "")

    def bound(self, entry: _Entry) -> None:
        binding_id = entry.get("binding_id")
        if binding_id is None:
            return
        scope = self._scope(entry)
        self._groups[binding_id] = (entry.get("account"), entry.get("guild"))
        self._scopes[scope][binding_id] = _Binding(
            binding_id,
            entry.get("conversation_id"),
            entry.get("parent_conversation_id"),
            _parse_ts(entry.data.get("expires_at")),
        )
        self._where[binding_id] = scope

    def ended(self, entry: _Entry) -> None:
        scope = self._where.pop(entry.get("binding_id") or "", None)
        if scope is not None:
            self._scopes[scope].pop(entry.get("binding_id") or "", None)

    def hiding(self, entry: _Entry) -> tuple[_Binding, Literal["conversation", "parent"]] | None:
        """The active binding a fallback bypassed, the exact conversation before a parent."""
        requester = entry.get("requester_conversation_id")
        if requester is None:
            return None
        live = [
            b
            for b in self._scopes.get(self._scope(entry), {}).values()
            if b.expires_at is None or b.expires_at > entry.ts
        ]
        for b in live:
            if b.conversation_id == requester:
                return b, "conversation"
        for b in live:
            if b.parent_conversation_id == requester:
                return b, "parent"
        return None


def build_report(lines: Iterable[str], *, since_ts: datetime | None) -> CanaryReport:
    """Read JSON log lines into a report; lines before ``since_ts`` are not counted."""
    entries, read, malformed = _parse(lines)
    groups: dict[tuple[str, str], _Group] = defaultdict(_Group)
    replay = _Replay()
    sends: dict[str, list[_Entry]] = defaultdict(list)
    starts: dict[str, list[_Entry]] = defaultdict(list)
    hidden: list[HiddenFallback] = []
    failures: list[WebhookFailure] = []
    counted: list[_Entry] = []

    for e in entries:
        in_window = since_ts is None or e.ts >= since_ts
        if e.event == LogEvent.BINDING_BOUND:
            replay.bound(e)
        elif e.event in (LogEvent.BINDING_UNBOUND, LogEvent.BINDING_EXPIRED):
            replay.ended(e)
        elif e.event == LogEvent.DELIVERY_SENT and e.get("completion_id") is not None:
            sends[e.get("completion_id") or ""].append(e)
        elif e.event == LogEvent.SCHEDULER_RUN_STARTED and e.get("run_key") is not None:
            starts[e.get("run_key") or ""].append(e)
        if not in_window:
            continue
        counted.append(e)
        where = replay.group(e)
        group = groups[where]
        if e.event == LogEvent.ROUTING_RESOLVED:
            group.by_mode[e.get("mode") or MISSING] += 1
            group.by_reason[e.get("reason") or MISSING] += 1
        elif e.event == LogEvent.DELIVERY_SENT:
            group.by_path[e.get("path") or MISSING] += 1
        elif e.event == LogEvent.DELIVERY_FALLBACK:
            group.fallbacks[e.get("reason") or MISSING] += 1
            if (found := replay.hiding(e)) is not None:
                hidden.append(_hidden(e, where, *found))
        elif e.event == LogEvent.DELIVERY_FAILED:
            group.failures[e.get("path") or MISSING] += 1
            if e.get("path") == "webhook":
                failures.append(_webhook_failure(e, where))
        elif e.event == LogEvent.BINDING_BOUND:
            group.bound += 1
        elif e.event == LogEvent.BINDING_UNBOUND:
            group.unbound += 1
        elif e.event == LogEvent.BINDING_EXPIRED:
            group.expiries[e.get("reason") or MISSING] += 1
        elif e.event == LogEvent.SUBAGENT_COMPLETED and e.data.get("recorded") is not False:
            group.tasks[e.get("outcome") or MISSING] += 1  # a repeat (recorded false): once
        elif e.event == LogEvent.SCHEDULER_RUN_STARTED:
            group.runs_started += 1
            if len(starts.get(e.get("run_key") or "", ())) > 1:  # this run started before
                group.duplicate_runs += 1
        elif e.event == LogEvent.SCHEDULER_RUN_FINISHED:
            group.runs_finished[_result_head(e.get("result"))] += 1
        elif e.event == LogEvent.DISCORD_RATE_LIMITED:
            group.rate_limited[e.get("scope") or MISSING] += 1
        elif e.event == LogEvent.SCHEDULER_RUN_SKIPPED:
            group.runs_skipped += 1
        elif e.event == LogEvent.SCHEDULER_RUN_MISSED:
            group.runs_missed += 1
            group.missed_due_times += _count(e.data.get("due_count"))

    duplicates = [
        DuplicateDelivery(
            completion_id=cid,
            count=len(sent),
            destinations=[s.get("destination") for s in sent],
            lines=[s.line for s in sent],
        )
        for cid, sent in sends.items()
        if len(sent) > 1 and (since_ts is None or sent[-1].ts >= since_ts)
    ]
    duplicate_runs = [
        DuplicateRun(
            run_key=key,
            job_id=started[0].get("job_id"),
            count=len(started),
            session_keys=[s.get("session_key") for s in started],
            lines=[s.line for s in started],
        )
        for key, started in starts.items()
        if len(started) > 1 and (since_ts is None or started[-1].ts >= since_ts)
    ]
    return CanaryReport(
        since=since_ts,
        lines_read=read,
        events_counted=len(counted),
        first_timestamp=counted[0].ts if counted else None,
        last_timestamp=counted[-1].ts if counted else None,
        groups=[g.summary(*key) for key, g in sorted(groups.items()) if not g.empty],
        duplicates=duplicates,
        hidden_fallbacks=hidden,
        webhook_failures=failures,
        malformed=malformed,
        duplicate_runs=duplicate_runs,
    )


def _result_head(result: str | None) -> str:
    """A run's result without its reason: ``failed: could not start: ...`` is ``failed``."""
    head = (result or "").split(":", 1)[0].strip()
    return head or MISSING


def _count(value: object) -> int:
    """A ``due_count`` as written (an int); anything else stands for one due time."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _hidden(
    e: _Entry,
    where: tuple[str, str],
    binding: _Binding,
    matched: Literal["conversation", "parent"],
) -> HiddenFallback:
    account, guild = where
    return HiddenFallback(
        completion_id=e.get("completion_id"),
        line=e.line,
        timestamp=e.ts,
        target_session_key=e.get("target_session_key") or MISSING,
        channel=e.get("channel") or MISSING,
        account=account,
        guild=guild,
        requester_conversation_id=e.get("requester_conversation_id") or MISSING,
        destination=e.get("destination"),
        binding_id=binding.binding_id,
        bound_conversation_id=binding.conversation_id or MISSING,
        matched=matched,
    )


def _webhook_failure(e: _Entry, where: tuple[str, str]) -> WebhookFailure:
    account, guild = where
    retryable = e.data.get("retryable")
    return WebhookFailure(
        completion_id=e.get("completion_id"),
        line=e.line,
        timestamp=e.ts,
        account=account,
        guild=guild,
        destination=e.get("destination"),
        binding_id=e.get("binding_id"),
        error=e.get("error"),
        retryable=retryable if isinstance(retryable, bool) else None,
    )


def run_canary(
    path: Path,
    *,
    since: timedelta | None,
    as_json: bool,
    out: TextIO,
    now: datetime | None = None,
) -> int:
    """Report on ``path`` to ``out``; exit status 0 clean, 1 violations, 2 unreadable file."""
    since_ts = (now or utcnow()) - since if since is not None else None
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            report = build_report(fh, since_ts=since_ts)
    except OSError as exc:
        out.write(f"canary: cannot read {path}: {exc.strerror or exc}\n")
        return 2
    if as_json:
        out.write(report.model_dump_json(indent=2) + "\n")
    else:
        out.write(render_text(report, source=str(path)))
    return 1 if report.violations else 0
