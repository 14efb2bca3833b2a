from __future__ import annotations

import ast
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from core import log_events
from core.log_events import EVENT_FIELDS, OPTIONAL_FIELDS, LogEvent
from core.logging import REDACTED, get_logger
from tests.fixtures.source import parse

DOC = Path(__file__).resolve().parents[2] / "docs" / "log-events.md"
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
DOTTED = re.compile(r"[a-z_]+(\.[a-z_]+)+")

BINDING = {
    "binding_id": "b-1",
    "target_session_key": "agent:main:subagent:x",
    "channel": "discord",
    "account": "acct",
    "conversation_id": "thread-1",
}

_RUN = {
    "job_id": "j1",
    "run_key": "j1@1767268800",
    "due_at": "2026-01-01T12:00:00Z",
    "kind": "thread",
    "account": "acct",
}
SAMPLES: dict[str, tuple[type[log_events.Event], dict[str, Any]]] = {
    LogEvent.ROUTING_RESOLVED: (
        log_events.RoutingResolved,
        {
            "event_kind": "task_completion",
            "target_session_key": "agent:main:subagent:x",
            "mode": "bound",
            "reason": "requester-match",
            "fail_closed": True,
            "binding_id": "b-1",
            "channel": "discord",
            "account": "acct",
            "conversation_id": "thread-1",
            "requester_conversation_id": "chan-1",
        },
    ),
    LogEvent.DELIVERY_SENT: (
        log_events.DeliverySent,
        {
            "completion_id": "c-1",
            "path": "webhook",
            "mode": "bound",
            "binding_id": "b-1",
            "target_session_key": "s",
            "channel": "discord",
            "account": "acct",
            "destination": "thread-1",
        },
    ),
    LogEvent.DELIVERY_FALLBACK: (
        log_events.DeliveryFallback,
        {
            "completion_id": "c-1",
            "reason": "no-active-binding",
            "target_session_key": "s",
            "channel": "discord",
            "account": "acct",
            "requester_conversation_id": "chan-1",
            "destination": "chan-1",
        },
    ),
    LogEvent.DELIVERY_FAILED: (
        log_events.DeliveryFailed,
        {
            "completion_id": "c-1",
            "path": "webhook",
            "destination": "thread-1",
            "binding_id": "b-1",
            "error": "HTTP 500",
            "retryable": True,
        },
    ),
    LogEvent.BINDING_BOUND: (
        log_events.BindingBound,
        {
            **BINDING,
            "target_kind": "subagent",
            "parent_conversation_id": "chan-1",
            "bound_by": "user-1",
            "expires_at": T0.replace(hour=14),
        },
    ),
    LogEvent.BINDING_UNBOUND: (
        log_events.BindingUnbound,
        {**BINDING, "parent_conversation_id": "chan-1", "reason": "done"},
    ),
    LogEvent.BINDING_EXPIRED: (log_events.BindingExpired, {**BINDING, "reason": "idle-expired"}),
    LogEvent.BINDING_LIFETIME_CHANGED: (
        log_events.BindingLifetimeChanged,
        {
            **BINDING,
            "idle_timeout_ms": 7_200_000,
            "max_age_ms": 0,
            "expires_at": None,
            "actor": "user-1",
        },
    ),
    LogEvent.CONFIG_CHANGED: (
        log_events.ConfigChanged,
        {
            "key": "session.threadBindings.idleHours",
            "old": 24,
            "new": 4,
            "actor": "u",
            "scope": "global",
        },
    ),
    LogEvent.SUBAGENT_COMPLETED: (
        log_events.SubagentCompleted,
        {
            "session_key": "agent:main:subagent:x",
            "outcome": "cancelled",
            "completion_id": "agent:main:subagent:x/t1",
            "recorded": True,
            "account": "acct",
        },
    ),
    LogEvent.SCHEDULER_RUN_STARTED: (
        log_events.SchedulerRunStarted,
        {**_RUN, "due_count": 1, "late": False, "session_key": "agent:main:main"},
    ),
    LogEvent.SCHEDULER_RUN_FINISHED: (
        log_events.SchedulerRunFinished,
        {**_RUN, "result": "finished"},
    ),
    LogEvent.SCHEDULER_RUN_SKIPPED: (
        log_events.SchedulerRunSkipped,
        {**_RUN, "reason": "the previous run was still working"},
    ),
    LogEvent.SCHEDULER_RUN_MISSED: (log_events.SchedulerRunMissed, {**_RUN, "due_count": 3}),
    LogEvent.DISCORD_RATE_LIMITED: (
        log_events.DiscordRateLimited,
        {
            "scope": "user",
            "method": "PATCH",
            "route": "/webhooks/{id}/{token}/messages/{id}",
            "bucket": "b1",
            "retry_after": 1.5,
            "account": "acct",
        },
    ),
}


pytestmark = pytest.mark.usefixtures("reset_logging_after")


def emit(name: str, **overrides: Any) -> dict[str, Any]:
    event_type, kwargs = SAMPLES[name]
    with capture_logs() as logs:
        log_events.emit(event_type(**{**kwargs, **overrides}))
    (entry,) = logs
    return entry


class TestVocabulary:
    def test_every_event_has_fields_and_a_sample(self) -> None:
        """LogEvent, EVENT_FIELDS and the emitters cover the same events."""
        assert set(EVENT_FIELDS) == set(LogEvent) == set(SAMPLES)

    @pytest.mark.parametrize("name", list(LogEvent))
    def test_emitter_writes_exactly_its_fields(self, name: LogEvent) -> None:
        """Each emitter writes its event name and exactly the documented fields."""
        entry = emit(name)
        assert entry["event"] == name.value
        assert set(entry) - {"event", "log_level"} == EVENT_FIELDS[name]

    @pytest.mark.parametrize("name", list(LogEvent))
    def test_guild_is_optional(self, name: LogEvent) -> None:
        """guild is written only when passed, on top of the documented fields."""
        entry = emit(name, guild="g-1")
        assert entry["guild"] == "g-1"
        assert set(entry) - {"event", "log_level"} == EVENT_FIELDS[name] | OPTIONAL_FIELDS

    def test_event_names_are_plain_strings(self) -> None:
        """The event value is a plain str, so JSON and comparisons never see an enum."""
        assert type(emit(LogEvent.DELIVERY_SENT)["event"]) is str

    def test_callers_can_pass_their_own_logger(self) -> None:
        """A bound logger passed first carries its own fields into the event."""
        event_type, kwargs = SAMPLES[LogEvent.DELIVERY_SENT]
        with capture_logs() as logs:
            log_events.emit(event_type(**kwargs), get_logger("mine").bind(actor_task="deliver"))
        assert logs[0]["actor_task"] == "deliver"


class TestEmitters:
    def test_every_field_is_written_even_when_none(self) -> None:
        """A fallback with nothing known still writes every field, as None."""
        entry = emit(
            LogEvent.ROUTING_RESOLVED,
            target_session_key=None,
            mode="fallback",
            reason="missing-target-session",
            binding_id=None,
            channel=None,
            account=None,
            conversation_id=None,
            requester_conversation_id=None,
        )
        assert set(entry) - {"event", "log_level"} == EVENT_FIELDS[LogEvent.ROUTING_RESOLVED]
        assert entry["binding_id"] is entry["channel"] is entry["conversation_id"] is None
        assert entry["log_level"] == "info"

    def test_expires_at_is_iso_utc(self) -> None:
        """binding.bound writes a datetime expires_at as ISO-8601 UTC with Z; None stays None."""
        assert emit(LogEvent.BINDING_BOUND)["expires_at"] == "2026-01-01T14:00:00Z"
        assert emit(LogEvent.BINDING_BOUND, expires_at=None)["expires_at"] is None

    def test_fallback_is_a_warning(self) -> None:
        """Fallbacks stand out in the log: they are warnings."""
        assert emit(LogEvent.DELIVERY_FALLBACK)["log_level"] == "warning"

    def test_failure_level_follows_retryable(self) -> None:
        """A retryable failure is a warning, a final one an error."""
        assert emit(LogEvent.DELIVERY_FAILED, retryable=True)["log_level"] == "warning"
        assert emit(LogEvent.DELIVERY_FAILED, retryable=False)["log_level"] == "error"

    def test_failure_error_is_short_text(self) -> None:
        """An exception becomes one line 'Type: message' cut to 200 characters."""
        entry = emit(
            LogEvent.DELIVERY_FAILED, error=RuntimeError("line one\nline two " + "x" * 300)
        )
        assert entry["error"].startswith("RuntimeError: line one line two x")
        assert "\n" not in entry["error"]
        assert len(entry["error"]) == 200

    def test_config_change_of_a_secret_is_redacted(self) -> None:
        """old/new of a secret-looking key are never written."""
        entry = emit(
            LogEvent.CONFIG_CHANGED,
            key="channels.discord.accounts.a.token",
            old="t-old",
            new="t-new",
        )
        assert (entry["old"], entry["new"]) == (REDACTED, REDACTED)
        assert emit(LogEvent.CONFIG_CHANGED)["new"] == 4


def emitted_events() -> dict[str, set[str]]:
    """Every dotted event name the code logs directly, with its levels (from the source)."""
    levels = {"debug", "info", "warning", "error", "exception", "critical"}
    found: dict[str, set[str]] = {}
    root = Path(__file__).resolve().parents[2]
    for package in ("core", "adapters", "bot"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(parse(path)):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in levels
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and DOTTED.fullmatch(node.args[0].value)
                ):
                    continue
                found.setdefault(node.args[0].value, set()).add(node.func.attr)
    return found


def operational_rows() -> dict[str, str]:
    """``event -> level`` from the doc's "Operational events" table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Operational events", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([a-z_.]+)` \| ([a-z]+) \|", section, re.MULTILINE))


class TestDocumentation:
    def test_doc_lists_every_event_the_code_emits(self) -> None:
        """No event bypasses the vocabulary: each is a typed event or a row of the table."""
        rows = operational_rows()
        emitted = emitted_events()
        typed = {name.value for name in LogEvent}
        assert sorted(set(emitted) - typed - set(rows)) == []
        for name, levels in emitted.items():
            if name in rows:
                assert levels == {rows[name]}, name

    def test_doc_lists_no_event_nothing_emits(self) -> None:
        assert sorted(set(operational_rows()) - set(emitted_events())) == []

    def test_doc_lists_every_event(self) -> None:
        """docs/log-events.md has a section for each event name."""
        text = DOC.read_text(encoding="utf-8")
        for name in LogEvent:
            assert f"### `{name.value}`" in text

    @pytest.mark.parametrize("name", list(LogEvent))
    def test_doc_lists_every_field(self, name: LogEvent) -> None:
        """Each event's section mentions each of its fields."""
        text = DOC.read_text(encoding="utf-8")
        section = text.split(f"### `{name.value}`", 1)[1].split("\n### ", 1)[0]
        documented = set(re.findall(r"`([a-z_]+)`", section))
        assert EVENT_FIELDS[name] <= documented
