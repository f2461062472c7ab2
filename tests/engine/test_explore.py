"""Bounded exploration (``validate --explore``): deadlocks and loops found, with the events that reach
them, over guards that read values the user gives domains for."""

from __future__ import annotations

from typing import Any

from durastate.engine import load_definition
from durastate.engine.explore import explore


def chart(states: dict[str, Any], **more: Any) -> Any:
    return load_definition({"id": "t", "initial": next(iter(states)), "states": states, **more})


def test_a_deadlock_is_found_with_the_shortest_events_that_reach_it() -> None:
    defn = chart({
        "idle": {"on": {"go": "working", "skip": "waiting"}},
        "working": {"on": {"done": "finished"}},
        "waiting": {"on": {"go": {"target": "working", "guard": {"eq": ["$context.ready", True]}}}},
        "finished": {"type": "final"},
    }, context={"ready": False})
    found = explore(defn)
    assert found.complete
    [deadlock] = found.findings
    assert (deadlock.kind, deadlock.active_path, deadlock.events) == ("deadlock", "waiting", ("start", "skip"))


def test_a_domain_the_user_gives_lets_the_guard_open_and_removes_the_deadlock() -> None:
    defn = chart({
        "idle": {"on": {"skip": "waiting"}},
        "waiting": {"on": {"go": {"target": "finished", "guard": {"eq": ["$context.ready", True]}}}},
        "finished": {"type": "final"},
    })
    assert [f.kind for f in explore(defn, domains={"context.ready": [False]}).findings] == ["deadlock"]
    with_true = explore(defn, domains={"context.ready": [False, True]})
    assert [(f.kind, f.events[0]) for f in with_true.findings] == [("deadlock", 'start {"ready": false}')]


def test_event_data_domains_reach_guarded_transitions() -> None:
    defn = chart({
        "a": {"on": {"pay": {"target": "b", "guard": {"gt": ["$event.amount", 100]}}}},
        "b": {},
    })
    assert explore(defn).findings[0].active_path == "a"  # no amount: the guard never opens
    found = explore(defn, domains={"event.amount": [50, 150]})
    assert [(f.active_path, f.events) for f in found.findings] == [("b", ("start", 'pay {"amount": 150}'))]


def test_an_always_loop_is_found_as_a_loop_with_its_events() -> None:
    defn = chart({
        "a": {"on": {"poke": "c", "end": "z"}},
        "c": {"always": "d"}, "d": {"always": "c"},
        "z": {"type": "final"},
    })
    [loop] = explore(defn).findings
    assert loop.kind == "loop" and loop.events == ("start", "poke") and "did not settle" in loop.detail


def test_timers_fire_and_a_timeout_that_leads_nowhere_is_a_deadlock() -> None:
    defn = chart({
        "a": {"after": {"seconds": 60, "target": "b"}},
        "b": {"on": {"x": {"target": "a", "guard": {"eq": [1, 2]}}}},
    })
    [deadlock] = explore(defn).findings
    assert deadlock.events == ("start", "timer a") and deadlock.active_path == "b"


def test_the_bound_is_reported_when_the_context_grows_without_end() -> None:
    defn = chart({"a": {"on": {"inc": {"actions": [{"assign": {"n": {"add": ["$context.n", 1]}}}]}}}},
                 context={"n": 0})
    found = explore(defn, limit=50)
    assert not found.complete and found.configurations == 50 and found.findings == []
