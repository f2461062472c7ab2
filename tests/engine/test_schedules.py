"""Schedules in the pure engine: cron fields, time zones across DST, rates, catch-up, schedules files."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.schedules import (
    ScheduleSpec,
    is_schedule_file,
    jitter_offset,
    load_schedules,
    manual_execution_id,
    parse_cron,
    parse_schedules,
    plan_ticks,
    schedule_name,
    schedule_record_id,
    tick_execution_id,
)
from durastate.errors import ScheduleError

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def at(text: str, zone: str = "UTC") -> float:
    """Epoch seconds of a wall-clock time in ``zone`` (an explicit offset in ``text`` wins)."""
    dt = datetime.fromisoformat(text)
    return (dt if dt.tzinfo else dt.replace(tzinfo=ZoneInfo(zone))).timestamp()


def local(ts: float, zone: str) -> str:
    return datetime.fromtimestamp(ts, ZoneInfo(zone)).isoformat(timespec="minutes")


def ticks(spec: ScheduleSpec, start: str, end: str) -> list[str]:
    zone = spec.timezone or "UTC"
    return [local(t, zone) for t in spec.ticks(at(start, zone), at(end, zone))]


def cron(expr: str, zone: str | None = None) -> ScheduleSpec:
    return ScheduleSpec(definition="job", cron=expr, timezone=zone)


# -- cron fields -------------------------------------------------------------------------------------------
def test_fields_steps_ranges_lists_and_names() -> None:
    c = parse_cron("*/15 9-17/4 1,15 JAN-MAR,dec mon-fri")
    assert c.minutes == (0, 15, 30, 45)
    assert c.hours == (9, 13, 17)
    assert c.days == {1, 15} and c.months == {1, 2, 3, 12} and c.weekdays == {1, 2, 3, 4, 5}
    assert parse_cron("0 0 * * 7").weekdays == {0}  # 7 is Sunday too
    assert parse_cron("5/20 * * * *").minutes == (5, 25, 45)  # a/step: from a to the end
    assert parse_cron("@daily") == parse_cron("0 0 * * *").__class__(
        "@daily", (0,), (0,), frozenset(range(1, 32)), frozenset(range(1, 13)), frozenset(range(7)), True, True)


def test_every_15_minutes_on_weekdays_in_office_hours() -> None:
    spec = cron("*/15 9-10 * * MON-FRI")
    assert ticks(spec, "2026-11-27T10:20", "2026-11-30T09:20") == [  # Friday ... Monday
        "2026-11-27T10:30+00:00", "2026-11-27T10:45+00:00",
        "2026-11-30T09:00+00:00", "2026-11-30T09:15+00:00",
    ]


def test_both_day_fields_restricted_means_either_as_in_cron() -> None:
    # the 13th of the month OR any Friday
    spec = cron("0 12 13 * FRI")
    assert ticks(spec, "2026-11-01T00:00", "2026-11-20T00:00") == [
        "2026-11-06T12:00+00:00", "2026-11-13T12:00+00:00",
    ]
    only_fridays = cron("0 12 * * FRI")
    assert ticks(only_fridays, "2026-11-10T00:00", "2026-11-20T00:00") == ["2026-11-13T12:00+00:00"]


def test_february_29_waits_for_a_leap_year() -> None:
    spec = cron("0 0 29 2 *")
    assert local(spec.next_tick(at("2026-03-01T00:00")), "UTC") == "2028-02-29T00:00+00:00"  # type: ignore[arg-type]


@pytest.mark.parametrize(("expr", "problem"), [
    ("* * * *", "has 4 field(s)"),
    ("60 * * * *", "60 is out of range 0-59"),
    ("* 24 * * *", "24 is out of range 0-23"),
    ("* * 0 * *", "0 is out of range 1-31"),
    ("* * * 13 *", "13 is out of range 1-12"),
    ("*/0 * * * *", "step '0'"),
    ("5-1 * * * *", "runs backwards"),
    ("1,,2 * * * *", "empty list item"),
    ("* * * * FUNDAY", "'funday' is not a number"),
    ("@fortnightly", "unknown cron macro"),
    ("0 0 30 2 *", "never matches"),
])
def test_bad_cron_says_what_is_wrong(expr: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_cron(expr)


# -- time zones and DST ------------------------------------------------------------------------------------
def test_daily_cron_keeps_local_time_across_both_berlin_transitions() -> None:
    spec = cron("0 9 * * *", BERLIN)
    assert ticks(spec, "2026-03-28T10:00", "2026-03-30T10:00") == [
        "2026-03-29T09:00+02:00", "2026-03-30T09:00+02:00"]
    assert ticks(spec, "2026-10-24T10:00", "2026-10-26T10:00") == [
        "2026-10-25T09:00+01:00", "2026-10-26T09:00+01:00"]


def test_a_time_skipped_by_spring_forward_fires_once_at_the_end_of_the_gap() -> None:
    spec = cron("30 2 * * *", BERLIN)  # 02:00-03:00 does not exist on 2026-03-29 in Berlin
    assert ticks(spec, "2026-03-28T00:00", "2026-03-31T00:00") == [
        "2026-03-28T02:30+01:00", "2026-03-29T03:00+02:00", "2026-03-30T02:30+02:00"]
    every_20 = cron("*/20 2 * * *", NEW_YORK)  # 02:00-03:00 does not exist on 2026-03-08 in New York
    assert ticks(every_20, "2026-03-08T00:00", "2026-03-08T12:00") == ["2026-03-08T03:00-04:00"]


def test_a_time_repeated_by_fall_back_fires_once_at_its_first_occurrence() -> None:
    spec = cron("30 1 * * *", NEW_YORK)  # 01:00-02:00 happens twice on 2026-11-01 in New York
    got = spec.ticks(at("2026-10-31T12:00", NEW_YORK), at("2026-11-02T12:00", NEW_YORK))
    assert [local(t, NEW_YORK) for t in got] == ["2026-11-01T01:30-04:00", "2026-11-02T01:30-05:00"]
    hourly = cron("0 * * * *", BERLIN)  # 02:00 happens twice on 2026-10-25 in Berlin
    assert ticks(hourly, "2026-10-25T00:30", "2026-10-25T04:30") == [
        "2026-10-25T01:00+02:00", "2026-10-25T02:00+02:00", "2026-10-25T03:00+01:00", "2026-10-25T04:00+01:00"]


def test_latest_tick_during_the_repeated_hour() -> None:
    spec = cron("*/30 * * * *", BERLIN)
    second_0240 = at("2026-10-25T00:40+00:00")  # 02:40 CET, the second time 02:40 happens
    assert local(spec.latest_tick(second_0240), BERLIN) == "2026-10-25T02:30+02:00"  # type: ignore[arg-type]
    assert local(spec.next_tick(second_0240), BERLIN) == "2026-10-25T03:00+01:00"  # type: ignore[arg-type]


# -- rate --------------------------------------------------------------------------------------------------
def test_rate_ticks_at_multiples_of_its_period_in_real_time() -> None:
    spec = ScheduleSpec(definition="job", rate="15m")
    assert spec.rate == "15m" and spec.expression() == "every 15m"
    assert spec.next_tick(at("2026-03-29T00:50+00:00")) == at("2026-03-29T01:00+00:00")
    assert spec.next_tick(at("2026-03-29T01:00+00:00")) == at("2026-03-29T01:15+00:00")
    assert spec.latest_tick(at("2026-03-29T01:14:59+00:00")) == at("2026-03-29T01:00+00:00")
    assert ScheduleSpec(definition="job", rate=90).rate == "1m 30s"


# -- catch-up ----------------------------------------------------------------------------------------------
def test_nothing_due_keeps_the_next_tick() -> None:
    spec = ScheduleSpec(definition="job", rate="1h")
    plan = plan_ticks(spec, at("2026-01-01T00:00"), at("2026-01-01T00:30"))
    assert plan.run is None and plan.latest is None and plan.next_tick == at("2026-01-01T01:00")


def test_on_time_tick_runs_under_either_policy() -> None:
    for policy in ("skip", "once"):
        spec = ScheduleSpec(definition="job", rate="1h", catch_up=policy)
        plan = plan_ticks(spec, at("2026-01-01T00:00"), at("2026-01-01T01:00:05"))
        assert (plan.run, plan.missed) == (at("2026-01-01T01:00"), False)
        assert plan.next_tick == at("2026-01-01T02:00")


def test_after_downtime_skip_drops_stale_ticks_and_once_runs_one_for_them() -> None:
    last, now = at("2026-01-01T02:00"), at("2026-01-04T14:00")  # three nightly ticks missed
    skip = plan_ticks(cron("0 2 * * *"), last, now)
    assert (skip.run, skip.latest, skip.missed) == (None, at("2026-01-04T02:00"), True)
    assert skip.next_tick == at("2026-01-05T02:00")
    once = plan_ticks(ScheduleSpec(definition="job", cron="0 2 * * *", catch_up="once"), last, now)
    assert (once.run, once.missed, once.next_tick) == (at("2026-01-04T02:00"), True, at("2026-01-05T02:00"))


def test_skip_runs_the_latest_tick_if_within_grace() -> None:
    last, now = at("2026-01-01T02:00"), at("2026-01-04T02:40")
    assert plan_ticks(cron("0 2 * * *"), last, now).run == at("2026-01-04T02:00")  # 40 minutes late: default 1h
    strict = ScheduleSpec(definition="job", cron="0 2 * * *", grace="10m")
    assert plan_ticks(strict, last, now).run is None
    frequent = ScheduleSpec(definition="job", rate="5m")  # days down: the current tick still runs
    assert plan_ticks(frequent, last, now).run == at("2026-01-04T02:40")


# -- window and jitter -------------------------------------------------------------------------------------
def test_no_tick_falls_before_start_at_or_after_end_at() -> None:
    spec = ScheduleSpec(definition="job", cron="0 9 * * *", timezone=BERLIN, start_at="2026-03-02T09:00",
                        end_at="2026-03-04T09:00")
    assert ticks(spec, "2026-02-25T00:00", "2026-03-10T00:00") == [
        "2026-03-02T09:00+01:00", "2026-03-03T09:00+01:00", "2026-03-04T09:00+01:00"]  # both bounds inclusive
    assert spec.latest_tick(at("2026-03-01T12:00", BERLIN)) is None
    assert spec.latest_tick(at("2026-03-09T12:00", BERLIN)) == at("2026-03-04T09:00", BERLIN)
    assert spec.next_tick(at("2026-03-04T09:00", BERLIN)) is None  # after end_at: no timer to arm
    ended = plan_ticks(spec, at("2026-03-04T09:00", BERLIN), at("2026-03-05T09:00", BERLIN))
    assert ended.run is None and ended.next_tick is None
    rate = ScheduleSpec(definition="job", rate="1h", start_at="2026-01-01T10:30+00:00")
    assert rate.next_tick(at("2026-01-01T00:00")) == at("2026-01-01T11:00")


def test_jitter_is_derived_from_secret_and_tick_and_bounded() -> None:
    spec = ScheduleSpec(definition="job", rate="1h", jitter="10m")
    t0 = at("2026-01-01T01:00")
    offsets = [jitter_offset("s3cret", "pulse", t0 + i * 3600, 600) for i in range(200)]
    assert all(0 <= o <= 600 and o == int(o) for o in offsets)
    assert len(set(offsets)) > 50  # spread, not one constant delay
    assert offsets == [jitter_offset("s3cret", "pulse", t0 + i * 3600, 600) for i in range(200)]  # re-run: same
    assert offsets != [jitter_offset("other", "pulse", t0 + i * 3600, 600) for i in range(200)]
    assert spec.fire_at(t0, "s3cret", "pulse") == t0 + offsets[0]
    assert spec.fire_at(t0, None, "pulse") == t0 and ScheduleSpec(definition="job", rate="1h").fire_at(
        t0, "s3cret", "pulse") == t0


def test_a_jittered_tick_is_due_when_its_offset_has_passed() -> None:
    spec = ScheduleSpec(definition="job", rate="1h", jitter="30m")
    fires = lambda tick: tick + 600.0  # noqa: E731  a fixed 10-minute offset
    last = at("2026-01-01T00:00")
    early = plan_ticks(spec, last, at("2026-01-01T01:05"), fires)
    assert early.run is None and early.latest is None and early.next_tick == at("2026-01-01T01:10")
    due = plan_ticks(spec, last, at("2026-01-01T01:10"), fires)
    assert due.run == at("2026-01-01T01:00") and due.next_tick == at("2026-01-01T02:10")
    later = plan_ticks(spec, at("2026-01-01T01:00"), at("2026-01-01T03:05"), fires)  # 03:00 ticked, not fired
    assert later.latest == at("2026-01-01T02:00") and later.next_tick == at("2026-01-01T03:10")


@pytest.mark.parametrize(("options", "problem"), [
    ({"rate": "1h", "jitter": "1h"}, "jitter 1h must be shorter than the gap between two ticks (1h)"),
    ({"cron": "*/5 * * * *", "jitter": "6m"}, "(5m)"),
    ({"rate": "1h", "start_at": "2026-03-02T09:00", "end_at": "2026-03-01T09:00"},
     "end_at 2026-03-01T09:00 is before start_at 2026-03-02T09:00"),
    ({"rate": "1h", "start_at": "next monday"}, "'next monday' is not an ISO 8601 time"),
])
def test_bad_window_or_jitter_says_what_is_wrong(options: dict[str, str], problem: str) -> None:
    with pytest.raises(ScheduleError, match=re.escape(problem)):
        parse_schedules({"schedules": {"job": {"definition": "job", **options}}})


# -- ids ---------------------------------------------------------------------------------------------------
def test_ids_are_derived_from_the_tick() -> None:
    assert tick_execution_id("nightly", at("2026-11-30T02:00", BERLIN)) == "nightly~20261130T010000Z"
    assert manual_execution_id("nightly", at("2026-11-30T13:45:07")) == "nightly~manual-20261130T134507Z"
    assert schedule_record_id("nightly") == "~schedule~nightly"
    assert schedule_name("~schedule~nightly") == "nightly" and schedule_name("~definition~x~1") is None


# -- files -------------------------------------------------------------------------------------------------
def test_every_issue_at_once_with_its_path() -> None:
    doc = {"schedules": {
        "a": {"definition": "report", "cron": "61 * * * *", "timezone": "Mars/Olympus", "colour": "red"},
        "b": {"definition": "nope", "rate": "15m"},
        "c": {"definition": "report"},
        "d": {"definition": "report", "rate": "15m", "timezone": BERLIN},
        "bad name": {"definition": "report", "rate": "1h"},
        "e": {"definition": "report", "rate": "0.5s", "catch_up": "always"},
    }, "extra": 1}
    with pytest.raises(ScheduleError) as info:
        parse_schedules(doc, "schedules.yaml", ["report"])
    issues = info.value.issues
    assert "extra: unknown key; a schedules file holds only `schedules:`" in issues
    assert "schedules.a.cron: cron minute field: 61 is out of range 0-59" in issues
    assert any(i.startswith("schedules.a.timezone: unknown time zone 'Mars/Olympus'") for i in issues)
    assert any(i.startswith("schedules.a.colour: unknown key") for i in issues)
    assert "schedules.b.definition: no definition 'nope' (known: report)" in issues
    assert any(i.startswith("schedules.c: give exactly one of cron") for i in issues)
    assert any(i.startswith("schedules.d: timezone applies to cron only") for i in issues)
    assert any(i.startswith("schedules.bad name: the name must be") for i in issues)
    assert any(i.startswith("schedules.e.rate: rate '0.5s' must be a whole number") for i in issues)
    assert any(i.startswith("schedules.e.catch_up: must be 'skip' or 'once'") for i in issues)
    assert len(issues) == 10
    assert "invalid schedules" in str(info.value)


def test_a_folder_holds_definitions_and_schedules_files(tmp_path: Path) -> None:
    (tmp_path / "report.yaml").write_text("id: report\ninitial: a\nstates: {a: {type: final}}\n")
    (tmp_path / "schedules.yaml").write_text(
        "schedules:\n  nightly: {definition: report, cron: '0 2 * * *', timezone: Europe/Berlin,"
        " context: {kind: daily}}\n")
    (tmp_path / "more.json").write_text('{"schedules": {"pulse": {"definition": "report", "rate": "15m"}}}')
    registry = DefinitionRegistry.from_dir(tmp_path)  # the schedules files are no definitions
    assert registry.ids() == ["report"]
    assert is_schedule_file(tmp_path / "schedules.yaml") and not is_schedule_file(tmp_path / "report.yaml")
    specs = load_schedules(sorted(tmp_path.iterdir()), registry.ids())
    assert sorted(specs) == ["nightly", "pulse"]
    assert specs["nightly"].context == {"kind": "daily"} and specs["nightly"].timezone == BERLIN


def test_a_name_in_two_files_is_an_issue_and_files_name_their_issues(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("schedules: {pulse: {definition: report, rate: 15m}}\n")
    (tmp_path / "b.yaml").write_text("schedules: {pulse: {definition: report, rate: 1h}, x: {definition: zz,"
                                     " rate: 1h}}\n")
    with pytest.raises(ScheduleError) as info:
        load_schedules(sorted(tmp_path.iterdir()), ["report"])
    assert info.value.issues == [
        "b.yaml: schedules.x.definition: no definition 'zz' (known: report)",
        "b.yaml: schedules.pulse: also defined in a.yaml; a schedule name must be unique in its definitions folder",
    ]


def test_spec_round_trips_through_its_stored_form() -> None:
    spec = ScheduleSpec(definition="report", cron="0 2 * * *", timezone=BERLIN, context={"k": [1, 2]},
                        catch_up="once", overlap="skip", grace="10m", start_at="2026-01-01T00:00",
                        end_at="2027-01-01T00:00+01:00", jitter="5m")
    again = ScheduleSpec.model_validate(spec.to_dict())
    assert again == spec and again.spec_hash() == spec.spec_hash()
    assert ScheduleSpec(definition="report", rate="1h").spec_hash() != spec.spec_hash()
