"""The ``when`` of a scheduled job: read once, then asked for due times.

``/schedule add`` takes one free-text option. It is read here with no clock and
no I/O of its own: the caller passes ``now``, so the grammar is testable to the
second, and gets a :class:`Spec` that names its next due time after any moment,
explains itself in one sentence, and says how close together its runs can come.
Whether that spacing is allowed is the caller's question (it knows the config).

The grammar, case-insensitive, with surrounding whitespace ignored:

* ``in 20m``: once, that long after ``now`` (units s, m, h, d);
* ``2026-12-24T09:00``: once, at that wall time in the job's zone (seconds and a
  space for the ``T`` are accepted; an explicit offset wins over the zone);
* ``every 30m``: at a fixed interval, counted from the job's start;
* ``0 9 * * 1-5``: a 5-field cron expression, read in the job's zone, so a job
  at 09:00 stays at 09:00 local time across daylight-saving changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import pairwise
from typing import Any, Final, Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import (  # type: ignore[import-untyped]  # croniter ships no type hints
    CroniterBadDateError,
    CroniterError,
    croniter,
)

from core.errors import ThreadboundError

__all__ = [
    "Kind",
    "Spec",
    "SpecError",
    "check_zone",
    "format_when",
    "parse_when",
    "relative",
]

Kind = Literal["in", "at", "every", "cron"]

_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_WORDS: Final = {"s": "second", "m": "minute", "h": "hour", "d": "day"}
# Ten years: far beyond any sensible job, and far below datetime's overflow.
_MAX_DAYS: Final = 3650
_MAX_SECONDS: Final = _MAX_DAYS * 86400
_DURATION: Final = re.compile(r"([0-9]+)([smhd])", re.IGNORECASE)
_DATE_TIME: Final = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[T ]([0-9]{2}:[0-9]{2}(?::[0-9]{2})?)"
    r"(Z|[+-][0-9]{2}:?[0-9]{2})?",
    re.IGNORECASE,
)
_DATE_LIKE: Final = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}")
_CRON_FIELD: Final = re.compile(r"[0-9A-Za-z*?/,#-]+")
_LETTERS: Final = re.compile(r"[A-Za-z]+")
_DAY_NAMES: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTH_NAMES: Final = (
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
)  # fmt: skip
# Letters a cron field may hold: names, and croniter's L, W, H (hashed) and R (random).
# H and R are let through here only so that they are refused as cron, not as gibberish.
_CRON_LETTERS: Final = frozenset({*_DAY_NAMES, *_MONTH_NAMES, "l", "w", "lw", "h", "r"})
_NONSTANDARD: Final = frozenset({"h", "r"})
_DAY_WORDS: Final = (
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
)  # fmt: skip
_WEEKDAY_ABBR: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTH_ABBR: Final = (
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
)  # fmt: skip
# A fixed Monday, naive: the spacing of a cron expression is measured in wall time
# from here, so the answer is the same whatever day it is asked and whatever the zone.
_SPACING_REFERENCE: Final = datetime(2026, 1, 5)  # noqa: DTZ001
_SPACING_SAMPLE: Final = 50
_CRON_EXAMPLE: Final = '"0 9 * * 1-5"'
_SHOWN_CHARS: Final = 80


class SpecError(ThreadboundError):
    """The ``when`` of a job cannot be used; one sentence says what is wrong, with an example.

    Args:
        message: the sentence shown to the user as it is.
        text: the spec as it was given.
    """

    def __init__(self, message: str, *, text: str = "") -> None:
        self.text = text
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Spec:
    """A parsed ``when``: what kind of schedule, and enough to compute every due time.

    Attributes:
        kind: ``in`` and ``at`` run once; ``every`` and ``cron`` recur.
        text: the spec normalised (``"every 30m"``, ``"0 9 * * 1-5"``), to store and show.
        timezone: the IANA zone its wall times are read and shown in.
        seconds: the delay of ``in``, the interval of ``every``; ``None`` otherwise.
        at: the due time of a once-job, aware UTC, fixed at parse time so that a
            restart does not move it; ``None`` for recurring jobs.
    """

    kind: Kind
    text: str
    timezone: str
    seconds: int | None = None
    at: datetime | None = None

    @property
    def recurring(self) -> bool:
        """Whether a run leaves the job alive for another one."""
        return self.kind in ("every", "cron")

    def next_after(self, moment: datetime, anchor: datetime | None = None) -> datetime | None:
        """The first due time strictly after ``moment``, aware UTC; ``None`` when none is left.

        An ``every`` job's due times are ``anchor + k * seconds`` for k >= 1, so they
        stay on the grid of the job's start however late a run was; ``anchor``
        defaults to ``moment`` (a job created now first runs one interval from now).
        A cron job at a fixed hour runs once when the clocks go back, not twice.
        """
        moment = _utc(moment, "moment")
        if self.kind in ("in", "at"):
            return self.at if self.at is not None and self.at > moment else None
        if self.kind == "every":
            step = timedelta(seconds=self._positive_seconds())
            start = moment if anchor is None else _utc(anchor, "anchor")
            elapsed = moment - start
            k = 1 if elapsed < timedelta(0) else elapsed // step + 1
            return start + k * step
        return _next_cron(self.text, check_zone(self.timezone), moment)

    def min_spacing_seconds(self) -> int | None:
        """The shortest gap between two runs, for the caller to hold against its minimum.

        A cron expression's gaps are measured over a sample of consecutive runs in
        wall time, so a daily job counts as 86400 s even across a clock change.
        Once-jobs have no spacing: ``None``.
        """
        if self.kind == "every":
            return self._positive_seconds()
        if self.kind != "cron":
            return None
        fires: list[datetime] = []
        iterator = croniter(self.text, _SPACING_REFERENCE)
        try:
            for _ in range(_SPACING_SAMPLE):
                fires.append(cast(datetime, iterator.get_next(datetime)))
        except CroniterBadDateError:
            pass  # it stops firing: the runs found so far are all there is
        gaps = [int((later - earlier).total_seconds()) for earlier, later in pairwise(fires)]
        return min(gaps) if gaps else None

    def describe(self, now: datetime) -> str:
        """The sentence that confirms a job to its creator, with times in the job's zone."""
        now = _utc(now, "now")
        zone = self.timezone
        if self.kind in ("in", "at"):
            due = self.at if self.at is not None else now
            shown = f"{format_when(due, zone)} {zone}"
            if self.kind == "in":
                return f"Runs once in {self._amount_words()}, at {shown}."
            return f"Runs once at {shown} ({relative((due - now).total_seconds())})."
        if self.kind == "every":
            rule, zoned = f"every {self._amount_words(every=True)}", False
        else:
            rule, zoned = _cron_words(self.text, zone)
        upcoming = self.next_after(now)
        if upcoming is None:
            return f"Runs {rule}; no run is left to come"
        when = format_when(upcoming, zone)
        if not zoned:
            when = f"{when} {zone}"
        return f"Runs {rule}; next run {when} ({relative((upcoming - now).total_seconds())})"

    def _positive_seconds(self) -> int:
        if self.seconds is None or self.seconds <= 0:
            raise ValueError(f"a {self.kind!r} spec needs a positive number of seconds")
        return self.seconds

    def _amount_words(self, *, every: bool = False) -> str:
        """``20 minutes`` from ``in 20m``: the amount as the user wrote it, not rounded."""
        match = _DURATION.search(self.text)
        if match is None:
            return relative(self._positive_seconds()).removeprefix("in ")
        amount, word = int(match[1]), _UNIT_WORDS[match[2].lower()]
        if amount == 1:
            return word if every else f"1 {word}"
        return f"{amount} {word}s"


def check_zone(name: str) -> ZoneInfo:
    """The zone called ``name``; a :class:`SpecError` that names it when there is none.

    A name in the wrong case (``europe/paris``, ``utc``) finds its zone, whose
    ``key`` is the name as IANA spells it: people type zones from memory.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ValueError: a path-like name ("../x", "/etc"); OSError: a directory ("Europe").
        pass
    spelled = _zone_names().get(name.lower())
    if spelled is not None:
        return ZoneInfo(spelled)
    raise SpecError(f"unknown time zone {name!r}; use an IANA name such as Europe/Paris", text=name)


@cache
def _zone_names() -> dict[str, str]:
    """Every IANA name by its lower case; read from disk once, and only after a miss."""
    return {key.lower(): key for key in available_timezones()}


def format_when(moment: datetime, timezone: str) -> str:
    """``Mon 7 Dec 09:00`` in ``timezone``, in English whatever the process's locale."""
    local = _utc(moment, "moment").astimezone(check_zone(timezone))
    weekday, month = _WEEKDAY_ABBR[local.weekday()], _MONTH_ABBR[local.month - 1]
    return f"{weekday} {local.day} {month} {local:%H:%M}"


def relative(seconds: float) -> str:
    """``in 2 days``: the largest whole unit, rounded down, so it never promises too early."""
    if not seconds >= 1:  # also catches NaN
        return "now"
    whole = int(seconds)
    for unit in ("d", "h", "m"):
        if whole >= _UNIT_SECONDS[unit]:
            return _plural(whole // _UNIT_SECONDS[unit], _UNIT_WORDS[unit])
    return _plural(whole, "second")


def parse_when(text: str, *, timezone: str, now: datetime) -> Spec:
    """Read the ``when`` option of ``/schedule add``; :class:`SpecError` says what is wrong.

    Args:
        text: the option as typed.
        timezone: the IANA zone wall times are read in (the caller's default or the
            user's choice); checked first, since every form but ``in`` depends on it.
        now: the current time, aware; ``in`` jobs are fixed relative to it, and a
            date-time that is not after it is refused.
    """
    zone = check_zone(timezone)
    timezone = zone.key
    now = _utc(now, "now")
    example = _example_date_time(now, zone)
    given = " ".join(text.split())
    if not given:
        raise SpecError(
            f'say when the job runs, e.g. "in 20m", "every 1d", "{example}" or {_CRON_EXAMPLE}',
            text=text,
        )
    head, _, rest = given.partition(" ")
    if head.lower() in ("in", "every"):
        return _parse_duration(head.lower(), rest, timezone=timezone, now=now)
    match = _DATE_TIME.fullmatch(given)
    if match is not None:
        return _parse_at(match, timezone=timezone, zone=zone, now=now, example=example)
    if _DATE_LIKE.match(given):
        raise SpecError(
            f'"{_shown(given)}" is not a date-time: write YYYY-MM-DDTHH:MM, e.g. {example}',
            text=text,
        )
    fields = given.split(" ")
    if _looks_like_cron(fields):
        return _parse_cron(fields, timezone=timezone, now=now)
    raise SpecError(
        f'"{_shown(given)}" is not a schedule: use "in 20m", "every 1d", a date-time like '
        f"{example} or a cron expression like {_CRON_EXAMPLE}",
        text=text,
    )


def _parse_duration(head: str, rest: str, *, timezone: str, now: datetime) -> Spec:
    sample = "in 20m" if head == "in" else "every 30m"
    given = f"{head} {rest}".strip()
    match = _DURATION.fullmatch(rest)
    if match is None:
        raise SpecError(
            f'"{_shown(given)}" is not a duration: use a number and s, m, h or d, e.g. "{sample}"',
            text=given,
        )
    digits, unit = match[1].lstrip("0") or "0", match[2].lower()
    normal = f"{head} {digits}{unit}"
    if digits == "0":
        what = "delay" if head == "in" else "interval"
        raise SpecError(
            f'"{normal}" is no {what}: give a positive number, e.g. "{sample}"', text=given
        )
    # Compare digit counts before converting: a pasted run of digits must not be parsed whole.
    seconds = int(digits) * _UNIT_SECONDS[unit] if len(digits) <= 12 else _MAX_SECONDS + 1
    if seconds > _MAX_SECONDS:
        raise SpecError(
            f'"{_shown(normal)}" is too long: give at most {_MAX_DAYS} days, e.g. "{sample}"',
            text=given,
        )
    if head == "in":
        return Spec("in", normal, timezone, seconds, now + timedelta(seconds=seconds))
    return Spec("every", normal, timezone, seconds)


def _parse_at(
    match: re.Match[str], *, timezone: str, zone: ZoneInfo, now: datetime, example: str
) -> Spec:
    date_part, time_part, offset = match[1], match[2], match[3]
    given = match[0]
    offset = "" if offset is None else _normal_offset(offset)
    normal = f"{date_part}T{time_part}{offset}"
    try:
        parsed = datetime.fromisoformat(normal)
    except ValueError:
        raise SpecError(
            f'"{given}" is not a valid date-time: check the day, hour and offset, e.g. {example}',
            text=given,
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone)
        wall = parsed.replace(tzinfo=None)
        if parsed.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
            later = (wall + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
            raise SpecError(
                f"{normal} does not exist in {timezone} (the clocks skip it); "
                f"give another time, e.g. {later}",
                text=given,
            )
    due = parsed.astimezone(UTC)
    if due <= now:
        raise SpecError(f"{normal} is in the past; give a time to come, e.g. {example}", text=given)
    return Spec("at", normal, timezone, None, due)


def _normal_offset(offset: str) -> str:
    if offset.upper() == "Z":
        return "Z"
    digits = offset[1:].replace(":", "")
    return f"{offset[0]}{digits[:2]}:{digits[2:]}"


def _looks_like_cron(fields: list[str]) -> bool:
    """Whether the words are meant as cron, so a wrong field count is called that.

    Plain words ("tomorrow at 9") are not: only numbers, ``*``, cron punctuation,
    and day or month names, with at least one number or ``*``.
    """
    if len(fields) < 2 or not any(ch.isdigit() or ch == "*" for ch in "".join(fields)):
        return False
    return all(
        _CRON_FIELD.fullmatch(field)
        and all(word.lower() in _CRON_LETTERS for word in _LETTERS.findall(field))
        for field in fields
    )


def _parse_cron(fields: list[str], *, timezone: str, now: datetime) -> Spec:
    expression = " ".join(fields)
    if len(fields) != 5:
        raise SpecError(
            f'"{_shown(expression)}" is not a 5-field cron expression '
            f"(minute hour day month weekday): it has {len(fields)} fields, e.g. {_CRON_EXAMPLE}",
            text=expression,
        )
    invalid = SpecError(
        f'"{expression}" is not a valid cron expression (minute hour day month weekday), '
        f"e.g. {_CRON_EXAMPLE}",
        text=expression,
    )
    # Hashed (H) and random (R) fields are croniter's own; a random minute would
    # also differ between two reads of the same stored text.
    if any(word.lower() in _NONSTANDARD for word in _LETTERS.findall(expression)):
        raise invalid
    try:
        croniter(expression, _SPACING_REFERENCE)
    except (CroniterError, ValueError, TypeError, KeyError):
        raise invalid from None
    spec = Spec("cron", expression, timezone)
    if spec.next_after(now) is None:
        raise SpecError(
            f'"{expression}" matches no date, so it would never run: use one that does, '
            f"e.g. {_CRON_EXAMPLE}",
            text=expression,
        )
    return spec


def _next_cron(expression: str, zone: ZoneInfo, moment: datetime) -> datetime | None:
    # A job at a fixed hour (vixie cron's rule) runs once in the hour the clocks
    # repeat; croniter alone would give both 02:30s. Wildcard hours keep both.
    fixed_hour = "*" not in expression.split()[1]
    iterator: Any = croniter(expression, moment.astimezone(zone))
    try:
        for _ in range(8):  # at most one repeated wall time is skipped per clock change
            due = cast(datetime, iterator.get_next(datetime)).astimezone(UTC)
            if due <= moment or (fixed_hour and _repeated(due, zone)):
                continue
            return due
    except CroniterBadDateError:
        return None
    return None


def _repeated(moment: datetime, zone: ZoneInfo) -> bool:
    """Whether ``moment`` is the second pass of a wall time the clocks went back over."""
    local = moment.astimezone(zone)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def _cron_words(expression: str, zone: str) -> tuple[str, bool]:
    """The rule of a cron job in words where the shape is common; and whether it names the zone.

    Anything less common is quoted as it is: a wrong paraphrase would be worse
    than the expression itself.
    """
    minute, hour, day, month, weekday = expression.lower().split()
    quoted = f'on the cron schedule "{expression}"', False
    if day not in ("*", "?") or month != "*":
        return quoted
    if hour == "*" and weekday in ("*", "?"):
        if minute == "*":
            return "every minute", False
        step = _step(minute, 60)
        if step is not None:
            return _every(step, "minute"), False
    if minute == "0" and weekday in ("*", "?"):
        step = 1 if hour == "*" else _step(hour, 24)
        if step is not None:
            return _every(step, "hour"), False
    if minute.isdigit() and hour.isdigit():
        days = _weekday_words(weekday)
        if days is not None:
            return f"{days} at {int(hour):02d}:{int(minute):02d} {zone}", True
    return quoted


def _step(field: str, whole: int) -> int | None:
    """N of ``*/N`` when it divides the hour or the day evenly, so "every N" is true."""
    match = re.fullmatch(r"\*/([0-9]+)", field)
    if match is None:
        return None
    step = int(match[1])
    return step if 0 < step < whole and whole % step == 0 else None


def _every(step: int, word: str) -> str:
    return f"every {word}" if step == 1 else f"every {step} {word}s"


def _weekday_words(field: str) -> str | None:
    if field in ("*", "?"):
        return "every day"
    if field in ("1-5", "mon-fri"):
        return "every weekday"
    days: set[int] = set()
    for part in field.split(","):
        if part.isdigit() and int(part) <= 7:
            days.add(int(part) % 7)
        elif part in _DAY_NAMES:
            days.add(_DAY_NAMES.index(part))
        else:
            return None
    names = [_DAY_WORDS[d] for d in sorted(days, key=lambda d: (d - 1) % 7)]  # Monday first
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"every {listed}"


def _example_date_time(now: datetime, zone: ZoneInfo) -> str:
    """The next 24 December, 09:00: an example date-time that is never in the past."""
    local = now.astimezone(zone)
    year = local.year
    if datetime(year, 12, 24, 9, tzinfo=zone) <= local:
        year += 1
    return f"{year}-12-24T09:00"


def _plural(amount: int, word: str) -> str:
    return f"in {amount} {word}" if amount == 1 else f"in {amount} {word}s"


def _shown(text: str) -> str:
    """The user's text for an error message, cut short so a paste cannot flood it."""
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[: _SHOWN_CHARS - 1]}…"


def _utc(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {moment.isoformat()}")
    return moment.astimezone(UTC)
