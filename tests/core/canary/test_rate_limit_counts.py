"""The canary counts Discord's 429 incidents by scope (``discord.rate_limited``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from core.canary import build_report, render_text

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def limited(minutes: float, scope: str, account: str = "A") -> str:
    stamp = (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")
    fields: dict[str, Any] = {
        "event": "discord.rate_limited",
        "level": "warning",
        "timestamp": stamp,
        "scope": scope,
        "method": "PATCH",
        "route": "/webhooks/{id}/{token}/messages/{id}",
        "bucket": "b1",
        "retry_after": 1.5,
        "account": account,
    }
    return json.dumps(fields)


def test_429_incidents_are_counted_by_scope_per_account() -> None:
    lines = [limited(0, "user"), limited(1, "user"), limited(2, "global"), limited(3, "user", "B")]
    report = build_report(lines, since_ts=None)
    by_account = {g.account: g.rate_limited_by_scope for g in report.groups}
    assert by_account == {"A": {"global": 1, "user": 2}, "B": {"user": 1}}
    text = render_text(report)
    assert "429s         global 1, user 2 (incidents, by scope)" in text
