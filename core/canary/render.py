"""Text rendering of a canary report: what an operator reads before widening a rollout.

Kept apart from :mod:`core.canary.report` so the log replay there stays about finding
violations, and the wording here can change without touching it. Import
:func:`render_text` from :mod:`core.canary`, which re-exports it.
"""

from __future__ import annotations

from core.canary.models import CanaryReport, GroupSummary

__all__ = ["render_text"]


def _counts(counter: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.items()) or "none"


def _violation_lines(report: CanaryReport) -> list[str]:
    lines = [f"VIOLATIONS: {report.violations}"]
    for d in report.duplicates:
        where = ", ".join(str(x) for x in d.destinations)
        lines.append(
            f"  DUPLICATE DELIVERY  completion {d.completion_id} delivered {d.count} times"
            f" -> {where} (lines {', '.join(map(str, d.lines))})"
        )
    for r in report.duplicate_runs:
        sessions = ", ".join(str(x) for x in r.session_keys)
        lines.append(
            f"  DUPLICATE RUN       run {r.run_key} (job {r.job_id}) started {r.count} times"
            f" -> {sessions} (lines {', '.join(map(str, r.lines))})"
        )
    for h in report.hidden_fallbacks:
        relation = "its conversation" if h.matched == "conversation" else "its parent"
        lines.append(
            f"  HIDDEN FALLBACK     completion {h.completion_id} (session {h.target_session_key})"
            f" fell back to {h.destination} while binding {h.binding_id} was active on"
            f" {h.channel}/{h.account} conversation {h.bound_conversation_id}"
            f" (requester {h.requester_conversation_id} is {relation}; line {h.line})"
        )
    return lines


def _scheduled(g: GroupSummary) -> str | None:
    """The group's scheduled runs on one line, or None when it had none."""
    if not (g.runs_started or g.runs_finished_by_result or g.runs_skipped or g.runs_missed):
        return None
    return (
        f"  scheduled    started {g.runs_started}, finished: {_counts(g.runs_finished_by_result)},"
        f" skipped {g.runs_skipped}, missed {g.runs_missed}"
        f" ({g.missed_due_times} due times), duplicates {g.duplicate_runs}"
    )


def render_text(report: CanaryReport, *, source: str = "") -> str:
    """The human summary: violations first, then per-group counts, then the verdict."""
    out = [f"canary report{': ' + source if source else ''}"]
    window = report.since.isoformat() if report.since else "the whole log"
    out.append(f"window: since {window}" if report.since else f"window: {window}")
    bad = report.malformed
    numbers = ", ".join(map(str, bad.first_lines))
    listed = f" (line{'s' if bad.count > 1 else ''} {numbers})" if bad.count else ""
    out.append(
        f"lines: {report.lines_read} read, {report.events_counted} events counted,"
        f" {bad.count} malformed{listed}"
    )
    out += ["", *_violation_lines(report), ""]
    for g in report.groups:
        out.append(f"account {g.account}  guild {g.guild}")
        out.append(f"  routing      by mode: {_counts(g.resolutions_by_mode)}")
        out.append(f"               by reason: {_counts(g.resolutions_by_reason)}")
        out.append(f"  deliveries   {_counts(g.deliveries_by_path)}")
        out.append(f"  fallbacks    {g.fallbacks} ({_counts(g.fallbacks_by_reason)})")
        out.append(f"  failures     {_counts(g.failures_by_path)}")
        out.append(
            f"  bindings     bound {g.bindings_bound}, unbound {g.bindings_unbound},"
            f" expired: {_counts(g.expiries_by_reason)}"
        )
        if g.rate_limited_by_scope:
            out.append(f"  429s         {_counts(g.rate_limited_by_scope)} (incidents, by scope)")
        if g.tasks_by_outcome:
            out.append(f"  tasks        {_counts(g.tasks_by_outcome)} (failures {g.task_failures})")
        if (scheduled := _scheduled(g)) is not None:
            out.append(scheduled)
    if not report.groups:
        out.append("no routing, delivery or binding events in the window")
    out += ["", f"WEBHOOK FAILURES: {len(report.webhook_failures)}"]
    for f in report.webhook_failures:
        kind = "retryable" if f.retryable else "final"
        out.append(
            f"  completion {f.completion_id} -> {f.destination} (binding {f.binding_id}):"
            f" {f.error} [{kind}, line {f.line}]"
        )
    verdict = (
        f"FAIL: {report.violations} violation(s)" if report.violations else "OK: no violations"
    )
    out += ["", f"RESULT: {verdict}"]
    return "\n".join(out) + "\n"
