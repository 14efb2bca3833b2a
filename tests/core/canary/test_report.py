from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core import log_events
from core.canary import build_report, parse_duration, render_text, run_canary
from core.logging import bind_context, configure_logging, get_logger, reset_logging

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
SESSION = "agent:main:subagent:x"


pytestmark = pytest.mark.usefixtures("reset_logging_after")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def line(event: str, minutes: float, **fields: Any) -> str:
    stamp = at(minutes).isoformat().replace("+00:00", "Z")
    return json.dumps({"event": event, "level": "info", "timestamp": stamp, **fields})


def bound(minutes: float, binding_id: str = "b-1", **overrides: Any) -> str:
    fields = {
        "binding_id": binding_id,
        "target_session_key": SESSION,
        "target_kind": "subagent",
        "channel": "discord",
        "account": "A",
        "conversation_id": "thread-1",
        "parent_conversation_id": "chan-1",
        "bound_by": "u",
        "expires_at": None,
    }
    return line("binding.bound", minutes, **{**fields, **overrides})


def ended(minutes: float, event: str = "binding.unbound", binding_id: str = "b-1") -> str:
    return line(
        event,
        minutes,
        binding_id=binding_id,
        target_session_key=SESSION,
        channel="discord",
        account="A",
        conversation_id="thread-1",
        parent_conversation_id="chan-1",
        reason="idle-expired" if event == "binding.expired" else "done",
    )


def fallback(minutes: float, completion_id: str = "c-9", **overrides: Any) -> str:
    fields = {
        "completion_id": completion_id,
        "reason": "no-requester-match",
        "target_session_key": SESSION,
        "channel": "discord",
        "account": "A",
        "requester_conversation_id": "chan-1",
        "destination": "chan-1",
    }
    return line("delivery.fallback", minutes, **{**fields, **overrides})


def sent(minutes: float, completion_id: str, destination: str = "thread-1", **kw: Any) -> str:
    fields = {
        "completion_id": completion_id,
        "path": "webhook",
        "mode": "bound",
        "binding_id": "b-1",
        "target_session_key": SESSION,
        "channel": "discord",
        "account": "A",
        "destination": destination,
    }
    return line("delivery.sent", minutes, **{**fields, **kw})


def resolved(
    minutes: float, mode: str = "bound", reason: str = "requester-match", **kw: Any
) -> str:
    return line("routing.resolved", minutes, mode=mode, reason=reason, account="A", **kw)


class TestParseDuration:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("90s", timedelta(seconds=90)),
            ("30m", timedelta(minutes=30)),
            ("2h", timedelta(hours=2)),
            ("7d", timedelta(days=7)),
            ("1h30m", timedelta(hours=1, minutes=30)),
            (" 1W ", timedelta(weeks=1)),
        ],
    )
    def test_valid(self, text: str, expected: timedelta) -> None:
        """Units s, m, h, d, w parse alone and combined, case-insensitively."""
        assert parse_duration(text) == expected

    @pytest.mark.parametrize("text", ["", "5", "5x", "m30", "30m1h", "-1h", "0m", "1.5h"])
    def test_invalid(self, text: str) -> None:
        """Anything else fails with a message that shows the accepted forms."""
        with pytest.raises(ValueError, match="invalid duration"):
            parse_duration(text)


class TestBuildReport:
    def test_duplicate_and_hidden_fallback_are_violations(self) -> None:
        """A completion sent twice and a fallback past an active binding are both found."""
        report = build_report(
            [bound(0), sent(1, "c-1"), sent(2, "c-1", "chan-1", path="bot"), fallback(3)],
            since_ts=None,
        )
        assert report.violations == 2
        (dup,) = report.duplicates
        assert (dup.completion_id, dup.count, dup.destinations, dup.lines) == (
            "c-1",
            2,
            ["thread-1", "chan-1"],
            [2, 3],
        )
        (hidden,) = report.hidden_fallbacks
        assert (hidden.completion_id, hidden.binding_id, hidden.matched) == ("c-9", "b-1", "parent")

    def test_fallback_from_the_bound_thread_itself_is_hidden(self) -> None:
        """A requester equal to the bound conversation is matched exactly."""
        report = build_report(
            [bound(0), fallback(1, requester_conversation_id="thread-1")], since_ts=None
        )
        assert [(h.binding_id, h.matched) for h in report.hidden_fallbacks] == [
            ("b-1", "conversation")
        ]

    def test_clean_log(self) -> None:
        """Bound deliveries and honest fallbacks are no violation."""
        report = build_report(
            [
                resolved(0, mode="fallback", reason="no-active-binding"),
                fallback(0.5, "c-0", reason="no-active-binding"),
                bound(1),
                resolved(2),
                sent(2, "c-1"),
                fallback(3, "c-2", requester_conversation_id="elsewhere"),
            ],
            since_ts=None,
        )
        assert report.violations == 0
        (group,) = report.groups
        assert group.resolutions_by_mode == {"bound": 1, "fallback": 1}
        assert group.resolutions_by_reason == {"no-active-binding": 1, "requester-match": 1}
        assert group.deliveries_by_path == {"webhook": 1}
        assert group.fallbacks == 2
        assert group.fallbacks_by_reason == {"no-active-binding": 1, "no-requester-match": 1}

    @pytest.mark.parametrize("event", ["binding.unbound", "binding.expired"])
    def test_fallback_after_the_binding_ended_is_not_hidden(self, event: str) -> None:
        """Once unbound or expired, the binding no longer hides anything."""
        report = build_report([bound(0), ended(1, event), fallback(2)], since_ts=None)
        assert report.hidden_fallbacks == []

    def test_fallback_after_expires_at_is_not_hidden(self) -> None:
        """A binding past its hard deadline is not active even before the sweeper says so."""
        deadline = at(5).isoformat()
        report = build_report([bound(0, expires_at=deadline), fallback(6)], since_ts=None)
        assert report.hidden_fallbacks == []
        report = build_report([bound(0, expires_at=deadline), fallback(4)], since_ts=None)
        assert len(report.hidden_fallbacks) == 1

    def test_accounts_are_isolated(self) -> None:
        """A binding on account A does not hide a fallback on account B for the same ids."""
        report = build_report([bound(0), fallback(1, account="B")], since_ts=None)
        assert report.hidden_fallbacks == []

    def test_other_sessions_and_channels_are_isolated(self) -> None:
        """Only the same session on the same channel can hide a fallback."""
        lines = [bound(0), fallback(1, target_session_key="other"), fallback(2, channel="slack")]
        assert build_report(lines, since_ts=None).hidden_fallbacks == []

    def test_replay_follows_timestamps_not_file_order(self) -> None:
        """An unbind written earlier in the file but stamped later is replayed later."""
        report = build_report([ended(5), fallback(2), bound(0)], since_ts=None)
        assert [h.binding_id for h in report.hidden_fallbacks] == ["b-1"]

    def test_malformed_lines_are_counted(self) -> None:
        """Bad lines are counted with their first five line numbers and never stop the report."""
        lines = [
            "not json",
            "[1, 2]",
            json.dumps({"event": "x"}),
            json.dumps({"timestamp": "2026-01-01T00:00:00Z"}),
            json.dumps({"event": "x", "timestamp": "yesterday"}),
            "",
            "{broken",
            sent(1, "c-1"),
        ]
        report = build_report(lines, since_ts=None)
        assert report.malformed.count == 6
        assert report.malformed.first_lines == [1, 2, 3, 4, 5]
        assert report.lines_read == 7
        assert report.groups[0].deliveries_by_path == {"webhook": 1}

    def test_since_limits_counts_but_not_binding_state(self) -> None:
        """Old lines are not counted, yet a binding bound long ago still hides a fallback."""
        lines = [
            bound(0),
            sent(1, "old-dup"),
            sent(2, "old-dup"),
            resolved(3),
            sent(100, "straddle"),
            resolved(200),
            sent(201, "straddle"),
            fallback(202),
        ]
        report = build_report(lines, since_ts=at(150))
        assert report.events_counted == 3
        assert [d.completion_id for d in report.duplicates] == ["straddle"]
        assert [h.binding_id for h in report.hidden_fallbacks] == ["b-1"]
        (group,) = report.groups
        assert group.resolutions_by_mode == {"bound": 1}
        assert group.bindings_bound == 0

    def test_groups_by_account_and_guild(self) -> None:
        """Counts are split per (account, guild), with '-' for a missing value."""
        lines = [
            resolved(0, guild="g1"),
            resolved(1, guild="g2"),
            line("routing.resolved", 2, mode="fallback", reason="no-active-binding"),
            ended(3, "binding.expired"),
        ]
        report = build_report(lines, since_ts=None)
        assert [(g.account, g.guild) for g in report.groups] == [
            ("-", "-"),
            ("A", "-"),
            ("A", "g1"),
            ("A", "g2"),
        ]
        assert report.groups[1].expiries_by_reason == {"idle-expired": 1}

    def test_a_line_with_only_its_binding_is_grouped_as_the_binding(self) -> None:
        """A delivery.failed that names its binding but no account or guild is counted
        under the account and guild the binding was bound with, even after it ended."""
        fail = {"destination": "thread-1", "binding_id": "b-1", "error": "HTTP 400"}
        lines = [
            bound(0, guild="g1"),
            ended(1),
            line("delivery.failed", 2, completion_id=None, path="bot", retryable=False, **fail),
            line("delivery.failed", 3, path="bot", retryable=False, account="B", guild="g2"),
        ]
        report = build_report(lines, since_ts=None)
        assert [(g.account, g.guild, g.failures_by_path) for g in report.groups] == [
            ("A", "g1", {"bot": 1}),
            ("B", "g2", {"bot": 1}),
        ]

    def test_a_group_with_nothing_counted_is_left_out(self) -> None:
        """Events the report does not count (a config change) make no empty group."""
        lines = [
            line("config.changed", 0, key="k", old=None, new=True, actor="u", scope="g1"),
            line("binding.lifetime_changed", 1, binding_id="b-1"),
            resolved(2),
        ]
        report = build_report(lines, since_ts=None)
        assert [(g.account, g.guild) for g in report.groups] == [("A", "-")]
        assert report.events_counted == 3
        text = render_text(report)
        assert "account -  guild -" not in text
        assert text.count("account ") == 1
        only_config = build_report(lines[:1], since_ts=None)
        assert only_config.groups == []
        assert "no routing, delivery or binding events in the window" in render_text(only_config)

    def test_webhook_failures_are_listed(self) -> None:
        """delivery.failed on the webhook path is listed; bot failures are only counted."""
        fail = {"destination": "thread-1", "binding_id": "b-1", "error": "HTTP 500", "account": "A"}
        lines = [
            line("delivery.failed", 0, completion_id="c-1", path="webhook", retryable=True, **fail),
            line("delivery.failed", 1, completion_id="c-1", path="bot", retryable=False, **fail),
        ]
        report = build_report(lines, since_ts=None)
        assert [(f.completion_id, f.retryable) for f in report.webhook_failures] == [("c-1", True)]
        assert report.groups[0].failures_by_path == {"bot": 1, "webhook": 1}
        assert report.violations == 0

    def test_text_puts_violations_first(self) -> None:
        """The text summary names the violations before the counts."""
        report = build_report(
            [bound(0), sent(1, "c-1"), sent(2, "c-1"), fallback(3)], since_ts=None
        )
        text = render_text(report, source="bot.jsonl")
        violations = text.index("VIOLATIONS: 2")
        assert violations < text.index("account A")
        assert "DUPLICATE DELIVERY  completion c-1" in text
        assert "HIDDEN FALLBACK     completion c-9" in text
        assert "binding b-1" in text
        assert text.rstrip().endswith("RESULT: FAIL: 2 violation(s)")


def emit_session(path: Path, *, duplicate: bool, hidden: bool) -> None:
    """Write a log through the real configuration and emitters."""
    configure_logging(json_path=path, console=False)
    log = get_logger("core.delivery")
    binding = {
        "binding_id": "b-42",
        "target_session_key": SESSION,
        "channel": "discord",
        "account": "A",
        "conversation_id": "thread-1",
    }
    sent = {
        "path": "webhook",
        "mode": "bound",
        "binding_id": "b-42",
        "target_session_key": SESSION,
        "channel": "discord",
        "account": "A",
        "destination": "thread-1",
    }
    with bind_context(session_key=SESSION, account="A", guild="g-1"):
        log_events.emit(
            log_events.BindingBound(
                **binding,
                target_kind="subagent",
                parent_conversation_id="chan-1",
                bound_by="user-1",
                expires_at=None,
            ),
            log,
        )
        log_events.emit(
            log_events.RoutingResolved(
                event_kind="task_completion",
                mode="bound",
                reason="requester-match",
                fail_closed=True,
                requester_conversation_id="chan-1",
                **binding,
            ),
            log,
        )
        log_events.emit(log_events.DeliverySent(completion_id="c-1", **sent), log)
        if duplicate:
            log_events.emit(
                log_events.DeliverySent(completion_id="c-1", **{**sent, "path": "bot"}), log
            )
        if hidden:
            log_events.emit(
                log_events.DeliveryFallback(
                    completion_id="c-2",
                    reason="no-requester-match",
                    target_session_key=SESSION,
                    channel="discord",
                    account="A",
                    requester_conversation_id="chan-1",
                    destination="chan-1",
                ),
                log,
            )
        else:
            log_events.emit(
                log_events.BindingUnbound(
                    **binding, parent_conversation_id="chan-1", reason="done"
                ),
                log,
            )
    reset_logging()


class TestRunCanary:
    def test_end_to_end_violations(self, tmp_path: Path) -> None:
        """Emitted through the real pipeline, a duplicate and a hidden fallback exit 1."""
        path = tmp_path / "bot.jsonl"
        emit_session(path, duplicate=True, hidden=True)
        out = io.StringIO()
        assert run_canary(path, since=None, as_json=False, out=out) == 1
        text = out.getvalue()
        assert "completion c-1 delivered 2 times" in text
        assert "completion c-2" in text
        assert "binding b-42" in text
        assert "account A  guild g-1" in text

    def test_end_to_end_clean(self, tmp_path: Path) -> None:
        """A clean session exits 0 and says so."""
        path = tmp_path / "bot.jsonl"
        emit_session(path, duplicate=False, hidden=False)
        out = io.StringIO()
        assert run_canary(path, since=None, as_json=False, out=out) == 0
        assert "VIOLATIONS: 0" in out.getvalue()
        assert "RESULT: OK" in out.getvalue()

    def test_json_output_parses(self, tmp_path: Path) -> None:
        """--json prints one JSON document with the same data."""
        path = tmp_path / "bot.jsonl"
        emit_session(path, duplicate=True, hidden=True)
        with path.open("a") as log:  # an admin's change: no account, no guild, not counted
            log.write(line("config.changed", 9, key="k", old=None, new=True, actor="u") + "\n")
        out = io.StringIO()
        assert run_canary(path, since=None, as_json=True, out=out) == 1
        doc = json.loads(out.getvalue())
        assert doc["violations"] == 2
        assert doc["duplicates"][0]["completion_id"] == "c-1"
        assert doc["hidden_fallbacks"][0]["binding_id"] == "b-42"
        assert doc["groups"][0]["account"] == "A"
        assert all(group["account"] != "-" for group in doc["groups"])  # no empty group

    def test_since_is_relative_to_now(self, tmp_path: Path) -> None:
        """--since counts only lines newer than now minus the duration."""
        path = tmp_path / "bot.jsonl"
        path.write_text("\n".join([sent(0, "c-1"), sent(1, "c-1"), sent(50, "c-2")]) + "\n")
        out = io.StringIO()
        code = run_canary(path, since=timedelta(minutes=30), as_json=True, out=out, now=at(60))
        doc = json.loads(out.getvalue())
        assert (code, doc["events_counted"], doc["duplicates"]) == (0, 1, [])

    def test_unreadable_file_exits_2(self, tmp_path: Path) -> None:
        """A missing file is one line of explanation and status 2."""
        out = io.StringIO()
        assert run_canary(tmp_path / "missing.jsonl", since=None, as_json=False, out=out) == 2
        assert out.getvalue().count("\n") == 1
        assert "cannot read" in out.getvalue()


def completed(outcome: str, completion_id: str, *, recorded: bool = True) -> None:
    """One ``subagent.completed`` line, through the real emitter."""
    log_events.emit(
        log_events.SubagentCompleted(
            session_key=SESSION,
            outcome=outcome,
            completion_id=completion_id,
            recorded=recorded,
            account="A",
            guild="g-1",
        )
    )


class TestTaskOutcomes:
    def test_a_persons_cancel_or_reject_is_no_failure(self, tmp_path: Path) -> None:
        """Tasks are counted by outcome; only failed and timed-out ones are failures, and
        none is a violation: a person's /cancel or reject is what they chose."""
        path = tmp_path / "bot.jsonl"
        configure_logging(json_path=path, console=False)
        completed("cancelled", "s/1")
        completed("rejected", "s/2")
        completed("completed", "s/3")
        completed("failed", "s/4")
        completed("timed_out", "s/5")
        completed("cancelled", "s/1", recorded=False)  # a later pass found it recorded
        reset_logging()
        out = io.StringIO()
        assert run_canary(path, since=None, as_json=True, out=out) == 0
        doc = json.loads(out.getvalue())
        (group,) = doc["groups"]
        assert (group["account"], group["guild"]) == ("A", "g-1")
        assert group["tasks_by_outcome"] == {
            "cancelled": 1,
            "completed": 1,
            "failed": 1,
            "rejected": 1,
            "timed_out": 1,
        }
        assert group["task_failures"] == 2
        assert doc["violations"] == 0

        text = io.StringIO()
        assert run_canary(path, since=None, as_json=False, out=text) == 0
        assert (
            "  tasks        cancelled 1, completed 1, failed 1, rejected 1, timed_out 1"
            " (failures 2)"
        ) in text.getvalue()
        assert "RESULT: OK" in text.getvalue()

    def test_only_cancels_count_no_failure(self) -> None:
        """A log of cancelled tasks alone reports zero failures."""
        lines = [
            line("subagent.completed", 0, outcome="cancelled", recorded=True, account="A"),
            line("subagent.completed", 1, outcome="rejected", recorded=True, account="A"),
        ]
        (group,) = build_report(lines, since_ts=None).groups
        assert group.task_failures == 0
        assert group.failures_by_path == {}
