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
    # without a domain, the guard's own constant is tried, and its neighbours: 101 opens it
    assert [(f.active_path, f.events) for f in explore(defn).findings] == [("b", ("start", 'pay {"amount": 101}'))]
    found = explore(defn, domains={"event.amount": [50, 150]})  # a domain wins over the constants
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


def test_guard_constants_give_the_event_values_to_try_on_each_side_of_the_boundary() -> None:
    """``validate --explore`` on a chart whose every transition reads ``$event.price`` explored one
    configuration and reported success; the constants the guards compare with are values to try."""
    defn = chart({
        "cart": {"on": {"add": {"target": "full", "guard": {"gt": ["$event.price", 0]}},
                        "code": {"target": "vip", "guard": {"in": ["$event.code", ["gold"]]}}}},
        "full": {"on": {"pay": [{"target": "big", "guard": {"ge": ["$event.amount", 100]}},
                                {"target": "small", "guard": {"lt": ["$event.amount", 100]}}]}},
        "vip": {"type": "final"}, "big": {"type": "final"}, "small": {"type": "final"},
    })
    found = explore(defn)
    assert found.findings == [] and found.unvalued_event_keys == []
    assert found.coverage.describe() == "reached 5/5 states, 4/4 transitions"


def test_context_constants_give_start_contexts_one_key_at_a_time() -> None:
    defn = chart({"pending": {"on": {"authorize": [{"target": "ok", "guard": {"le": ["$context.amount", 5000]}},
                                                   {"target": "declined"}]}},
                  "ok": {"type": "final"}, "declined": {"type": "final"}}, context={"amount": 0})
    assert explore(defn).coverage.never_taken == []


def test_an_invoked_child_ends_with_each_outcome_its_on_done_guards_compare() -> None:
    defn = chart({
        "paying": {"invoke": {"definition": "payment"},
                   "on_done": [{"target": "paid", "guard": {"eq": ["$event.outcome", "paid"]}}, {"target": "failed"}],
                   "on_error": "failed"},
        "paid": {"type": "final"}, "failed": {"type": "final"},
    })
    cov = explore(defn).coverage
    assert cov.never_taken == [] and cov.never_reached == []


def test_a_task_is_explored_answering_failing_and_timing_out() -> None:
    task = {"invoke": {"task": {"python": "shop:charge"}, "timeout": "5m"}, "on_done": "paid",
            "on_error": "stuck"}
    defn = chart({"charging": task, "paid": {"type": "final"}, "stuck": {}})
    [stuck] = explore(defn).findings  # the shortest way into the dead end: the timeout
    assert (stuck.kind, stuck.active_path, stuck.events) == ("deadlock", "stuck", ("start", "task charging timed out"))
    no_timeout = chart({"charging": {**task, "invoke": {"task": {"python": "shop:charge"}}},
                        "paid": {"type": "final"}, "stuck": {}})
    [stuck] = explore(no_timeout).findings
    assert stuck.events == ("start", "task charging failed")
    assert explore(no_timeout).coverage.describe() == "reached 3/3 states, 2/2 transitions"


def test_coverage_names_what_was_never_taken_with_its_guard() -> None:
    defn = chart({
        "a": {"on": {"go": [{"target": "b", "guard": {"gt": ["$event.n", "$context.limit"]}}, {"target": "c"}]}},
        "b": {"type": "final"}, "c": {"type": "final"},
    }, context={"limit": 10})
    found = explore(defn)
    assert found.unvalued_event_keys == ["n"]  # compared with another reference: no constant to try
    assert found.coverage.describe() == (
        'reached 2/3 states, 1/2 transitions; never taken: state b; a -> b on go [guard {"gt": ["$event.n", '
        '"$context.limit"]}]')
    assert explore(defn, domains={"event.n": [5, 11]}).coverage.never_taken == []


def test_a_failing_step_is_reported_without_the_operators_redrive_hint() -> None:
    defn = chart({"a": {"on": {"go": "b"}}, "b": {"after": {"at": "$context.deadline", "target": "c"}},
                  "c": {"type": "final"}})
    [failure] = explore(defn).findings
    assert failure.kind == "failure" and failure.events == ("start", "go")
    assert "is not a time" in failure.detail and "redrive" not in failure.detail


def test_the_guards_of_a_choose_inside_a_block_give_event_values_too() -> None:
    def with_actions(actions: list[Any]) -> Any:
        return chart({
            "a": {"on": {"go": {"target": "b", "actions": actions}}},
            "b": {"always": [{"target": "hit", "guard": {"eq": ["$context.hit", True]}}, {"target": "miss"}]},
            "hit": {"type": "final"}, "miss": {"type": "final"}})

    choose = {"choose": [{"guard": {"eq": ["$event.code", 7]}, "actions": [{"assign": {"hit": True}}]}]}
    plain, blocked = explore(with_actions([choose])), explore(with_actions([{"block": [choose]}]))
    assert plain.coverage.describe() == "reached 3/4 states, 3/3 transitions; never taken: state b"  # b: passed
    assert blocked.coverage.describe() == plain.coverage.describe()
