"""The compact tool-call line and the streamed message it sits in."""

from __future__ import annotations

import pytest

from adapters.discord.approvals import request_text, resolved_text
from adapters.discord.tool_lines import ToolLine, TranscriptDoc, short_arguments, short_result


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ('{"timezone": "Europe/Paris"}', "timezone: Europe/Paris"),
        ("{}", ""),
        ('{"n": [1, 2], "deep": {"a": 1}}', 'n: [1, 2], deep: {"a": 1}'),
        ("not json", "not json"),
        ('{"q": "line one\\nline two"}', "q: line one line two"),
    ],
)
def test_arguments_read_at_a_glance(arguments: str, shown: str) -> None:
    assert short_arguments(arguments) == shown


def test_long_arguments_are_cut_and_markdown_stays_inert() -> None:
    shown = short_arguments('{"text": "' + "word " * 40 + '", "code": "`rm -rf` **x** _y_"}')
    assert len(shown) < 120
    assert "`" not in shown
    shown = short_arguments('{"code": "`rm -rf` **x** _y_ ||z||"}')
    assert shown == "code: 'rm -rf' \\*\\*x\\*\\* \\_y\\_ \\|\\|z\\|\\|"


def test_a_line_says_name_arguments_and_status() -> None:
    line = ToolLine("c1", "clock__get_current_time", '{"timezone": "UTC"}')
    assert line.render() == "-# 🔧 `clock__get_current_time` · timezone: UTC · …"
    line.status = "ok"
    assert line.render().endswith("· ✅ ok")
    line.status = "denied"
    assert line.render().endswith("· ⛔ denied")


def test_a_line_shows_the_result_shortened_and_inert() -> None:
    """The tool's answer follows the outcome, cut to a glance; the model still gets it all."""
    line = ToolLine("c1", "demo__roll_dice", '{"sides": 20}', "ok", "rolled a d20: 17")
    assert line.render() == "-# 🔧 `demo__roll_dice` · sides: 20 · ✅ ok → rolled a d20: 17"
    assert short_result('{"timezone": "Europe/Paris", "is_dst": false}') == (
        "timezone: Europe/Paris, is\\_dst: false"
    )
    long = short_result("**bold** `code`\n" + "word " * 50)
    assert len(long) < 120
    assert "`" not in long
    assert "\n" not in long
    assert long.startswith("\\*\\*bold\\*\\* 'code' word")


@pytest.mark.parametrize(
    ("status", "shown"),
    [("withdrawn", "↩️ withdrawn"), ("cancelled", "⏹️ cancelled"), ("waiting", "⏸️ waiting")],
)
def test_every_way_a_call_ends_has_its_words(status: str, shown: str) -> None:
    line = ToolLine("c1", "a__b", "{}", status)  # type: ignore[arg-type]
    assert shown in line.render()
    assert line.final == (status != "waiting")


def test_lines_sit_between_the_words_each_on_its_own_line() -> None:
    doc = TranscriptDoc()
    doc.add_text("Let me check.")
    doc.add_line(ToolLine("c1", "a__b", "{}"))
    doc.add_line(ToolLine("c2", "a__c", "{}"))
    doc.add_text("It is noon.")
    assert doc.render() == ("Let me check.\n-# 🔧 `a__b` · …\n-# 🔧 `a__c` · …\nIt is noon.")
    line = doc.line("c2")
    assert line is not None
    line.status = "error"
    assert "-# 🔧 `a__c` · ⚠️ error" in doc.render()


def test_approval_texts() -> None:
    asked = request_text("Scout", "clock__convert_time", '{"time": "12:00"}', 600)
    assert asked.startswith("🔐 **Scout** wants to run `clock__convert_time` (time: 12:00).")
    assert "10 min" in asked
    assert resolved_text("t", "{}", "deny", "alice") == "🔐 `t`: ⛔ denied by alice"
    assert "nobody answered" in resolved_text("t", "{}", "timeout", None)


def test_a_call_a_person_stopped_names_them() -> None:
    """A line cut by a /cancel, or a call whose reject option a person chose, says who."""
    cancelled = ToolLine("c1", "a__b", "{}", "cancelled", ended="cancelled by @alice")
    assert cancelled.render() == "-# 🔧 `a__b` · ⏹️ cancelled by @alice"
    rejected = ToolLine("c2", "rm", "", "rejected", ended="rejected by @alice: No, *never*")
    assert rejected.render() == "-# 🔧 `rm` · ⛔ rejected by @alice: No, \\*never\\*"
    assert rejected.final


def test_words_cut_off_are_marked_where_they_stop() -> None:
    doc = TranscriptDoc()
    doc.add_text("Looking at the")
    assert doc.cut_off("-# ✂️ cut off here")
    assert doc.render() == "Looking at the\n-# ✂️ cut off here"
    only_a_line = TranscriptDoc()
    only_a_line.add_line(ToolLine("c1", "a__b", "{}"))
    assert not only_a_line.cut_off("-# ✂️ cut off here")  # the line says how it ended


def test_a_cancel_names_who_on_the_request() -> None:
    assert resolved_text("t", "{}", "withdrawn", "alice", reason="cancel") == (
        "🔐 `t`: ⏹️ cancelled by @alice"
    )
    assert resolved_text("t", "{}", "withdrawn", None, reason="timed_out") == (
        "🔐 `t`: ⏹️ cancelled: no result in time"
    )
    assert "the turn moved on" in resolved_text("t", "{}", "withdrawn", None, reason="steer")
