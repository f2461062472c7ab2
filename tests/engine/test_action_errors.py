"""``action_errors``: a failing guard or action fails the execution (the default), or raises SCXML's
``error.execution`` and the step goes on (``raise``); the ``fail`` and ``block`` actions; and what an event
says of where it came from (``$meta``: its kind, send id and origin)."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import Event, Execution, load_definition, step
from durastate.errors import DefinitionError


def _start(doc: dict[str, Any], *events: Event) -> Execution:
    defn = load_definition(doc)
    exe = Execution(id="e-1", definition_id=doc["id"], context=defn.initial_context())
    for i, ev in enumerate((Event(name="durastate.start"), *events)):
        step(defn, exe, ev, now=float(i))
    return exe


def _chart(entry: list[Any], errors: str | None = "raise", **more: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": "c", "initial": "a", "context": {"n": 0}, "states": {
        "a": {"entry": entry, "on": {"error.execution": {"target": "b", "actions": [
            {"assign": {"why": "$event.error", "kind": "$meta.kind", "send": "$meta.send_id"}}]}}, **more},
        "b": {"type": "final"}}}
    if errors is not None:
        doc["action_errors"] = errors
    return doc


def test_by_default_an_action_that_raises_fails_the_execution() -> None:
    exe = _start(_chart([{"assign": {"n": 1}}, {"assign": {"n": {"div": [1, 0]}}}, {"assign": {"n": 2}}], None))
    assert exe.status == "failed"
    assert exe.error is not None and exe.error.startswith("ZeroDivisionError")


def test_with_raise_a_failing_action_raises_error_execution_and_skips_the_rest_of_its_list() -> None:
    exe = _start(_chart([{"assign": {"n": 1}}, {"assign": {"n": {"div": [1, 0]}}}, {"assign": {"n": 2}}]))
    assert (exe.status, exe.outcome) == ("finished", "b")
    assert exe.context["n"] == 1  # what ran before the failure stays, what follows it never ran
    assert exe.context["kind"] == "platform" and exe.context["send"] is None
    assert exe.context["why"].startswith("ZeroDivisionError") and "a.entry" in exe.context["why"]


def test_the_fail_action_fails_the_execution_or_raises_error_execution_with_its_send_id() -> None:
    failing = [{"assign": {"n": 1}}, {"fail": {"error": "no route", "send_id": "s-9"}}, {"assign": {"n": 2}}]
    exe = _start(_chart(failing, None))
    assert (exe.status, exe.error) == ("failed", "no route")
    exe = _start(_chart(failing))
    assert (exe.status, exe.context) == ("finished", {
        "n": 1, "why": "no route", "kind": "platform", "send": "s-9"})


def test_an_error_inside_a_loop_ends_the_loop_and_its_list_but_not_the_next_block() -> None:
    exe = _start(_chart([
        {"block": [{"foreach": {"array": [1, 2, 3], "item": "x", "actions": [
            {"assign": {"n": {"add": ["$context.n", 1]}}}, {"fail": "stop"}]}}, {"assign": {"n": 100}}]},
        {"block": [{"assign": {"after": True}}]}]))
    assert exe.context["n"] == 1 and exe.context["after"] is True and exe.context["why"] == "stop"


def test_a_block_is_just_its_actions_without_raise() -> None:
    exe = _start(_chart([{"block": [{"assign": {"n": 1}}]}, {"block": [{"fail": "stop"}]}], "fail"))
    assert (exe.status, exe.error) == ("failed", "stop")


def test_a_guard_that_raises_is_false_and_raises_error_execution() -> None:
    doc = _chart([])
    doc["states"]["a"]["on"]["go"] = [{"target": "b", "guard": "tests.engine.test_action_errors:broken",
                                       "actions": [{"assign": {"n": 99}}]}]
    exe = _start(doc, Event(name="go"))
    assert (exe.status, exe.outcome, exe.context["n"]) == ("finished", "b", 0)
    assert exe.context["why"].startswith("RuntimeError: broken guard")
    doc.pop("action_errors")
    assert _start(doc, Event(name="go")).status == "failed"


def broken(ctx: dict[str, Any], ev: Event) -> bool:
    raise RuntimeError("broken guard")


def test_meta_tells_the_kind_the_send_id_and_the_origin_of_an_event() -> None:
    doc = {"id": "m", "initial": "a", "context": {}, "states": {
        "a": {"entry": [{"raise": "inner"}],
              "on": {"inner": {"target": "b", "actions": [{"assign": {"k1": "$meta.kind"}}]}}},
        "b": {"entry": [{"send": {"event": "back", "to": "self", "id": "s-1"}}],
              "on": {"back": {"target": "c", "actions": [{"assign": {
                  "k2": "$meta.kind", "id": "$meta.send_id", "from": "$meta.origin", "via": "$meta.origin_type"}}]}}},
        "c": {"on": {"outside": {"target": "d", "actions": [{"assign": {
            "k3": "$meta.kind", "none": ["$meta.send_id", "$meta.origin", "$meta.origin_type"]}}]}}},
        "d": {"type": "final"}}}
    defn = load_definition(doc)
    exe = Execution(id="e-1", definition_id="m", context={})
    step(defn, exe, Event(name="durastate.start"), now=0.0)
    (key, sent), = exe.sends.items()
    assert key == "~send:s-1" and (sent.kind, sent.send_id, sent.origin) == ("external", "s-1", "e-1")
    step(defn, exe, Event(name="durastate.timeout", data={"path": key, "fire_at": exe.timers[key]}), now=1.0)
    step(defn, exe, Event(name="outside"), now=2.0)
    assert exe.context == {"k1": "internal", "k2": "external", "id": "s-1", "from": "e-1",
                           "via": "http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "k3": "external",
                           "none": [None, None, None]}


def test_a_send_with_an_id_location_stores_a_new_id_that_its_event_carries() -> None:
    doc = {"id": "s", "initial": "a", "context": {}, "states": {"a": {"entry": [
        {"send": {"event": "out", "to": "parent", "id_location": "first"}},
        {"send": {"event": "out", "to": "parent", "id_location": "second"}},
        {"send": {"event": "out", "to": "parent", "id": "$context.first"}}]}}}
    defn = load_definition(doc)
    exe = Execution(id="e-1", definition_id="s", parent_id="p-1", context={})
    res = step(defn, exe, Event(name="durastate.start"), now=0.0)
    first, second = exe.context["first"], exe.context["second"]
    assert first != second
    assert [(target, ev.send_id, ev.origin) for target, ev in res.emits] == [
        ("p-1", first, "e-1"), ("p-1", second, "e-1"), ("p-1", first, "e-1")]


def test_an_event_stored_before_meta_loads_and_dumps_as_it_was() -> None:
    old = '{"id":"x-1","name":"go","data":{"n":1}}'
    ev = Event.model_validate_json(old)
    assert (ev.kind, ev.send_id, ev.origin) == ("external", None, None)
    assert ev.model_dump_json() == old
    new = Event(name="go", kind="platform", send_id="s-1", origin="e-1")
    assert Event.model_validate_json(new.model_dump_json()) == new


@pytest.mark.parametrize(("doc", "why"), [
    ({"action_errors": "ignore"}, "action_errors"),
    ({"states": {"a": {"entry": [{"fail": {"why": "x"}}]}}}, "takes an error"),
    ({"states": {"a": {"entry": [{"block": {"assign": {"n": 1}}}]}}}, "takes a list of actions"),
    ({"states": {"a": {"entry": [{"send": {"event": "e", "id_location": "$context.x"}}]}}}, "id_location"),
    ({"states": {"a": {"entry": [{"assign": {"x": "$meta.nothing"}}]}}}, "$meta has $meta.kind"),
])
def test_bad_settings_are_definition_errors(doc: dict[str, Any], why: str) -> None:
    with pytest.raises(DefinitionError, match=why.replace("$", r"\$")):
        load_definition({"id": "bad", "initial": "a", "states": {"a": {}}, **doc})


def test_done_events_scxml_are_done_state_name_events_any_state_takes() -> None:
    doc: dict[str, Any] = {"id": "d", "initial": "work", "done_events": "scxml", "context": {}, "states": {
        "work": {"initial": "a", "states": {"a": {"on": {"go": "end"}}, "end": {"type": "final"}},
                 "on_done": {"actions": [{"assign": {"own": "$event.name"}}]},
                 "on": {"go": {"target": "after", "actions": [{"assign": {"left": True}}]}}},
        "after": {"on": {"done.state.work": {"target": "fin", "actions": [{"assign": {"outside": "$meta.kind"}}]}}},
        "fin": {"type": "final"}}}
    exe = _start(doc, Event(name="go"))  # a's own go wins: work completes, its done event is taken by on_done
    assert (exe.active_path, exe.context) == ("work.end", {"own": "done.state.work"})
    doc["states"]["work"]["on_done"] = []
    doc["states"]["work"]["states"]["a"]["on"]["go"] = {"target": "end", "actions": [{"raise": "go"}]}
    exe = _start(doc, Event(name="go"))  # work completes, the raised go leaves it, the done event is taken after
    assert (exe.status, exe.context) == ("finished", {"left": True, "outside": "platform"})
    default = load_definition({**doc, "done_events": "durastate"})
    assert default.tables.done_event[default.tables.index["work"]] == "durastate.done.work"


def test_done_events_scxml_need_unique_names() -> None:
    with pytest.raises(DefinitionError, match=r"its done event 'done\.state\.x' would also be that of states\.a"):
        load_definition({"id": "u", "initial": "a", "done_events": "scxml", "states": {
            "a": {"initial": "x", "states": {"x": {"initial": "y", "states": {"y": {}}}}},
            "b": {"initial": "x", "states": {"x": {"initial": "y", "states": {"y": {}}}}}}})
