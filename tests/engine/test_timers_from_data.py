"""Timers from data: several per state, delays and deadlines computed from the context or the event, and
values that are not delays or times (refused at load as constants, failing the step when computed).

Driven through :class:`~tests.engine.harness.Harness` (which delivers what ``step`` emits and fires due
timers on its own clock) or ``step`` directly when the exact timer operations matter.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from durastate.engine import (
    TIMEOUT,
    After,
    Definition,
    Event,
    Execution,
    State,
    Transition,
    load_definition,
    step,
)
from durastate.engine.ids import after_timer_key
from durastate.errors import DefinitionError

from .harness import Harness

DAY = 86400.0

TICKET: dict[str, Any] = {
    "id": "ticket",
    "initial": "open",
    "context": {"reminded": 0},
    "states": {
        "open": {
            "on": {"answer": "answered", "touch": "open"},
            "after": [
                {"seconds": "1d", "actions": [{"assign": {"reminded": {"add": ["$context.reminded", 1]}}},
                                              {"send": {"event": "reminder"}}]},
                {"seconds": "3d", "target": "escalated"},
            ],
        },
        "escalated": {"on": {"answer": "answered"}},
        "answered": {"type": "final"},
    },
}

RACE: dict[str, Any] = {
    "id": "race",
    "initial": "a",
    "states": {
        "a": {"after": [{"seconds": 20, "target": "slow"}, {"seconds": 10, "target": "fast"}]},
        "fast": {"on": {"back": "a"}},
        "slow": {},
    },
}


def timeout(exe: Execution, key: str, fire_at: float | None = None) -> Event:
    """The ``durastate.timeout`` the sweeper sends for ``key`` (as armed, unless ``fire_at`` is given)."""
    return Event(name=TIMEOUT, data={"path": key, "fire_at": exe.timers[key] if fire_at is None else fire_at})


def started(doc: dict[str, Any], now: float = 0.0, **context: Any) -> tuple[Definition, Execution]:
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id=defn.id, context=defn.initial_context(context))
    step(defn, exe, Event(name="durastate.start"), now=now)
    return defn, exe


def one_state(after: Any, context: dict[str, Any] | None = None, **state: Any) -> dict[str, Any]:
    """``wait`` (with ``after``) that ``go`` enters from ``idle``; ``done`` and ``late`` are finals."""
    return {
        "id": "w",
        "initial": "idle",
        "context": context or {},
        "states": {
            "idle": {"on": {"go": "wait"}},
            "wait": {"after": after, "on": {"leave": "idle"}, **state},
            "late": {"type": "final"},
            "done": {"type": "final"},
        },
    }


# -- several timers per state ------------------------------------------------------------------------------


def test_every_timer_of_a_state_is_armed_on_entry_under_its_own_key() -> None:
    _, exe = started(TICKET, now=100.0)
    assert exe.timers == {"open": 100.0 + DAY, "open~after:1": 100.0 + 3 * DAY}
    assert after_timer_key("open", 1) == "open~after:1"


def test_leaving_the_state_by_an_event_cancels_all_of_its_timers() -> None:
    defn, exe = started(TICKET)
    res = step(defn, exe, Event(name="answer"), now=5.0)
    assert exe.timers == {}
    assert sorted((op.action, op.path) for op in res.timers) == [("cancel", "open"), ("cancel", "open~after:1")]


def test_the_earlier_timer_fires_first_and_leaving_by_it_cancels_the_later_one() -> None:
    h = Harness(RACE)
    h.start("race", "r")
    assert sorted(h.timers.values()) == [1010.0, 1020.0]
    h.advance(30)  # both are due: the sweeper sends both, the earlier one first
    r = h.exes["r"]
    assert r.active_path == "fast" and r.timers == {}
    [res] = [res for _, ev, res in h.results if ev.data.get("path") == "a"]
    assert res.ignored  # the 20 s timer was cancelled when `a` was left: its timeout is stale
    assert h.timers == {}


def test_a_targetless_timer_keeps_the_state_and_its_other_timers() -> None:
    h = Harness(TICKET)
    h.start("ticket", "t")
    h.advance(DAY)
    t = h.exes["t"]
    assert (t.active_path, t.context["reminded"]) == ("open", 1)
    assert [e.name for e in h.notifications] == ["reminder"]
    assert list(t.timers) == ["open~after:1"]  # the reminder is not re-armed; the escalation still is
    h.advance(2 * DAY)
    assert h.exes["t"].active_path == "escalated" and h.exes["t"].timers == {}


def test_reentering_rearms_every_timer_and_the_old_timeouts_are_stale() -> None:
    defn, exe = started(TICKET, now=0.0)
    old = dict(exe.timers)
    step(defn, exe, Event(name="touch"), now=50.0)  # external self-transition: exit, enter again
    assert exe.timers == {"open": 50.0 + DAY, "open~after:1": 50.0 + 3 * DAY}
    for key, fire_at in old.items():
        res = step(defn, exe, timeout(exe, key, fire_at), now=3 * DAY)
        assert res.ignored and exe.active_path == "open"
    res = step(defn, exe, timeout(exe, "open~after:1"), now=50.0 + 3 * DAY)
    assert not res.ignored and exe.active_path == "escalated"


def test_a_timeout_for_a_timer_the_state_does_not_have_is_ignored() -> None:
    defn, exe = started(TICKET)
    res = step(defn, exe, timeout(exe, "open~after:7", 3 * DAY), now=3 * DAY)
    assert res.ignored and exe.active_path == "open" and len(exe.timers) == 2


def test_a_timer_armed_before_states_had_several_is_the_first_one() -> None:
    """Executions stored earlier keyed their one timer by the state's path: that is after[0]'s key."""
    defn = load_definition(one_state({"seconds": 30, "target": "late"}))
    exe = Execution(id="old", definition_id="w", active_path="wait", timers={"wait": 130.0}, created_at=100.0)
    step(defn, exe, Event(name=TIMEOUT, data={"path": "wait", "fire_at": 130.0}), now=131.0)
    assert (exe.status, exe.outcome) == ("finished", "late")


def test_several_timers_built_in_python() -> None:
    defn = Definition(id="py", initial="a", states={
        "a": State(after=[After(seconds="1m", target="b"), After(at=0, target="c")]),
        "b": State(on={"x": [Transition(target="a")]}), "c": State(type="final"),
    })
    assert load_definition(defn.to_dict()) == defn
    exe = Execution(id="p", definition_id="py")
    step(defn, exe, Event(name="durastate.start"), now=500.0)
    assert exe.timers == {"a": 560.0, "a~after:1": 500.0}  # a deadline in the past: due at once


# -- delays and deadlines from data ------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "delay"), [
    (90, 90.0), (1.5, 1.5), ("90s", 90.0), ("15m", 900.0), ("2d 3h", 2 * DAY + 3 * 3600), ("1w", 7 * DAY),
])
def test_a_constant_delay_is_seconds_or_a_duration(seconds: Any, delay: float) -> None:
    defn, exe = started(one_state({"seconds": seconds, "target": "late"}))
    step(defn, exe, Event(name="go"), now=1000.0)
    assert exe.timers == {"wait": 1000.0 + delay}


def test_a_delay_from_the_context_backs_off_exponentially() -> None:
    doc = one_state(
        {"seconds": "$context.backoff", "target": "idle",
         "actions": [{"assign": {"backoff": {"mul": ["$context.backoff", 2]}}}]},
        context={"backoff": 60},
    )
    h = Harness(doc)
    h.start("w", "b")
    waits = []
    for _ in range(4):
        h.send("b", "go")
        waits.append(h.exes["b"].timers["wait"] - h.now)
        h.advance(waits[-1])
        assert h.exes["b"].active_path == "idle"
    assert waits == [60.0, 120.0, 240.0, 480.0]


def test_a_delay_from_the_event_that_entered_the_state_and_a_computed_duration() -> None:
    defn, exe = started(one_state([{"seconds": "$event.delay", "target": "late"},
                                   {"seconds": {"mul": ["$event.delay", 2]}, "target": "done"},
                                   {"seconds": "$context.grace", "target": "done"}],
                                  context={"grace": "2d 3h"}))
    step(defn, exe, Event(name="go", data={"delay": 45}), now=1000.0)
    assert exe.timers == {"wait": 1045.0, "wait~after:1": 1090.0, "wait~after:2": 1000.0 + 2 * DAY + 3 * 3600}


def test_a_delay_computed_by_the_entry_actions_counts() -> None:
    defn, exe = started(one_state({"seconds": "$context.wait", "target": "late"},
                                  entry=[{"assign": {"wait": 5}}]))
    step(defn, exe, Event(name="go"), now=10.0)
    assert exe.timers == {"wait": 15.0}


@pytest.mark.parametrize(("at", "epoch"), [
    ("2026-01-31T17:00:00Z", datetime(2026, 1, 31, 17, tzinfo=UTC).timestamp()),
    ("2026-01-31T18:00:00+01:00", datetime(2026, 1, 31, 17, tzinfo=UTC).timestamp()),
    ("2026-01-31T17:00:00", datetime(2026, 1, 31, 17, tzinfo=UTC).timestamp()),  # no offset: UTC
    ("2026-01-31", datetime(2026, 1, 31, tzinfo=UTC).timestamp()),
    (1_800_000_000, 1_800_000_000.0),
    (1_800_000_000.5, 1_800_000_000.5),
])
def test_a_deadline_is_an_iso_time_or_epoch_seconds_constant_or_from_data(at: Any, epoch: float) -> None:
    for spec, context, data in [(at, {}, {}), ("$context.deadline", {"deadline": at}, {}),
                                ("$event.due", {}, {"due": at})]:
        defn, exe = started(one_state({"at": spec, "target": "late"}, context=context))
        step(defn, exe, Event(name="go", data=data), now=1_700_000_000.0)
        assert exe.timers == {"wait": epoch}, spec
        step(defn, exe, timeout(exe, "wait"), now=epoch)
        assert exe.outcome == "late"


def test_a_deadline_already_past_fires_at_the_next_sweep() -> None:
    h = Harness(one_state({"at": "$context.deadline", "target": "late"}, context={"deadline": "2000-01-01T00:00:00Z"}),
                now=1_700_000_000.0)
    h.start("w", "p")
    h.send("p", "go")
    assert h.exes["p"].timers == {"wait": 1_700_000_000.0}  # armed for now, not for 2000
    h.advance(0)
    assert h.exes["p"].outcome == "late"


# -- bad values ------------------------------------------------------------------------------------------


def issues(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(DefinitionError) as err:
        load_definition(doc)
    return err.value.issues


@pytest.mark.parametrize(("after", "issue"), [
    ({"seconds": 0, "target": "late"}, "states.wait.after.seconds: must be a positive number of seconds, got 0.0"),
    ({"seconds": -5, "target": "late"}, "states.wait.after.seconds: must be a positive number of seconds, got -5.0"),
    ({"seconds": "0s", "target": "late"}, "states.wait.after.seconds: must be a positive number of seconds"),
    ({"seconds": "soon", "target": "late"}, "states.wait.after.seconds: 'soon' is not a delay; a delay is"),
    ({"seconds": "-5m", "target": "late"}, "states.wait.after.seconds: '-5m' is not a delay"),
    ({"seconds": True, "target": "late"}, "states.wait.after.seconds: True is a boolean, not a delay"),
    ({"seconds": [5], "target": "late"}, "states.wait.after.seconds: [5] is a list, not a delay"),
    ({"seconds": {"a": 1}, "target": "late"}, "states.wait.after.seconds: {'a': 1} is a mapping, not a delay"),
    ({"seconds": "$contxt.x", "target": "late"}, "states.wait.after.seconds: unknown reference '$contxt.x'"),
    ({"at": "next tuesday", "target": "late"}, "states.wait.after.at: 'next tuesday' is not a time; a deadline is"),
    ({"at": "2026-02-30T00:00:00Z", "target": "late"}, "states.wait.after.at: '2026-02-30T00:00:00Z' is not a time"),
    ({"at": -1, "target": "late"}, "states.wait.after.at: -1 is not a time"),
    ({"at": 1e300, "target": "late"}, "states.wait.after.at: 1e+300 is after the year 9999"),
    ({"at": 5, "seconds": 5, "target": "late"}, "states.wait.after: both `seconds` and `at`"),
    ({"target": "late"}, "states.wait.after.seconds: required"),
    ({"seconds": 5, "traget": "late"}, "states.wait.after.traget: unknown key (did you mean 'target'?)"),
    ([{"seconds": 5, "target": "late"}, {"seconds": -1, "target": "late"}],
     "states.wait.after[1].seconds: must be a positive number of seconds, got -1.0"),
    ([{"seconds": 5, "target": "late"}, {"at": "soon", "target": "nowhere"}],
     "states.wait.after[1].at: 'soon' is not a time"),
])
def test_a_constant_that_is_not_a_delay_or_a_time_is_a_load_issue_at_its_path(after: Any, issue: str) -> None:
    found = issues(one_state(after))
    assert any(i.startswith(issue) for i in found), found


def test_every_timer_issue_comes_in_one_report() -> None:
    found = issues(one_state([{"seconds": "soon", "target": "nowhere"}, {"at": "never", "traget": "x"}, 7]))
    for want in ("states.wait.after[0].seconds: 'soon' is not a delay",
                 "states.wait.after[0].target: no state 'nowhere'",
                 "states.wait.after[1].traget: unknown key",
                 "states.wait.after[1].at: 'never' is not a time",
                 "states.wait.after[2]: "):
        assert any(i.startswith(want) for i in found), (want, found)


def test_state_names_cannot_hold_the_timer_key_separator() -> None:
    found = issues({"id": "n", "initial": "a", "states": {"a": {}, "a~after:1": {}}})
    assert any("state names cannot be empty or contain '.', '$', '~'" in i for i in found), found


BAD_AT_RUN_TIME = [
    ({"backoff": -5}, "seconds", "$context.backoff = -5 is not a delay; a delay is a number of seconds >= 0"),
    ({"backoff": "soon"}, "seconds", "$context.backoff = 'soon' is not a delay"),
    ({"backoff": True}, "seconds", "$context.backoff = True is a boolean, not a delay"),
    ({"backoff": {"s": 5}}, "seconds", "$context.backoff = {'s': 5} is a mapping, not a delay"),
    ({}, "seconds", "$context.backoff = null (missing?) is not a delay"),
    ({"backoff": 1e308}, "seconds", "$context.backoff = 1e+308 seconds is too long"),
    ({"deadline": "tomorrow"}, "at", "$context.deadline = 'tomorrow' is not a time; a deadline is an ISO 8601"),
    ({"deadline": -1}, "at", "$context.deadline = -1 is not a time"),
    ({"deadline": [2026]}, "at", "$context.deadline = [2026] is a list, not a time"),
    ({}, "at", "$context.deadline = null (missing?) is not a time"),
]


@pytest.mark.parametrize(("context", "kind", "message"), BAD_AT_RUN_TIME)
def test_a_computed_value_that_is_not_a_delay_or_a_time_fails_the_step_naming_state_timer_and_value(
        context: dict[str, Any], kind: str, message: str) -> None:
    spec = "$context.backoff" if kind == "seconds" else "$context.deadline"
    defn, exe = started(one_state([{"seconds": 3600, "target": "done"}, {kind: spec, "target": "late"}]),
                        **context)
    res = step(defn, exe, Event(name="go"), now=1000.0)
    assert exe.status == "failed"
    assert exe.error is not None and exe.error.startswith(f"state 'wait', after[1]: {kind} {message}"), exe.error
    assert "durastate redrive x" in exe.error
    assert exe.timers == {} and not any(op.action == "schedule" for op in res.timers)
    assert res.trace["error"] == exe.error
    [(target, finished)] = res.emits  # the parent (or the sink) hears of the failure
    assert target is None and finished.data["status"] == "failed"


def test_an_overflowing_computation_fails_the_step_too() -> None:
    defn, exe = started(one_state({"seconds": {"mul": ["$context.backoff", 1e308]}, "target": "late"}),
                        backoff=10)
    step(defn, exe, Event(name="go"), now=0.0)
    assert exe.status == "failed" and "inf is not a delay" in (exe.error or "")


def test_a_delay_that_would_fire_after_the_year_9999_fails_the_step() -> None:
    defn, exe = started(one_state({"seconds": "$event.delay", "target": "late"}))
    step(defn, exe, Event(name="go", data={"delay": 253402300000}), now=1_700_000_000.0)
    assert exe.status == "failed" and "that many seconds from now is after the year 9999" in (exe.error or "")


def test_a_computed_delay_of_zero_fires_at_the_next_sweep() -> None:
    defn, exe = started(one_state({"seconds": "$event.delay", "target": "late"}))
    step(defn, exe, Event(name="go", data={"delay": 0}), now=42.0)
    assert exe.timers == {"wait": 42.0}


def test_timer_keys_are_described_for_people() -> None:
    from durastate.engine.ids import REINVOKE_PREFIX, RETRY_PATH, TASK_TIMEOUT_PREFIX, describe_timer_key

    assert describe_timer_key("open") == "open"
    assert describe_timer_key(after_timer_key("ticket.open", 2)) == "ticket.open after[2]"
    assert describe_timer_key(REINVOKE_PREFIX + "charging") == "charging (retry of the invoke)"
    assert describe_timer_key(TASK_TIMEOUT_PREFIX + "charging") == "charging (task timeout)"
    assert describe_timer_key(RETRY_PATH) == "(retry of the failed step)"
