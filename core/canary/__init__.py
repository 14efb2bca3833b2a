"""The canary report: routing and delivery outcomes read back from the JSON log.

Operators run it (``python -m bot canary LOGFILE [--since 2h] [--json]``)
before widening a rollout. The log replay and the command live in
:mod:`core.canary.report`, the report's pydantic models in
:mod:`core.canary.models`, the text rendering in :mod:`core.canary.render`;
import the public names from here.
"""

from __future__ import annotations

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
from core.canary.report import build_report, parse_duration, run_canary

__all__ = [
    "CanaryReport",
    "DuplicateDelivery",
    "DuplicateRun",
    "GroupSummary",
    "HiddenFallback",
    "MalformedLines",
    "WebhookFailure",
    "build_report",
    "parse_duration",
    "render_text",
    "run_canary",
]
