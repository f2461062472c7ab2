"""XState v5 machine configs: the documentation's examples, imported, validated and run; and what is code in
XState (named actions, guards, actors, delays) reported at its JSON path instead of guessed at."""

from __future__ import annotations

import json

import pytest

from durastate.engine import load_definition
from durastate.importers import ImportResult, to_yaml, xstate

from .conftest import HERE, run_to_end

EXAMPLES = HERE / "xstate"


def _import(name: str) -> ImportResult:
    path = EXAMPLES / name
    return xstate.convert(path.read_text(encoding="utf-8"), str(path))


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_documented_example_imports_completely_and_its_yaml_loads(name: str) -> None:
    result = _import(name)
    assert result.issues == []
    assert load_definition(to_yaml(result)) == load_definition(result.document)


def test_toggle_runs() -> None:
    exe = run_to_end(_import("toggle.json").document, ("toggle", "toggle", "toggle"), max_seconds=0)
    assert exe.active_path == "Active"


def test_traffic_light_timers_and_done() -> None:
    doc = _import("traffic_light.json").document
    exe = run_to_end(doc, ("TIMER",), max_seconds=0)
    assert exe.active_path == "yellow"
    exe = run_to_end(doc, (), max_seconds=8)  # after 5000 ms green -> yellow, after 1500 ms more -> red
    assert exe.active_path == "red.walk"
    exe = run_to_end(doc, ("TIMER", "TIMER", "PED_COUNTDOWN", "PED_COUNTDOWN"), max_seconds=0)
    assert exe.active_path == "green"  # red reached its final child: onDone


def test_fetch_machine_retries_then_succeeds() -> None:
    exe = run_to_end(_import("fetch.json").document, ("FETCH", "REJECT", "RETRY", "RESOLVE"), max_seconds=0)
    assert (exe.status, exe.outcome) == ("finished", "success")
    assert exe.context == {"retries": 0, "data": None, "retried": True}


def test_parallel_text_editor_regions_toggle_independently() -> None:
    result = _import("text_editor.json")
    assert result.document["states"]["editor"]["type"] == "parallel"
    assert result.document["states"]["editor"]["regions"] == "inline"  # XState's regions are one actor's
    exe = run_to_end(result.document, ("TOGGLE_BOLD", "BULLETS"), max_seconds=0)
    assert exe.status == "running" and exe.active_path == "editor" and exe.children == {}
    assert exe.leaves == ["editor.bold.on", "editor.underline.off", "editor.italics.off", "editor.list.bullets"]


def test_state_in_guard_reads_the_other_region() -> None:
    config = {"id": "upload", "type": "parallel", "states": {
        "scan": {"initial": "running", "states": {"running": {"on": {"CLEAN": "clean"}}, "clean": {"id": "ok"}}},
        "publish": {"initial": "waiting", "states": {
            "waiting": {"on": {"PUBLISH": [
                {"target": "done", "guard": {"type": "xstate.stateIn", "stateValue": "#ok"}},
                {"target": "refused"}]}},
            "refused": {"on": {"PUBLISH": {"target": "done", "guard": {"type": "stateIn",
                                                                       "params": {"stateValue": {"scan": "clean"}}}}}},
            "done": {}}},
        "idle": {}}}
    result = xstate.convert(json.dumps(config))
    assert result.issues == []
    publish = result.document["states"]["upload"]["states"]["publish"]["states"]
    assert publish["waiting"]["on"]["PUBLISH"][0]["guard"] == {"in_state": "upload.scan.clean"}
    assert publish["refused"]["on"]["PUBLISH"][0]["guard"] == {"in_state": "upload.scan.clean"}
    # an atomic region (idle) becomes a compound one holding a leaf: a durastate region is compound
    assert result.document["states"]["upload"]["states"]["idle"] == {"initial": "_leaf", "states": {"_leaf": {}}}
    exe = run_to_end(result.document, ("PUBLISH", "CLEAN", "PUBLISH"), max_seconds=0)
    assert exe.leaves == ["upload.scan.clean", "upload.publish.done", "upload.idle._leaf"]


def test_what_an_inline_region_cannot_hold_is_reported_at_its_json_path() -> None:
    config = {"id": "m", "initial": "p", "states": {"p": {"type": "parallel", "states": {
        "a": {"initial": "x", "states": {"x": {"invoke": {"src": "#other"}}}},
        "b": {"on": {"GO": {"target": "b", "guard": {"type": "xstate.stateIn", "stateValue": "#nope"}}}}}}}}
    where = {issue.location: issue.message for issue in xstate.convert(json.dumps(config)).issues}
    assert "inside a parallel state not even a durastate invoke maps" in where["states.p.states.a.states.x.invoke"]
    assert "stateIn: no state '#nope'" in where["states.p.states.b.on.GO.guard"]


def test_history_returns_to_the_last_payment_method() -> None:
    exe = run_to_end(_import("payment_history.json").document, ("SWITCH_CHECK", "NEXT", "PREVIOUS"), max_seconds=0)
    assert exe.active_path == "method.check"
    exe = run_to_end(_import("payment_history.json").document, ("NEXT", "PAY"), max_seconds=0)
    assert (exe.status, exe.outcome) == ("finished", "paid")


def test_targets_by_id_child_and_reentry() -> None:
    config = {"id": "m", "initial": "a", "states": {
        "a": {"id": "top", "initial": "x", "on": {
            "IN": ".y", "SELF": "a", "AGAIN": {"target": "a", "reenter": True}, "JUMP": "#deep"},
            "states": {"x": {}, "y": {"id": "deep"}}}}}
    doc = xstate.convert(json.dumps(config)).document
    on = doc["states"]["a"]["on"]
    assert on["IN"] == [{"target": "a.y", "internal": True}]
    # v5: a transition to its own source does not re-enter it, but it does leave the source's children and
    # enter its initial one again: an internal transition to the initial child
    assert on["SELF"] == [{"target": "a.x", "internal": True}]
    assert on["AGAIN"] == [{"target": "a"}]
    assert on["JUMP"] == [{"target": "a.y", "internal": True}]


def test_code_is_reported_at_its_json_path_never_guessed() -> None:
    config = {"id": "m", "initial": "idle", "states": {
        "idle": {"entry": ["track"], "on": {
            "GO": [{"target": "busy", "guard": "isReady"}, {"target": "busy", "guard": {"type": "stateIn"}},
                   {"target": "busy", "guard": "stateIn"}]},
            "after": {"SLOW": "busy"}},
        "busy": {"invoke": {"src": "fetchUser"}}}}
    result = xstate.convert(json.dumps(config))
    where = {issue.location: issue.message for issue in result.issues}
    assert "implemented in code" in where["states.idle.entry[0]"]
    assert "implemented in code" in where["states.idle.on.GO[0].guard"]
    assert "stateIn needs a state id ('#id') or a state value" in where["states.idle.on.GO[1].guard"]
    assert "stateIn maps to durastate's in_state only written as data" in where["states.idle.on.GO[2].guard"]
    assert "names an implementation in code" in where["states.idle.after.SLOW"]
    assert "actor implemented in code" in where["states.busy.invoke"]
    assert "on" not in result.document["states"]["idle"]  # the guarded transitions are left out, and said so


def test_a_parallel_state_directly_inside_a_parallel_state_is_reported() -> None:
    """XState ends the outer parallel state when the inner one is done; durastate, as SCXML, does not."""
    config = {"id": "m", "type": "parallel", "states": {
        "a": {"initial": "x", "states": {"x": {}, "y": {"type": "final"}}},
        "p": {"type": "parallel", "states": {"b": {"initial": "z", "states": {"z": {}}}}}}}
    result = xstate.convert(json.dumps(config))
    assert [i.location for i in result.issues] == ["states.p"]
    assert "directly inside a parallel state is not supported" in result.issues[0].message
