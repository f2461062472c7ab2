"""``on`` keys are SCXML event descriptors: token prefixes and ``*``, selected in document order.

Also the exact meaning of ``internal: true`` (a target equal to the source is still exited and re-entered).
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.tables import descriptor_matches
from durastate.errors import DefinitionError

from .harness import Harness


def run(doc: dict[str, Any], *events: str | Event) -> tuple[Execution, list[str]]:
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id=defn.id, context=defn.initial_context())
    logs = step(defn, exe, Event(name="durastate.start"), 0.0).logs
    for ev in events:
        logs += step(defn, exe, ev if isinstance(ev, Event) else Event(name=ev), 0.0).logs
    return exe, logs


def taken(on: dict[str, Any], event: str) -> str | None:
    """The log of the transition ``event`` selects among the ``on`` of a single state (None: ignored)."""
    doc = {"id": "d", "initial": "a", "states": {
        "a": {"on": {k: {"actions": [{"log": k}]} for k in on} | {
            k: v for k, v in on.items() if v is not None}}}}
    _, logs = run(doc, event)
    return logs[-1] if logs else None


@pytest.mark.parametrize(("key", "event", "matches"), [
    ("error", "error", True),
    ("error", "error.send.failed", True),
    ("error", "errors", False),
    ("error", "error_x", False),
    ("error.send", "error.send.failed", True),
    ("error.send", "error.sender", False),
    ("error.send", "error", False),
    ("error.*", "error.send.failed", True),
    ("error.*", "error", True),
    ("*", "anything.at.all", True),
    ("*", "x", True),
    ("go", "go", True),
    ("go", "gone", False),
])
def test_a_key_matches_its_name_and_every_name_it_is_a_token_prefix_of(key: str, event: str, matches: bool) -> None:
    assert taken({key: None}, event) == (key if matches else None)
    assert descriptor_matches(key, event) is matches


def test_document_order_decides_among_the_matching_transitions_of_a_state() -> None:
    assert taken({"*": None, "error": None, "error.send": None}, "error.send.failed") == "*"
    assert taken({"error": None, "*": None, "error.send": None}, "error.send.failed") == "error"
    assert taken({"error.send": None, "error": None}, "error.send.failed") == "error.send"
    assert taken({"error.send": None, "error": None}, "error.other") == "error"


def test_a_guard_that_does_not_hold_passes_to_the_next_match_in_document_order() -> None:
    on = {"error": {"guard": False, "actions": [{"log": "error"}]}, "error.send": None, "*": None}
    assert taken(on, "error.send.x") == "error.send"
    assert taken(on, "error.zzz") == "*"


def test_the_innermost_state_is_tried_first_whatever_the_descriptor() -> None:
    doc = {"id": "d", "initial": "p", "states": {
        "p": {"initial": "c", "on": {"error.send.failed": {"actions": [{"log": "outer exact"}]}},
              "states": {"c": {"on": {"*": {"actions": [{"log": "inner *"}]}}}}}}}
    assert run(doc, "error.send.failed")[1][-1] == "inner *"
    doc["states"]["p"]["states"]["c"]["on"] = {"error": {"guard": False, "actions": [{"log": "never"}]}}
    assert run(doc, "error.send.failed")[1][-1] == "outer exact"


def test_star_does_not_match_the_reserved_events() -> None:
    doc = {"id": "d", "initial": "work", "states": {
        "work": {"initial": "a", "on_done": "done", "after": {"seconds": 5, "target": "late"},
                 "on": {"*": {"actions": [{"log": "star"}]}},
                 "states": {"a": {"on": {"fin": "b"}}, "b": {"type": "final"}}},
        "done": {"type": "final"}, "late": {"type": "final"}}}
    exe, logs = run(doc, "fin")  # durastate.done.work selects on_done, not `*`
    assert exe.outcome == "done" and "star" not in logs
    h = Harness(doc)
    h.start("d", "t")
    h.advance(10)  # durastate.timeout takes `after`
    assert h["t"].outcome == "late" and "star" not in h.logs("t")
    exe, logs = run(doc, "durastate.cancel", "durastate.whatever")
    assert exe.status == "cancelled" and "star" not in logs


def test_raised_events_are_matched_the_same_way() -> None:
    doc = {"id": "d", "initial": "a", "states": {"a": {"on": {
        "go": {"actions": [{"raise": "error.send.failed"}]},
        "error.send": {"target": "b"}}}, "b": {}}}
    assert run(doc, "go")[0].active_path == "b"


def test_an_exact_name_still_needs_no_match_and_unmatched_events_are_ignored() -> None:
    doc = {"id": "d", "initial": "a", "states": {"a": {"on": {"go.fast": "b"}}, "b": {}}}
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id="d", context={})
    step(defn, exe, Event(name="durastate.start"), 0.0)
    assert step(defn, exe, Event(name="go"), 0.0).ignored  # a longer key does not match a shorter name
    assert step(defn, exe, Event(name="go.fast.now"), 0.0).trace["to"] == "b"


def test_an_event_a_parallel_state_matches_is_not_forwarded_to_its_regions() -> None:
    doc = {"id": "p", "initial": "both", "states": {
        "both": {"type": "parallel", "on": {"admin": {"actions": [{"log": "parent"}]}}, "states": {
            "r": {"initial": "r1", "states": {"r1": {"on": {"admin.ping": {"actions": [{"log": "region"}]},
                                                          "ping": {"actions": [{"log": "region ping"}]}}}}}}}}}
    h = Harness(doc)
    h.start("p", "p")
    h.send("p", "admin.ping")
    h.send("p", "ping")
    assert h.logs() == ["parent", "region ping"]


# -- validation: only valid descriptors --------------------------------------------------------------------


@pytest.mark.parametrize("key", ["error.", ".error", "a..b", "a*", "*.a", "a.*.b", "**", "e*rror", "a b",
                                 "durastate", "durastate.*", "durastate.done.a"])
def test_keys_that_are_not_valid_descriptors_are_issues(key: str) -> None:
    doc = {"id": "d", "initial": "a", "states": {"a": {"on": {key: "nowhere"}}}}
    with pytest.raises(DefinitionError) as info:
        load_definition(doc)
    issues = info.value.issues
    assert any(i.startswith(f"states.a.on.{key}: ") for i in issues), issues
    assert any(i.startswith(f"states.a.on.{key}[0].target: no state 'nowhere'") for i in issues), issues


@pytest.mark.parametrize("key", ["*", "error.*", "a.b.c", "order-paid", "order_paid", "order:paid", "é"])
def test_valid_descriptors_load(key: str) -> None:
    load_definition({"id": "d", "initial": "a", "states": {"a": {"on": {key: "a"}}}})


# -- internal: true, exactly ----------------------------------------------------------------------------------


def logged(name: str, **kw: Any) -> dict[str, Any]:
    return {"entry": [{"log": f"+{name}"}], "exit": [{"log": f"-{name}"}], **kw}


SRC = {"id": "d", "initial": "p", "states": {
    "p": logged("p", initial="a", states={"a": logged("a"), "b": logged("b")}, on={
        "to_self": {"target": "p", "internal": True},
        "to_child": {"target": "p.b", "internal": True},
        "to_out": {"target": "q", "internal": True}}),
    "q": logged("q")}}


def test_internal_to_a_descendant_keeps_the_source_and_exits_only_what_is_below_it() -> None:
    assert run(SRC, "to_child")[1][2:] == ["-a", "+b"]


def test_internal_with_the_source_itself_as_target_still_exits_and_reenters_it() -> None:
    exe, logs = run(SRC, "to_child", "to_self")
    assert logs[4:] == ["-b", "-p", "+p", "+a"] and exe.active_path == "p.a"


def test_internal_with_a_target_outside_the_source_is_external() -> None:
    assert run(SRC, "to_out")[1][2:] == ["-a", "-p", "+q"]
