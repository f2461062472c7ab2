"""What a traced step says it did: the transitions taken and why (an event, ``always``, a timer), and the
context keys it changed — each capped so a step never costs more to keep than the execution."""

from __future__ import annotations

from durastate.engine import Definition, Event, Execution, load_definition, step
from durastate.engine.ids import after_timer_key
from durastate.engine.tracing import CONTEXT_KEYS_MAX, VALUE_MAX, capped, context_changes, step_details

CHART = {
    "id": "traced",
    "initial": "a",
    "context": {"n": 0},
    "states": {
        "a": {"on": {"go": {"target": "b", "actions": [{"assign": {"n": 1}}]}}},
        "b": {"always": [{"target": "c", "guard": {"eq": ["$context.n", 1]}}]},
        "c": {"after": [{"seconds": 60, "target": "a"}, {"seconds": 90, "target": "d"}]},
        "d": {"type": "final"},
    },
}


def started() -> tuple[Definition, Execution]:
    defn = load_definition(CHART)
    exe = Execution(id="t", definition_id="traced", context=defn.initial_context())
    step(defn, exe, Event(id="s", name="durastate.start"), 0.0)
    return defn, exe


def test_a_detailed_step_lists_each_transition_and_what_took_it() -> None:
    defn, exe = started()
    res = step(defn, exe, Event(id="e1", name="go"), 1.0, detail=True)
    assert res.trace["transitions"] == [
        {"source": "a", "target": "b", "event": "go"},
        {"source": "b", "target": "c", "always": True},
    ]
    first = after_timer_key("c", 0)
    timeout = Event(id="e2", name="durastate.timeout", data={"path": first, "fire_at": exe.timers[first]})
    res = step(defn, exe, timeout, 61.0, detail=True)
    assert res.trace["transitions"] == [{"source": "c", "target": "a", "after": 0}]
    assert exe.active_path == "a"


def test_without_detail_a_step_records_no_transitions() -> None:
    defn, exe = started()
    res = step(defn, exe, Event(id="e1", name="go"), 1.0)
    assert "transitions" not in res.trace and exe.active_path == "c"


def test_step_details_say_what_changed_and_cut_what_is_big() -> None:
    defn, exe = started()
    before = dict(exe.context)
    res = step(defn, exe, Event(id="e1", name="go", data={"big": "x" * 5000}), 1.0, detail=True)
    trace = step_details(res.trace, 1.0, Event(id="e1", name="go", data={"big": "x" * 5000}), res.emits,
                         res.timers, res.spawns, (before, exe.context))
    assert trace["at"] == 1.0 and trace["data_cut"] is True and trace["data"].startswith('{"big":"xx')
    assert trace["context"] == {"n": [0, 1]}
    assert [(t["action"], t["path"], t["fire_at"]) for t in trace["timers"]] == [
        ("schedule", after_timer_key("c", 0), 61.0), ("schedule", after_timer_key("c", 1), 91.0)]


def test_context_changes_old_new_removed_and_capped() -> None:
    changes, cut = context_changes({"a": 1, "gone": [1], "same": {"x": 1}}, {"a": 2, "new": "v", "same": {"x": 1}})
    assert changes == {"a": [1, 2], "new": [None, "v"], "gone": [[1], None]} and not cut
    many = {f"k{i}": i for i in range(CONTEXT_KEYS_MAX + 5)}
    changes, cut = context_changes({}, many)
    assert len(changes) == CONTEXT_KEYS_MAX and cut
    value, was_cut = capped({"s": "y" * 2000}, VALUE_MAX)
    assert was_cut and isinstance(value, str) and len(value) == VALUE_MAX


def test_a_kept_value_is_a_copy_later_changes_cannot_reach() -> None:
    live = {"items": [1]}
    value, _ = capped(live, VALUE_MAX)
    live["items"].append(2)
    assert value == {"items": [1]}
