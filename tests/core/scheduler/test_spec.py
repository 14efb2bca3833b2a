"""The ``when`` of /schedule add: its grammar, its due times, its sentences and its errors.

Every test passes ``now`` itself: nothing here reads the real clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.errors import ThreadboundError
from core.scheduler.spec import (
    Spec,
    SpecError,
    check_zone,
    format_when,
    parse_when,
    relative,
)

PARIS = "Europe/Paris"
# Saturday 5 December 2026, 08:00 UTC (09:00 in Paris).
NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def parse(text: str, *, timezone: str = PARIS, now: datetime = NOW) -> Spec:
    return parse_when(text, timezone=timezone, now=now)


def fires(spec: Spec, start: datetime, count: int) -> list[datetime]:
    """The next ``count`` due times after ``start``, each asked after the one before."""
    out: list[datetime] = []
    moment = start
    for _ in range(count):
        due = spec.next_after(moment)
        assert due is not None
        out.append(due)
        moment = due
    return out


class TestGrammar:
    @pytest.mark.parametrize(
        ("text", "seconds", "normal"),
        [
            ("in 45s", 45, "in 45s"),
            ("in 20m", 1200, "in 20m"),
            ("in 2h", 7200, "in 2h"),
            ("in 1d", 86400, "in 1d"),
            ("  IN 20M  ", 1200, "in 20m"),
            ("in   020m", 1200, "in 20m"),
        ],
    )
    def test_in_is_once_relative_to_now(self, text: str, seconds: int, normal: str) -> None:
        """``in`` fixes its due time at parse: now plus the delay, in UTC."""
        spec = parse(text)
        assert (spec.kind, spec.text, spec.seconds) == ("in", normal, seconds)
        assert spec.at == NOW + timedelta(seconds=seconds)
        assert spec.at is not None
        assert spec.at.tzinfo is UTC
        assert not spec.recurring

    @pytest.mark.parametrize(
        ("text", "seconds", "normal"),
        [
            ("every 45s", 45, "every 45s"),
            ("every 30m", 1800, "every 30m"),
            ("every 2h", 7200, "every 2h"),
            ("every 1d", 86400, "every 1d"),
            ("Every 30M", 1800, "every 30m"),
        ],
    )
    def test_every_is_a_fixed_interval(self, text: str, seconds: int, normal: str) -> None:
        """``every`` recurs, first one interval after now."""
        spec = parse(text)
        assert (spec.kind, spec.text, spec.seconds, spec.at) == ("every", normal, seconds, None)
        assert spec.recurring
        assert spec.next_after(NOW) == NOW + timedelta(seconds=seconds)

    @pytest.mark.parametrize(
        ("text", "timezone", "normal", "due"),
        [
            ("2026-12-24T09:00", PARIS, "2026-12-24T09:00", utc(2026, 12, 24, 8, 0)),
            ("2026-12-24 09:00", PARIS, "2026-12-24T09:00", utc(2026, 12, 24, 8, 0)),
            ("2026-12-24t09:00:30", PARIS, "2026-12-24T09:00:30", utc(2026, 12, 24, 8, 0, 30)),
            ("2026-12-24T09:00", "UTC", "2026-12-24T09:00", utc(2026, 12, 24, 9, 0)),
            ("2026-12-24T09:00", "Asia/Tokyo", "2026-12-24T09:00", utc(2026, 12, 24, 0, 0)),
            # Summer time: Paris is UTC+2 in July.
            ("2027-07-01T09:00", PARIS, "2027-07-01T09:00", utc(2027, 7, 1, 7, 0)),
            # An explicit offset wins over the job's zone.
            ("2026-12-24T09:00+05:00", PARIS, "2026-12-24T09:00+05:00", utc(2026, 12, 24, 4, 0)),
            ("2026-12-24T09:00-0300", PARIS, "2026-12-24T09:00-03:00", utc(2026, 12, 24, 12, 0)),
            ("2026-12-24T09:00Z", PARIS, "2026-12-24T09:00Z", utc(2026, 12, 24, 9, 0)),
        ],
    )
    def test_date_time_is_once_at_that_wall_time(
        self, text: str, timezone: str, normal: str, due: datetime
    ) -> None:
        """A date-time without an offset is read in the job's zone; ``at`` is stored in UTC."""
        spec = parse(text, timezone=timezone)
        assert (spec.kind, spec.text, spec.timezone, spec.seconds) == (
            "at",
            normal,
            timezone,
            None,
        )
        assert spec.at == due
        assert spec.at is not None
        assert spec.at.utcoffset() == timedelta(0)
        assert not spec.recurring

    @pytest.mark.parametrize(
        ("text", "normal"),
        [
            ("0 9 * * 1-5", "0 9 * * 1-5"),
            ("  */15   * * * *  ", "*/15 * * * *"),
            ("0 9 * * MON-FRI", "0 9 * * MON-FRI"),
            ("30 14 1,15 * *", "30 14 1,15 * *"),
        ],
    )
    def test_cron_is_five_fields(self, text: str, normal: str) -> None:
        """A 5-field cron expression recurs, its whitespace collapsed."""
        spec = parse(text)
        assert (spec.kind, spec.text, spec.timezone, spec.seconds, spec.at) == (
            "cron",
            normal,
            PARIS,
            None,
            None,
        )
        assert spec.recurring

    def test_zone_name_is_stored_as_iana_spells_it(self) -> None:
        """A zone typed in the wrong case is found, and kept in its proper spelling."""
        assert parse("0 9 * * *", timezone="europe/paris").timezone == PARIS
        assert check_zone("utc").key == "UTC"

    def test_now_must_be_aware(self) -> None:
        """A naive ``now`` is a programming error, not a user's: ValueError."""
        with pytest.raises(ValueError, match="timezone-aware"):
            parse_when("in 20m", timezone=PARIS, now=datetime(2026, 12, 5, 8))  # noqa: DTZ001


class TestNextAfter:
    @pytest.mark.parametrize("text", ["in 20m", "2026-12-24T09:00"])
    def test_once_jobs_are_due_once(self, text: str) -> None:
        """A once-job's only due time is ``at``; after it, nothing."""
        spec = parse(text)
        assert spec.at is not None
        assert spec.next_after(NOW) == spec.at
        assert spec.next_after(spec.at - timedelta(microseconds=1)) == spec.at
        assert spec.next_after(spec.at) is None
        assert spec.next_after(spec.at + timedelta(days=1)) is None

    @pytest.mark.parametrize(
        ("moment", "expected"),
        [
            (utc(2026, 12, 5, 8, 0), utc(2026, 12, 5, 8, 30)),  # at the anchor: one step on
            (utc(2026, 12, 5, 8, 29, 59), utc(2026, 12, 5, 8, 30)),
            (utc(2026, 12, 5, 8, 30), utc(2026, 12, 5, 9, 0)),  # on a due time: strictly after
            (utc(2026, 12, 5, 10, 47), utc(2026, 12, 5, 11, 0)),  # late: back on the grid
            (utc(2026, 12, 9, 8, 1), utc(2026, 12, 9, 8, 30)),
            (utc(2026, 12, 5, 7, 0), utc(2026, 12, 5, 8, 30)),  # before the anchor: k = 1
        ],
    )
    def test_every_is_anchored_at_the_start(self, moment: datetime, expected: datetime) -> None:
        """Due times are anchor + k * interval (k >= 1), the first strictly after the moment."""
        spec = parse("every 30m")
        assert spec.next_after(moment, anchor=NOW) == expected

    def test_every_anchor_defaults_to_the_moment(self) -> None:
        """Without an anchor, the next run is one interval after the moment."""
        spec = parse("every 45s")
        moment = utc(2026, 12, 5, 10, 47, 13)
        assert spec.next_after(moment) == moment + timedelta(seconds=45)

    def test_every_accepts_any_aware_zone_and_answers_in_utc(self) -> None:
        """Moments in other offsets are the same instants; the answer is UTC."""
        spec = parse("every 1h")
        paris_anchor = NOW.astimezone(check_zone(PARIS))
        due = spec.next_after(NOW + timedelta(minutes=5), anchor=paris_anchor)
        assert due == utc(2026, 12, 5, 9, 0)
        assert due is not None
        assert due.tzinfo is UTC

    @pytest.mark.parametrize(
        ("start", "expected"),
        [
            # Spring forward on Sunday 29 March 2026: 09:00 local is 08:00 UTC, then 07:00 UTC.
            (
                utc(2026, 3, 27, 12, 0),
                [utc(2026, 3, 28, 8, 0), utc(2026, 3, 29, 7, 0), utc(2026, 3, 30, 7, 0)],
            ),
            # Fall back on Sunday 25 October 2026: 07:00 UTC, then 08:00 UTC.
            (
                utc(2026, 10, 23, 12, 0),
                [utc(2026, 10, 24, 7, 0), utc(2026, 10, 25, 8, 0), utc(2026, 10, 26, 8, 0)],
            ),
        ],
    )
    def test_cron_keeps_local_time_across_dst(
        self, start: datetime, expected: list[datetime]
    ) -> None:
        """``0 9 * * *`` in Paris stays at 09:00 local time when the clocks change."""
        spec = parse("0 9 * * *", now=start)
        due = fires(spec, start, 3)
        assert due == expected
        assert {format_when(d, PARIS)[-5:] for d in due} == {"09:00"}

    def test_weekday_cron_skips_the_weekend(self) -> None:
        """From Friday 09:00 Paris, ``0 9 * * 1-5`` next runs on Monday."""
        spec = parse("0 9 * * 1-5")
        friday = utc(2026, 12, 4, 8, 0)  # Fri 4 Dec, 09:00 Paris
        assert fires(spec, friday, 3) == [
            utc(2026, 12, 7, 8, 0),
            utc(2026, 12, 8, 8, 0),
            utc(2026, 12, 9, 8, 0),
        ]
        assert [format_when(d, PARIS) for d in fires(spec, NOW, 2)] == [
            "Mon 7 Dec 09:00",
            "Tue 8 Dec 09:00",
        ]

    def test_cron_is_strictly_after(self) -> None:
        """A moment exactly on a fire time gets the next one."""
        spec = parse("0 9 * * *", timezone="UTC")
        assert spec.next_after(utc(2026, 12, 6, 9, 0)) == utc(2026, 12, 7, 9, 0)
        assert spec.next_after(utc(2026, 12, 6, 8, 59, 59)) == utc(2026, 12, 6, 9, 0)

    def test_fixed_hour_runs_once_when_the_clocks_go_back(self) -> None:
        """02:30 happens twice in Paris on 25 October 2026; the job runs at the first only."""
        spec = parse("30 2 * * *", now=utc(2026, 10, 24, 12, 0))
        assert fires(spec, utc(2026, 10, 24, 12, 0), 2) == [
            utc(2026, 10, 25, 0, 30),  # 02:30 CEST
            utc(2026, 10, 26, 1, 30),  # 02:30 CET the next day, not 02:30 CET the same night
        ]
        # Asked during the repeated hour, after the first 02:30: the next day.
        assert spec.next_after(utc(2026, 10, 25, 1, 10)) == utc(2026, 10, 26, 1, 30)

    def test_skipped_time_runs_when_the_clocks_resume(self) -> None:
        """02:30 does not exist in Paris on 29 March 2026; the job runs at 03:00 instead."""
        spec = parse("30 2 * * *", now=utc(2026, 3, 28, 12, 0))
        assert spec.next_after(utc(2026, 3, 28, 12, 0)) == utc(2026, 3, 29, 1, 0)

    def test_wildcard_hour_keeps_elapsed_time_when_the_clocks_go_back(self) -> None:
        """``*/30 * * * *`` runs every 30 real minutes through the repeated hour."""
        spec = parse("*/30 * * * *", now=utc(2026, 10, 25, 0, 15))
        assert fires(spec, utc(2026, 10, 25, 0, 15), 4) == [
            utc(2026, 10, 25, 0, 30),
            utc(2026, 10, 25, 1, 0),
            utc(2026, 10, 25, 1, 30),
            utc(2026, 10, 25, 2, 0),
        ]

    def test_naive_moment_is_refused(self) -> None:
        """Due times are compared as instants: a naive moment is a programming error."""
        with pytest.raises(ValueError, match="timezone-aware"):
            parse("every 30m").next_after(datetime(2026, 12, 5, 8))  # noqa: DTZ001


class TestMinSpacing:
    @pytest.mark.parametrize(
        ("text", "spacing"),
        [
            ("every 45s", 45),
            ("every 2h", 7200),
            ("*/5 * * * *", 300),
            ("* * * * *", 60),
            ("0 9 * * 1-5", 86400),
            ("0 9 * * *", 86400),
            ("0 9 * * 1", 7 * 86400),
            ("0,10 9 * * *", 600),
            ("0 9 1 * *", 28 * 86400),  # February is the shortest month
            ("in 20m", None),
            ("2026-12-24T09:00", None),
        ],
    )
    def test_min_spacing(self, text: str, spacing: int | None) -> None:
        """The shortest gap between two runs; once-jobs have none."""
        assert parse(text).min_spacing_seconds() == spacing

    def test_cron_spacing_ignores_the_zone(self) -> None:
        """Measured in wall time: the same in every zone, whatever the clocks do."""
        assert {
            parse("0 9 * * *", timezone=zone).min_spacing_seconds()
            for zone in ("UTC", PARIS, "America/New_York", "Australia/Lord_Howe")
        } == {86400}


class TestDescribe:
    @pytest.mark.parametrize(
        ("text", "timezone", "now", "sentence"),
        [
            (
                "0 9 * * 1-5",
                PARIS,
                NOW,
                "Runs every weekday at 09:00 Europe/Paris; next run Mon 7 Dec 09:00 (in 2 days)",
            ),
            (
                "every 30m",
                "UTC",
                utc(2026, 12, 6, 12, 0),
                "Runs every 30 minutes; next run Sun 6 Dec 12:30 UTC (in 30 minutes)",
            ),
            (
                "2026-12-24T09:00",
                PARIS,
                utc(2026, 12, 5, 14, 0),
                "Runs once at Thu 24 Dec 09:00 Europe/Paris (in 18 days).",
            ),
            (
                "in 20m",
                "UTC",
                utc(2026, 12, 6, 11, 42),
                "Runs once in 20 minutes, at Sun 6 Dec 12:02 UTC.",
            ),
            ("in 1h", "UTC", NOW, "Runs once in 1 hour, at Sat 5 Dec 09:00 UTC."),
            ("every 1d", "UTC", NOW, "Runs every day; next run Sun 6 Dec 08:00 UTC (in 1 day)"),
            (
                "every 45s",
                PARIS,
                NOW,
                "Runs every 45 seconds; next run Sat 5 Dec 09:00 Europe/Paris (in 45 seconds)",
            ),
            (
                "0 9 * * *",
                PARIS,
                NOW,
                "Runs every day at 09:00 Europe/Paris; next run Sun 6 Dec 09:00 (in 1 day)",
            ),
            (
                "0 9 * * 1",
                PARIS,
                NOW,
                "Runs every Monday at 09:00 Europe/Paris; next run Mon 7 Dec 09:00 (in 2 days)",
            ),
            (
                "30 18 * * sun,6",
                "UTC",
                NOW,
                "Runs every Saturday and Sunday at 18:30 UTC; next run Sat 5 Dec 18:30 "
                "(in 10 hours)",
            ),
            (
                "*/15 * * * *",
                PARIS,
                NOW,
                "Runs every 15 minutes; next run Sat 5 Dec 09:15 Europe/Paris (in 15 minutes)",
            ),
            (
                "0 */6 * * *",
                "UTC",
                NOW,
                "Runs every 6 hours; next run Sat 5 Dec 12:00 UTC (in 4 hours)",
            ),
            (
                "0 9 1 * *",
                PARIS,
                NOW,
                'Runs on the cron schedule "0 9 1 * *"; next run Fri 1 Jan 09:00 Europe/Paris '
                "(in 27 days)",
            ),
            (
                "*/7 * * * *",
                "UTC",
                NOW,
                'Runs on the cron schedule "*/7 * * * *"; next run Sat 5 Dec 08:07 UTC '
                "(in 7 minutes)",
            ),
        ],
    )
    def test_sentence(self, text: str, timezone: str, now: datetime, sentence: str) -> None:
        """The confirmation names the rule, the next run in the job's zone, and how soon."""
        assert parse(text, timezone=timezone, now=now).describe(now) == sentence


class TestErrors:
    @pytest.mark.parametrize(
        ("text", "message"),
        [
            (
                "",
                'say when the job runs, e.g. "in 20m", "every 1d", "2026-12-24T09:00" '
                'or "0 9 * * 1-5"',
            ),
            (
                "   ",
                'say when the job runs, e.g. "in 20m", "every 1d", "2026-12-24T09:00" '
                'or "0 9 * * 1-5"',
            ),
            (
                "in 20x",
                '"in 20x" is not a duration: use a number and s, m, h or d, e.g. "in 20m"',
            ),
            (
                "every 0m",
                '"every 0m" is no interval: give a positive number, e.g. "every 30m"',
            ),
            (
                "61 9 * * *",
                '"61 9 * * *" is not a valid cron expression (minute hour day month weekday), '
                'e.g. "0 9 * * 1-5"',
            ),
            (
                "tomorrow",
                '"tomorrow" is not a schedule: use "in 20m", "every 1d", a date-time like '
                '2026-12-24T09:00 or a cron expression like "0 9 * * 1-5"',
            ),
            (
                "2026-01-01T09:00",
                "2026-01-01T09:00 is in the past; give a time to come, e.g. 2026-12-24T09:00",
            ),
            (
                "0 0 9 * * 1-5",
                '"0 0 9 * * 1-5" is not a 5-field cron expression (minute hour day month '
                'weekday): it has 6 fields, e.g. "0 9 * * 1-5"',
            ),
        ],
    )
    def test_exact_sentence(self, text: str, message: str) -> None:
        """The messages a user sees, word for word."""
        with pytest.raises(SpecError) as caught:
            parse(text)
        assert str(caught.value) == message
        assert isinstance(caught.value, ThreadboundError)

    @pytest.mark.parametrize(
        ("text", "fragment"),
        [
            ("in 20", '"in 20" is not a duration'),
            ("in 20 m", '"in 20 m" is not a duration'),
            ("in -5m", '"in -5m" is not a duration'),
            ("in", '"in" is not a duration'),
            ("every day", '"every day" is not a duration'),
            ("every 1.5h", '"every 1.5h" is not a duration'),
            ("in 0s", '"in 0s" is no delay'),
            ("every 00h", '"every 0h" is no interval'),
            ("every 3651d", '"every 3651d" is too long: give at most 3650 days'),
            ("in 99999999999999999999d", "is too long"),
            ("0 24 * * *", "is not a valid cron expression"),
            ("0 9 * * 8", "is not a valid cron expression"),
            ("*/0 * * * *", "is not a valid cron expression"),
            ("H 9 * * *", "is not a valid cron expression"),  # croniter's hashed minute
            ("R 9 * * *", "is not a valid cron expression"),  # croniter's random minute
            ("0 9 * *", "it has 4 fields"),
            ("0 0 9 * * 1-5 2027", "it has 7 fields"),
            ("0 0 31 2 *", "matches no date, so it would never run"),
            ("2026-12-24", "is not a date-time: write YYYY-MM-DDTHH:MM"),
            ("2026-12-24T9:00", "is not a date-time"),
            ("2026-02-30T09:00", '"2026-02-30T09:00" is not a valid date-time'),
            ("2026-12-24T25:00", "is not a valid date-time"),
            ("2026-12-05T09:00", "2026-12-05T09:00 is in the past"),  # == now in Paris
            ("2026-12-05T08:00Z", "2026-12-05T08:00Z is in the past"),
            ("2026-12-24T09:00+25:00", "is not a valid date-time"),
            ("tomorrow at 9", '"tomorrow at 9" is not a schedule'),
            ("@daily", '"@daily" is not a schedule'),
            ("next friday", '"next friday" is not a schedule'),
        ],
    )
    def test_names_the_bad_part(self, text: str, fragment: str) -> None:
        """Each refusal quotes what was typed and shows what would work."""
        with pytest.raises(SpecError) as caught:
            parse(text)
        assert fragment in str(caught.value)
        assert "e.g." in str(caught.value) or "like" in str(caught.value)

    def test_time_the_clocks_skip_is_refused(self) -> None:
        """02:30 never happens in Paris on 28 March 2027: say so rather than guess."""
        with pytest.raises(SpecError) as caught:
            parse("2027-03-28T02:30")
        assert str(caught.value) == (
            "2027-03-28T02:30 does not exist in Europe/Paris (the clocks skip it); "
            "give another time, e.g. 2027-03-28T03:30"
        )

    def test_example_date_is_never_in_the_past(self) -> None:
        """After 24 December the example moves to the next year's."""
        with pytest.raises(SpecError, match=r"e\.g\. 2027-12-24T09:00$"):
            parse("2026-01-01T09:00", now=utc(2026, 12, 30, 0, 0))

    def test_long_input_is_cut_short(self) -> None:
        """A paste cannot make the error message as long as itself."""
        with pytest.raises(SpecError) as caught:
            parse("x" * 500)
        assert len(str(caught.value)) < 250
        assert caught.value.text == "x" * 500

    @pytest.mark.parametrize("zone", ["Mars/Base", "", "Europe", "../etc/passwd", "/etc/passwd"])
    def test_unknown_zone(self, zone: str) -> None:
        """An unknown zone is named, with an example of a good one."""
        expected = f"unknown time zone {zone!r}; use an IANA name such as Europe/Paris"
        with pytest.raises(SpecError) as caught:
            check_zone(zone)
        assert str(caught.value) == expected
        with pytest.raises(SpecError) as caught:
            parse("0 9 * * *", timezone=zone)
        assert str(caught.value) == expected

    def test_unknown_zone_exact_sentence(self) -> None:
        with pytest.raises(SpecError) as caught:
            parse("in 20m", timezone="Mars/Base")
        assert str(caught.value) == (
            "unknown time zone 'Mars/Base'; use an IANA name such as Europe/Paris"
        )


class TestHelpers:
    @pytest.mark.parametrize(
        ("moment", "timezone", "shown"),
        [
            (utc(2026, 12, 7, 8, 0), PARIS, "Mon 7 Dec 09:00"),
            (utc(2026, 12, 7, 8, 0), "UTC", "Mon 7 Dec 08:00"),
            (utc(2026, 12, 31, 23, 30), PARIS, "Fri 1 Jan 00:30"),
            (utc(2026, 7, 14, 22, 5), "America/New_York", "Tue 14 Jul 18:05"),
        ],
    )
    def test_format_when(self, moment: datetime, timezone: str, shown: str) -> None:
        """A short English date and wall time in the given zone."""
        assert format_when(moment, timezone) == shown

    @pytest.mark.parametrize(
        ("seconds", "words"),
        [
            (0, "now"),
            (0.5, "now"),
            (-3, "now"),
            (1, "in 1 second"),
            (45, "in 45 seconds"),
            (59.9, "in 59 seconds"),
            (60, "in 1 minute"),
            (119, "in 1 minute"),
            (1200, "in 20 minutes"),
            (3600, "in 1 hour"),
            (3 * 3600 + 59 * 60, "in 3 hours"),
            (86400, "in 1 day"),
            (2 * 86400 + 3600, "in 2 days"),
            (400 * 86400, "in 400 days"),
        ],
    )
    def test_relative(self, seconds: float, words: str) -> None:
        """The largest whole unit, rounded down, singular for one."""
        assert relative(seconds) == words
