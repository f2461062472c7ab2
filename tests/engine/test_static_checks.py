"""The static checks ``durastate validate`` runs on definitions that load: one chart per rule, each
breaking it once, and every shipped example passing them all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durastate.engine import load_definition
from durastate.engine.checks import static_issues

ROOT = Path(__file__).resolve().parents[2]


def issues(doc: dict[str, Any]) -> list[str]:
    return static_issues(load_definition({"id": "t", **doc}))


def one(doc: dict[str, Any]) -> str:
    found = issues(doc)
    assert len(found) == 1, found
    return found[0]


def test_an_unreachable_state_is_reported_with_its_path() -> None:
    issue = one({"initial": "a", "states": {"a": {"on": {"go": "done"}}, "lost": {"on": {"go": "done"}},
                                            "done": {"type": "final"}}})
    assert issue.startswith("states.lost: unreachable")


def test_states_entered_through_parallel_regions_history_and_timers_are_reachable() -> None:
    assert issues({"initial": "p", "states": {
        "p": {"type": "parallel", "states": {
            "r1": {"initial": "x", "states": {"x": {"on": {"n": "y"}}, "y": {"type": "final"}}},
            "r2": {"initial": "u", "states": {"u": {"after": {"seconds": 5, "target": "v"}},
                                              "v": {"type": "final"}}}},
              "on_done": "c"},
        "c": {"initial": "c1", "states": {"c1": {"on": {"n": "c2"}}, "c2": {"on": {"back": "h"}},
                                          "h": {"type": "history"}},
              "on": {"out": "end"}},
        "end": {"type": "final"}}}) == []


def test_a_state_with_no_way_out_that_is_not_final_is_reported() -> None:
    issue = one({"initial": "a", "states": {"a": {"on": {"go": "stuck", "fin": "done"}}, "stuck": {},
                                            "done": {"type": "final"}}})
    assert issue.startswith("states.stuck: no way out")


def test_a_transition_shadowed_by_an_earlier_unguarded_one_on_the_same_event_is_dead() -> None:
    issue = one({"initial": "a", "states": {
        "a": {"on": {"go": [{"target": "b"}, {"target": "c", "guard": {"eq": ["$event.x", 1]}}]}},
        "b": {"type": "final"}, "c": {"type": "final"}}})
    assert issue.startswith("states.a.on.go[1]") and "never taken" in issue and "states.a.on.go[0]" in issue


def test_two_unguarded_transitions_on_one_event_are_reported_as_such() -> None:
    issue = one({"initial": "a", "states": {
        "a": {"on": {"go": [{"target": "b"}, {"target": "c"}]}},
        "b": {"type": "final"}, "c": {"type": "final"}}})
    assert "two unguarded transitions on one event" in issue


def test_a_wildcard_shadows_what_follows_it_but_not_what_precedes_it() -> None:
    found = issues({"initial": "a", "states": {
        "a": {"on": {"go": "b", "*": "c", "stop": "b"}}, "b": {"type": "final"}, "c": {"type": "final"}}})
    assert len(found) == 1 and found[0].startswith("states.a.on.stop[0]")


def test_an_unguarded_always_loop_is_reported_with_its_states() -> None:
    issue = one({"initial": "a", "states": {
        "a": {"always": "b"}, "b": {"always": "a"}}})
    assert "`always` loop without a guard" in issue and "a -> b -> a" in issue


def test_a_guarded_always_loop_is_fine() -> None:
    assert issues({"initial": "a", "context": {"n": 0}, "states": {
        "a": {"always": {"target": "b", "guard": {"lt": ["$context.n", 3]},
                         "actions": [{"assign": {"n": {"add": ["$context.n", 1]}}}]},
              "on": {"go": "done"}},
        "b": {"always": "a"}, "done": {"type": "final"}}}) == []


def test_a_history_state_nobody_targets_is_reported() -> None:
    issue = one({"initial": "c", "states": {
        "c": {"initial": "x", "states": {"x": {"on": {"n": "y"}}, "y": {"on": {"out": "done"}},
                                         "h": {"type": "history"}}},
        "done": {"type": "final"}}})
    assert issue.startswith("states.c.states.h: history state never targeted")


def test_an_event_the_chart_raises_that_no_state_handles_is_reported() -> None:
    issue = one({"initial": "a", "states": {
        "a": {"on": {"go": {"target": "b", "actions": [{"raise": "gone"}]}}},
        "b": {"on": {"went": "done"}}, "done": {"type": "final"}}})
    assert "'gone'" in issue and issue.startswith("states.a.on.go[0].actions[0].raise")


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_passes_the_static_checks(path: Path) -> None:
    assert static_issues(load_definition(path)) == []
