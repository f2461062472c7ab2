"""Schedules: cron and rate expressions that start executions, and when each tick falls — pure, no clock.

A definitions folder may hold files whose top level is ``schedules:`` (and nothing else)::

    schedules:
      nightly-report: {definition: report, cron: "0 2 * * *", timezone: Europe/Berlin, context: {kind: daily}}
      heartbeat: {definition: ping, rate: 15m, catch_up: once, overlap: skip}

This module validates them (every issue at once, each with its path, like definitions), computes the ticks
of an expression and decides what a late sweep does with the ticks it finds due (``catch_up``). Storing
and firing them is the runtime's job (``durastate.runtime.schedules``); the time always comes in as an
argument.

**cron** has the five classic fields (minute, hour, day of month, month, day of week; ``*``, numbers,
``a-b`` ranges, ``/step``, lists, month and weekday names, ``7`` for Sunday; ``@hourly`` … ``@yearly``),
read as wall-clock time in ``timezone`` (an IANA name, default UTC). When both day fields are restricted
(neither starts with ``*``) a day matching either runs, as in cron. Daylight-saving time: every matching
local time fires once — a time repeated when clocks go back fires at its first occurrence, a time skipped
when clocks go forward fires at the end of the gap (``30 2 * * *`` in Europe/Berlin fires at 03:00 on the
last Sunday of March). For a fixed interval in real time use **rate**: a duration (``90s``, ``15m``,
``1d``), ticking at whole multiples of it since 1970-01-01 00:00 UTC, so its ticks do not depend on when
the schedule was stored.

**catch_up** says what one sweep does when it finds ticks due (after downtime, or a pause): ``skip`` drops
the ticks that were missed and starts the latest one only if it is at most ``grace`` (default 1h) late;
``once`` starts one execution for the latest tick however late, standing for all the missed ones. Either
way at most one execution starts per sweep and per schedule. **overlap** ``skip`` starts none while the
schedule's previous execution still runs (the runtime checks that; ``allow``, the default, does not).

**start_at** / **end_at** bound the ticks: an ISO 8601 time (``2026-03-01T09:00``, read in ``timezone``
unless it carries an offset); no tick falls before ``start_at`` or after ``end_at`` (both inclusive). After
``end_at`` the schedule arms no timer. **jitter** (a duration) delays each tick's firing by an offset in
``[0, jitter]`` derived from the schedule record's secret and the tick (:func:`jitter_offset`): the same
tick always gets the same offset — a re-run, a second sweeper or a replayed hop agree — and different
schedules spread out. It must be shorter than the shortest gap between two ticks, so the ticks still fire
in order. The execution a tick starts keeps the tick's own time in its id (jitter moves when, not which).
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import itertools
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from durastate.engine.definition import _read_text, parse_document
from durastate.engine.durations import format_duration, parse_duration
from durastate.engine.ids import CHILD_SEPARATOR, SCHEDULE_RECORD
from durastate.engine.values import check_json
from durastate.errors import DefinitionError, InvalidValue, ScheduleError

__all__ = [
    "DEFAULT_GRACE",
    "TICK_FORMAT",
    "Cron",
    "ScheduleSpec",
    "TickPlan",
    "is_schedule_document",
    "is_schedule_file",
    "jitter_offset",
    "load_schedules",
    "manual_execution_id",
    "parse_cron",
    "parse_schedules",
    "plan_ticks",
    "schedule_name",
    "schedule_record_id",
    "tick_execution_id",
]

DEFAULT_GRACE = 3600.0
"""How late (seconds) a tick may be handled and still run under ``catch_up: skip``."""
TICK_FORMAT = "%Y%m%dT%H%M%SZ"
"""A tick's UTC time in the id of the execution it starts: ``nightly-report~20261130T010000Z``."""
MAX_SEARCH_DAYS = 3700
"""How far (about ten years) a cron search looks before deciding an expression has no further tick
(``0 0 29 2 *`` waits eight years across 2100, which is not a leap year)."""
MAX_DST_SHIFT = timedelta(hours=3)
"""More than any zone's clock change that repeats time (a backward search starts this far past ``now``)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_WEEKDAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_FIELDS: tuple[tuple[str, int, int, Mapping[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _WEEKDAYS),
)
_CRON_HELP = ('five fields "minute hour day-of-month month day-of-week", e.g. "0 2 * * *" or "*/15 9-17 * * '
              'MON-FRI", or @hourly/@daily/@weekly/@monthly/@yearly')


# -- cron ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cron:
    """A parsed five-field cron expression (weekdays 0-6, Sunday 0)."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    """The day-of-month field starts with ``*`` (then only the weekday field restricts days)."""
    any_weekday: bool

    def day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom = d.day in self.days
        dow = d.isoweekday() % 7 in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return dow
        if self.any_weekday:
            return dom
        return dom or dow

    def next_local(self, start: datetime) -> datetime | None:
        """The first matching wall-clock minute at or after ``start`` (naive), or None within ten years."""
        day = start.date()
        first = start.replace(second=0, microsecond=0)
        for _ in range(MAX_SEARCH_DAYS):
            if self.day_matches(day):
                for h in self.hours:
                    for m in self.minutes:
                        candidate = datetime(day.year, day.month, day.day, h, m)
                        if candidate >= first:
                            return candidate
            day += timedelta(days=1)
        return None

    def prev_local(self, end: datetime) -> datetime | None:
        """The last matching wall-clock minute at or before ``end`` (naive), or None within ten years."""
        day = end.date()
        for _ in range(MAX_SEARCH_DAYS):
            if self.day_matches(day):
                for h in reversed(self.hours):
                    for m in reversed(self.minutes):
                        candidate = datetime(day.year, day.month, day.day, h, m)
                        if candidate <= end:
                            return candidate
            day -= timedelta(days=1)
        return None


def parse_cron(text: str) -> Cron:
    """Parse a five-field cron expression (or an ``@daily``-style macro); ValueError saying what is wrong."""
    source = " ".join(str(text).split())
    expanded = _MACROS.get(source.lower(), source)
    if expanded.startswith("@"):
        raise ValueError(f"unknown cron macro {source!r} (known: {', '.join(_MACROS)})")
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise ValueError(f"cron {source!r} has {len(parts)} field(s); use {_CRON_HELP}")
    values = [_cron_field(part, name, lo, hi, names) for part, (name, lo, hi, names) in zip(parts, _FIELDS,
                                                                                         strict=True)]
    weekdays = frozenset(0 if d == 7 else d for d in values[4])
    cron = Cron(source, tuple(sorted(values[0])), tuple(sorted(values[1])), frozenset(values[2]),
                frozenset(values[3]), weekdays, parts[2].startswith("*"), parts[4].startswith("*"))
    if not cron.any_day and cron.any_weekday and not any(
            d <= _longest_month(m) for m in cron.months for d in cron.days):
        raise ValueError(f"cron {source!r} never matches: no month of {sorted(cron.months)} has day "
                         f"{min(cron.days)}")
    return cron


def _longest_month(month: int) -> int:
    return calendar.monthrange(2000, month)[1]  # 2000 is a leap year: February has 29 days


def _cron_field(text: str, name: str, lo: int, hi: int, names: Mapping[str, int]) -> set[int]:
    def value(token: str) -> int:
        token = token.strip().lower()
        if token in names:
            return names[token]
        if not token.isdigit():
            allowed = f", or one of {', '.join(n.upper() for n in names)}" if names else ""
            raise ValueError(f"cron {name} field: {token!r} is not a number from {lo} to {hi}{allowed}")
        n = int(token)
        if not lo <= n <= hi:
            raise ValueError(f"cron {name} field: {n} is out of range {lo}-{hi}")
        return n

    out: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ValueError(f"cron {name} field {text!r} has an empty list item")
        span, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"cron {name} field: step {step_text!r} in {part!r} must be a whole number >= 1")
            step = int(step_text)
        if span == "*":
            first, last = lo, hi
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = value(a), value(b)
            if first > last:
                raise ValueError(f"cron {name} field: range {span!r} runs backwards (write {b}-{a}, or a list)")
        else:
            first = value(span)
            last = hi if slash else first
        out.update(range(first, last + 1, step))
    return out


# -- time zones and resolution ---------------------------------------------------------------------------
def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}; use an IANA name such as UTC, Europe/Berlin or "
                         "America/New_York (if it is one, this system has no zone database: "
                         "pip install tzdata)") from None


def _local(ts: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(ts, UTC).astimezone(zone).replace(tzinfo=None)


def _exists(naive: datetime, zone: ZoneInfo) -> bool:
    return datetime.fromtimestamp(naive.replace(tzinfo=zone).timestamp(), zone).replace(tzinfo=None) == naive


def _resolve(naive: datetime, zone: ZoneInfo) -> float:
    """The instant of a wall-clock time: its first occurrence if clocks went back over it, the end of the gap
    if clocks skipped it. Non-decreasing in ``naive``, which is what lets the searches filter by instant."""
    probe = naive
    for _ in range(2 * 24 * 60):  # the longest gap on record is a whole day (Samoa, 2011)
        if _exists(probe, zone):
            return probe.replace(tzinfo=zone, fold=0).timestamp()
        probe += timedelta(minutes=1)
    return naive.replace(tzinfo=zone).timestamp()


# -- the spec --------------------------------------------------------------------------------------------
class ScheduleSpec(BaseModel):
    """One schedule: which definition to start, when, with what context, and what to do when late."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    definition: str = Field(min_length=1, max_length=128)
    cron: str | None = None
    rate: str | None = None
    timezone: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    catch_up: Literal["skip", "once"] = "skip"
    overlap: Literal["allow", "skip"] = "allow"
    grace: str | None = None
    start_at: str | None = None
    end_at: str | None = None
    jitter: str | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        return None if v is None else parse_cron(v).text

    @field_validator("start_at", "end_at", mode="before")
    @classmethod
    def _instant(cls, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, datetime):
            return v.isoformat()
        if not isinstance(v, str):
            raise ValueError(f"must be an ISO 8601 time such as 2026-03-01T09:00 or 2026-03-01T09:00+01:00, "
                             f"got {v!r}")
        try:
            datetime.fromisoformat(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an ISO 8601 time; write e.g. 2026-03-01T09:00 (read in the "
                             "schedule's timezone) or 2026-03-01T09:00+01:00") from None
        return v

    @field_validator("rate", "grace", "jitter", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ValueError(f"must be a duration such as 90s, 15m or 1d, got {v!r}")
        seconds = parse_duration(v)
        return format_duration(seconds) if seconds == round(seconds) else str(v)

    @field_validator("rate")
    @classmethod
    def _rate(cls, v: str | None) -> str | None:
        if v is not None:
            seconds = parse_duration(v)
            if seconds < 1 or seconds != round(seconds):
                raise ValueError(f"rate {v!r} must be a whole number of seconds, at least 1s")
        return v

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str | None) -> str | None:
        if v is not None:
            _zone(v)
        return v

    @field_validator("context")
    @classmethod
    def _context(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_json(v, "context")
        return v

    @model_validator(mode="after")
    def _one_expression(self) -> ScheduleSpec:
        if (self.cron is None) == (self.rate is None):
            raise ValueError("give exactly one of cron (e.g. \"0 2 * * *\") or rate (e.g. 15m)")
        if self.rate is not None and self.timezone is not None:
            raise ValueError("timezone applies to cron only (a rate is a fixed interval in real time)")
        if self.start_epoch is not None and self.end_epoch is not None and self.end_epoch < self.start_epoch:
            raise ValueError(f"end_at {self.end_at} is before start_at {self.start_at}")
        if self.jitter_seconds:
            gap = self.shortest_gap()
            if gap is not None and self.jitter_seconds >= gap:
                raise ValueError(f"jitter {self.jitter} must be shorter than the gap between two ticks "
                                 f"({format_duration(gap)}), so the ticks still fire in order")
        return self

    # -- derived ---------------------------------------------------------------------------------------
    @cached_property
    def parsed_cron(self) -> Cron | None:
        return None if self.cron is None else parse_cron(self.cron)

    @cached_property
    def zone(self) -> ZoneInfo:
        return _zone(self.timezone or "UTC")

    @cached_property
    def rate_seconds(self) -> float | None:
        return None if self.rate is None else parse_duration(self.rate)

    @cached_property
    def grace_seconds(self) -> float:
        return DEFAULT_GRACE if self.grace is None else parse_duration(self.grace)

    @cached_property
    def jitter_seconds(self) -> float:
        return 0.0 if self.jitter is None else parse_duration(self.jitter)

    @cached_property
    def start_epoch(self) -> float | None:
        return None if self.start_at is None else self.instant(self.start_at)

    @cached_property
    def end_epoch(self) -> float | None:
        return None if self.end_at is None else self.instant(self.end_at)

    def instant(self, text: str) -> float:
        """Epoch seconds of an ISO 8601 time, read in the schedule's ``timezone`` unless it has an offset
        (ValueError if it is none)."""
        dt = datetime.fromisoformat(text)
        return (dt if dt.tzinfo is not None else dt.replace(tzinfo=self.zone)).timestamp()

    def shortest_gap(self) -> float | None:
        """The shortest time between two ticks: the rate, or the least gap among a cron's ticks over a
        sample year (from 2026-01-01, its daylight-saving changes included). None: fewer than two ticks."""
        if self.rate_seconds is not None:
            return self.rate_seconds
        sample = self._raw_ticks(datetime(2026, 1, 1, tzinfo=UTC).timestamp(),
                                 datetime(2027, 1, 1, tzinfo=UTC).timestamp(), 2000)
        gaps = [b - a for a, b in itertools.pairwise(sample)]
        return min(gaps) if gaps else None

    def fire_at(self, tick: float, secret: str | None, name: str) -> float:
        """When ``tick`` fires: the tick plus its :func:`jitter_offset` (the tick itself without jitter)."""
        if not self.jitter_seconds or secret is None:
            return tick
        return tick + jitter_offset(secret, name, tick, self.jitter_seconds)

    def expression(self) -> str:
        """How a person reads it: ``cron 0 2 * * * (Europe/Berlin)`` or ``every 15m``."""
        if self.cron is not None:
            return f"cron {self.cron} ({self.timezone or 'UTC'})"
        return f"every {self.rate}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in the schedule's record (``ScheduleSpec(**d)`` round-trips)."""
        return self.model_dump(mode="json", exclude_none=True, exclude_defaults=True)

    def spec_hash(self) -> str:
        """A short digest of :meth:`to_dict`: a sync rewrites a stored schedule only when it changed."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # -- ticks -----------------------------------------------------------------------------------------
    def next_tick(self, after: float) -> float | None:
        """The first tick strictly after ``after`` (epoch seconds) inside the ``start_at``/``end_at``
        window, or None if there is none."""
        start, end = self.start_epoch, self.end_epoch
        t = self._raw_next(after if start is None else max(after, start - 1))
        while t is not None and start is not None and t < start:  # ticks are at least 1 s apart
            t = self._raw_next(t)
        return None if t is None or (end is not None and t > end) else t

    def latest_tick(self, at_or_before: float) -> float | None:
        """The last tick at or before ``at_or_before`` inside the window, or None if there is none."""
        end = self.end_epoch
        t = self._raw_latest(at_or_before if end is None else min(at_or_before, end))
        return None if t is None or (self.start_epoch is not None and t < self.start_epoch) else t

    def _raw_next(self, after: float) -> float | None:
        if self.rate_seconds is not None:
            period = self.rate_seconds
            return (after // period + 1) * period
        cron = self.parsed_cron
        assert cron is not None
        start = _local(after, self.zone).replace(second=0, microsecond=0)
        while True:
            naive = cron.next_local(start)
            if naive is None:
                return None
            at = _resolve(naive, self.zone)
            if at > after:
                return at
            start = naive + timedelta(minutes=1)

    def _raw_latest(self, at_or_before: float) -> float | None:
        if self.rate_seconds is not None:
            period = self.rate_seconds
            return (at_or_before // period) * period
        cron = self.parsed_cron
        assert cron is not None
        end = _local(at_or_before, self.zone) + MAX_DST_SHIFT
        while True:
            naive = cron.prev_local(end)
            if naive is None:
                return None
            at = _resolve(naive, self.zone)
            if at <= at_or_before:
                return at
            end = naive - timedelta(minutes=1)

    def ticks(self, after: float, until: float, limit: int = 1000) -> list[float]:
        """The ticks in ``(after, until]`` inside the window, at most ``limit`` of them."""
        return self._ticks(self.next_tick, after, until, limit)

    def _raw_ticks(self, after: float, until: float, limit: int) -> list[float]:
        return self._ticks(self._raw_next, after, until, limit)

    @staticmethod
    def _ticks(step: Callable[[float], float | None], after: float, until: float, limit: int) -> list[float]:
        out: list[float] = []
        t = step(after)
        while t is not None and t <= until and len(out) < limit:
            out.append(t)
            t = step(t)
        return out


@dataclass(frozen=True, slots=True)
class TickPlan:
    """What a sweep does with a schedule whose timer is due: see :func:`plan_ticks`."""

    run: float | None
    """The tick to start an execution for, or None (nothing due, or dropped by ``catch_up: skip``)."""
    latest: float | None
    """The latest due tick (None: none is due); it becomes the schedule's ``last_tick``."""
    missed: bool
    """Ticks before ``latest`` were due too (the schedule was down or paused over them)."""
    next_tick: float | None
    """When the timer fires next (None: the expression has no further tick)."""


def plan_ticks(spec: ScheduleSpec, last_tick: float, now: float,
               fire_at: Callable[[float], float] | None = None) -> TickPlan:
    """Which tick to start at ``now`` for a schedule whose last handled tick was ``last_tick``.

    A tick is due once its firing time has come: ``fire_at(tick)`` (the tick plus its jitter; the tick
    itself by default). ``once`` starts the latest due tick; ``skip`` starts it only if it fires at most
    ``grace`` late, and drops the older ones either way. At most one execution per call. ``next_tick`` is
    when the next tick fires (its jitter included).
    """
    fires = fire_at or (lambda tick: tick)
    first = spec.next_tick(last_tick)
    if first is None or fires(first) > now:
        return TickPlan(None, None, False, None if first is None else fires(first))
    latest = spec.latest_tick(now)
    while latest is not None and latest > first and fires(latest) > now:  # ticked, but its jitter runs
        latest = spec.latest_tick(latest - 1)
    if latest is None or latest < first:  # cannot happen for a sane clock; keep the first due tick
        latest = first
    run: float | None = latest
    if spec.catch_up == "skip" and now - fires(latest) > spec.grace_seconds:
        run = None
    following = spec.next_tick(latest)
    return TickPlan(run, latest, latest > first, None if following is None else fires(following))


def jitter_offset(secret: str, name: str, tick: float, jitter: float) -> float:
    """The delay (whole seconds in ``[0, jitter]``) of ``tick`` of schedule ``name``: an HMAC-SHA256 of the
    tick's execution id under the record's ``secret``. A function of stored state only, so every re-run,
    sweeper or hop computes the same one; no one without the secret can predict it."""
    digest = hmac.digest(secret.encode(), f"jitter:{tick_execution_id(name, tick)}".encode(), "sha256")
    return float(int.from_bytes(digest[:8], "big") % (int(jitter) + 1))


# -- ids -------------------------------------------------------------------------------------------------
def schedule_record_id(name: str) -> str:
    """The system record that holds schedule ``name``: ``~schedule~<name>``."""
    return f"{SCHEDULE_RECORD}~{name}"


def schedule_name(record_id: str) -> str | None:
    """The schedule name of a record id, or None if it is not a schedule's."""
    prefix = f"{SCHEDULE_RECORD}~"
    return record_id[len(prefix):] if record_id.startswith(prefix) else None


def tick_execution_id(name: str, tick: float) -> str:
    """The execution a tick starts: ``<name>~<tick in UTC as 20261130T010000Z>``. The same tick always
    names the same execution, so a tick handled twice starts it once (the start is deduplicated). The
    ``~`` puts it in the namespace no start from outside may take (:mod:`durastate.engine.ids`): the
    worker starts it only with its schedule record's witness, so no one can start it first."""
    return f"{name}{CHILD_SEPARATOR}{datetime.fromtimestamp(tick, UTC).strftime(TICK_FORMAT)}"


def manual_execution_id(name: str, now: float) -> str:
    """The execution ``schedules trigger`` starts: ``<name>~manual-<now in UTC>`` (one per second)."""
    return f"{name}{CHILD_SEPARATOR}manual-{datetime.fromtimestamp(now, UTC).strftime(TICK_FORMAT)}"


# -- files -----------------------------------------------------------------------------------------------
def is_schedule_document(data: Any) -> bool:
    """Whether parsed file content is a schedules file: a mapping with ``schedules`` and no ``id``/``states``."""
    return isinstance(data, Mapping) and "schedules" in data and "id" not in data and "states" not in data


def is_schedule_file(path: Path) -> bool:
    """Whether the file at ``path`` is a schedules file (one that does not parse is not: it is reported as a
    definition file, with its syntax error)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    if b"schedules" not in raw:
        return False
    try:
        return is_schedule_document(parse_document(_read_text(path, path.name), path.name))
    except DefinitionError:
        return False


def parse_schedules(data: Any, source: str | None = None,
                    known_definitions: Collection[str] | None = None) -> dict[str, ScheduleSpec]:
    """Validate a schedules document (``{"schedules": {name: spec}}``) into specs by name.

    Raises :class:`~durastate.errors.ScheduleError` with every issue at once, each with its path; a
    ``definition`` missing from ``known_definitions`` (when given) is one.
    """
    specs, issues = _parse_schedules(data, known_definitions)
    if issues:
        raise ScheduleError(issues, source)
    return specs


def _parse_schedules(data: Any, known_definitions: Collection[str] | None
                     ) -> tuple[dict[str, ScheduleSpec], list[str]]:
    """The valid specs of a schedules document, and the issues of the others."""
    issues: list[str] = []
    if not isinstance(data, Mapping):
        return {}, [f"(document): must be a mapping with a `schedules:` key, got {type(data).__name__}"]
    issues += [f"{key}: unknown key; a schedules file holds only `schedules:`" for key in data if key != "schedules"]
    entries = data.get("schedules")
    if entries is None:
        entries = {}
    if not isinstance(entries, Mapping):
        return {}, [*issues, f"schedules: must map schedule names to schedules, got {type(entries).__name__}"]
    out: dict[str, ScheduleSpec] = {}
    for name, raw in entries.items():
        where = f"schedules.{name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            issues.append(f"{where}: the name must be 1-64 letters, digits, '-', '_' or '.', starting with a "
                          "letter or digit (it names the executions it starts)")
            continue
        if not isinstance(raw, Mapping):
            issues.append(f"{where}: must be a mapping with definition and cron or rate, got {type(raw).__name__}")
            continue
        try:
            spec = ScheduleSpec.model_validate(dict(raw))
        except ValidationError as exc:
            issues += _issues(where, exc)
            continue
        except (InvalidValue, RecursionError) as exc:
            issues.append(f"{where}: {exc}")
            continue
        if known_definitions is not None and spec.definition not in known_definitions:
            known = ", ".join(sorted(known_definitions)) or "none"
            issues.append(f"{where}.definition: no definition {spec.definition!r} (known: {known})")
            continue
        out[name] = spec
    return out, issues


def _issues(where: str, exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        at = f"{where}.{loc}" if loc else where
        if err["type"] == "extra_forbidden":
            out.append(f"{at}: unknown key; allowed: {', '.join(ScheduleSpec.model_fields)}")
        elif err["type"] == "missing":
            out.append(f"{at}: required")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ").replace("Input should be", "must be")
            out.append(f"{at}: {msg}")
    return out


def load_schedules(files: Iterable[Path], known_definitions: Collection[str] | None = None
                   ) -> dict[str, ScheduleSpec]:
    """The schedules of the schedules files among ``files``, validated together (a name in two files is an
    issue of both). Raises :class:`~durastate.errors.ScheduleError` with every file's issues, prefixed by
    the file's name."""
    issues: list[str] = []
    found: dict[str, tuple[str, ScheduleSpec]] = {}
    for path in files:
        if not is_schedule_file(path):
            continue
        try:
            specs, found_issues = _parse_schedules(parse_document(_read_text(path, path.name), path.name),
                                                   known_definitions)
        except DefinitionError as exc:
            specs, found_issues = {}, exc.issues
        issues += [f"{path.name}: {issue}" for issue in found_issues]
        for name, spec in specs.items():
            if name in found:
                issues.append(f"{path.name}: schedules.{name}: also defined in {found[name][0]}; a schedule "
                              "name must be unique in its definitions folder")
            else:
                found[name] = (path.name, spec)
    if issues:
        raise ScheduleError(issues)
    return {name: spec for name, (_, spec) in found.items()}
