"""The canary's scheduled-run counts, and the one scheduler violation: a run started twice.

A job's due time must turn into at most one started run (its ``run_key`` is claimed
once in the store); the canary reads that promise back from the log the way it
reads back a completion delivered once, so a duplicate fails a rollout the same way.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core import log_events
from core.canary import build_report, render_text, run_canary
from core.logging import configure_logging, reset_logging

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
GUILD = "1100000000004194304"

pytestmark = pytest.mark.usefixtures("reset_logging_after")


def line(event: str, minutes: float, **fields: Any) -> str:
    stamp = (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")
    return json.dumps({"event": event, "level": "info", "timestamp": stamp, **fields})


def run_fields(job_id: str, due: int, account: str, guild: str | None) -> dict[str, Any]:
    fields = {
        "job_id": job_id,
        "run_key": f"{job_id}@{due}",
        "due_at": "2026-01-01T12:00:00Z",
        "kind": "thread",
        "account": account,
    }
    return fields if guild is None else {**fields, "guild": guild}


def started(
    minutes: float, job_id: str = "j1", due: int = 100, account: str = "A", **kw: Any
) -> str:
    guild = kw.pop("guild", GUILD)
    extra = {"due_count": 1, "late": False, "session_key": f"s-{minutes}", **kw}
    return line(
        "scheduler.run.started", minutes, **run_fields(job_id, due, account, guild), **extra
    )


def finished(minutes: float, result: str, job_id: str = "j1", due: int = 100) -> str:
    fields = run_fields(job_id, due, "A", GUILD)
    return line("scheduler.run.finished", minutes, **fields, result=result)


def skipped(minutes: float, job_id: str = "j1", due: int = 100) -> str:
    fields = run_fields(job_id, due, "A", GUILD)
    return line("scheduler.run.skipped", minutes, **fields, reason="the previous run was working")


def missed(minutes: float, due_count: int, job_id: str = "j1", due: int = 100) -> str:
    fields = run_fields(job_id, due, "A", GUILD)
    return line("scheduler.run.missed", minutes, level="warning", **fields, due_count=due_count)


class TestCounts:
    def test_runs_are_counted_per_account_and_guild(self) -> None:
        """Starts, ends by result, skips, misses and the due times missed, per group; a
        failure's reason is not a result of its own."""
        lines = [
            started(0),
            finished(1, "finished"),
            started(2, due=200),
            finished(3, "completed", due=200),
            started(4, due=300),
            finished(5, "failed: could not start: its account is not connected", due=300),
            finished(6, "failed: its thread was deleted", due=400),
            skipped(7, due=500),
            missed(8, 3, due=600),
            missed(9, 4, due=700),
            started(10, job_id="j2", account="B", guild=None),
        ]
        report = build_report(lines, since_ts=None)
        assert report.violations == 0
        assert report.duplicate_runs == []
        a, b = report.groups
        assert (a.account, a.guild, b.account, b.guild) == ("A", GUILD, "B", "-")
        assert a.runs_started == 3
        assert a.runs_finished_by_result == {"completed": 1, "failed": 2, "finished": 1}
        assert (a.runs_skipped, a.runs_missed, a.missed_due_times) == (1, 2, 7)
        assert (b.runs_started, b.runs_finished_by_result, b.runs_missed) == (1, {}, 0)
        assert a.duplicate_runs == b.duplicate_runs == 0

    def test_a_group_with_only_scheduled_runs_is_reported(self) -> None:
        """Scheduler lines alone make a group, and its counts are one line of the text."""
        report = build_report([skipped(0), missed(1, 2)], since_ts=None)
        (group,) = report.groups
        assert (group.runs_skipped, group.runs_missed, group.missed_due_times) == (1, 1, 2)
        text = render_text(report)
        assert (
            "  scheduled    started 0, finished: none, skipped 1, missed 1 (2 due times),"
            " duplicates 0"
        ) in text
        assert text.rstrip().endswith("RESULT: OK: no violations")
        assert "scheduled" not in render_text(
            build_report([line("routing.resolved", 0)], since_ts=None)
        )

    def test_a_missed_line_without_a_due_count_stands_for_one(self) -> None:
        lines = [line("scheduler.run.missed", 0, **run_fields("j1", 1, "A", GUILD))]
        (group,) = build_report(lines, since_ts=None).groups
        assert (group.runs_missed, group.missed_due_times) == (1, 1)


class TestDuplicateRuns:
    def test_a_run_started_twice_is_a_violation(self) -> None:
        """A second start of one ``run_key`` is listed with both lines and sessions, and
        counted in its group; other runs of the same job are no duplicate."""
        lines = [started(0), started(1, due=200), started(2), finished(3, "finished")]
        report = build_report(lines, since_ts=None)
        assert report.violations == 1
        (dup,) = report.duplicate_runs
        assert (dup.run_key, dup.job_id, dup.count, dup.lines) == ("j1@100", "j1", 2, [1, 3])
        assert dup.session_keys == ["s-0", "s-2"]
        (group,) = report.groups
        assert (group.runs_started, group.duplicate_runs) == (3, 1)
        text = render_text(report, source="bot.jsonl")
        assert text.index("VIOLATIONS: 1") < text.index("account A")
        assert (
            "DUPLICATE RUN       run j1@100 (job j1) started 2 times -> s-0, s-2 (lines 1, 3)"
            in text
        )
        assert "duplicates 1" in text
        assert text.rstrip().endswith("RESULT: FAIL: 1 violation(s)")

    def test_since_reports_a_duplicate_whose_last_start_is_in_the_window(self) -> None:
        """Like a duplicate delivery: a start inside the window repeating one from before
        it is reported; a duplicate wholly before the window is not."""
        lines = [started(0, due=1), started(1, due=1), started(100, due=2), started(200, due=2)]
        report = build_report(lines, since_ts=T0 + timedelta(minutes=150))
        assert [d.run_key for d in report.duplicate_runs] == ["j1@2"]
        (group,) = report.groups
        assert (group.runs_started, group.duplicate_runs) == (1, 1)

    def test_exit_status_and_json(self, tmp_path: Path) -> None:
        path = tmp_path / "bot.jsonl"
        path.write_text("\n".join([started(0), started(1)]) + "\n")
        out = io.StringIO()
        assert run_canary(path, since=None, as_json=True, out=out) == 1
        doc = json.loads(out.getvalue())
        assert doc["violations"] == 1
        assert doc["duplicate_runs"][0]["run_key"] == "j1@100"
        assert doc["groups"][0]["duplicate_runs"] == 1


class TestThroughTheEmitters:
    def test_real_lines_are_counted(self, tmp_path: Path) -> None:
        """The runner's events, written by the real pipeline, land in the job's group."""
        path = tmp_path / "bot.jsonl"
        configure_logging(json_path=path, console=False)
        fields = {"job_id": "j1", "due_at": "2026-01-01T12:00:00Z", "kind": "channel"}
        for due, result in ((100, "completed"), (200, "failed")):
            run = {**fields, "run_key": f"j1@{due}", "account": "A", "guild": GUILD}
            log_events.emit(
                log_events.SchedulerRunStarted(**run, due_count=1, late=False, session_key="s")
            )
            log_events.emit(log_events.SchedulerRunFinished(**run, result=result))
        run = {**fields, "run_key": "j1@300", "account": "A", "guild": GUILD}
        log_events.emit(log_events.SchedulerRunSkipped(**run, reason="scheduledTasks is off here"))
        log_events.emit(log_events.SchedulerRunMissed(**{**run, "run_key": "j1@400"}, due_count=6))
        reset_logging()
        out = io.StringIO()
        assert run_canary(path, since=None, as_json=True, out=out) == 0
        (group,) = json.loads(out.getvalue())["groups"]
        assert (group["account"], group["guild"]) == ("A", GUILD)
        assert group["runs_started"] == 2
        assert group["runs_finished_by_result"] == {"completed": 1, "failed": 1}
        assert (group["runs_skipped"], group["runs_missed"], group["missed_due_times"]) == (1, 1, 6)
        assert group["duplicate_runs"] == 0
