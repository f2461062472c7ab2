"""Loading and validating definitions: formats, shorthands, and every issue reported at once, with paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import (
    Definition,
    DefinitionRegistry,
    Event,
    Execution,
    State,
    Transition,
    load_definition,
    step,
)
from durastate.errors import DefinitionError, UnknownDefinition

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def issues_of(doc: Any) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        load_definition(doc)
    return info.value.issues


def base(**states: Any) -> dict[str, Any]:
    return {"id": "d", "initial": next(iter(states)), "states": states}


def test_the_headline_example_message() -> None:
    doc = {
        "id": "order",
        "initial": "pay",
        "states": {"pay": {"on": {"paid": [{"target": "shiped"}]}}, "shipped": {"type": "final"}},
    }
    assert issues_of(doc) == ["states.pay.on.paid[0].target: no state 'shiped' (did you mean 'shipped'?)"]


def test_all_issues_are_reported_at_once_structural_and_semantic() -> None:
    doc = """
id: order
initial: idel
states:
  idle:
    on:
      go: {target: pay, guard: {gtt: [1, 2]}}
    entr: []
  pay:
    after: {seconds: 0, target: idle}
    on: {paid: shiped}
  shipped: {type: final, on: {x: idle}}
"""
    issues = issues_of(doc)
    expected = [
        "states.idle.entr: unknown key (did you mean 'entry'?)",
        "initial: no child state 'idel' (did you mean 'idle'?)",
        "states.idle.on.go[0].guard: unknown guard 'gtt' (did you mean 'gt'?)",
        "states.pay.after.seconds: must be a positive number",
        "states.pay.on.paid[0].target: no state 'shiped' (did you mean 'shipped'?)",
        "states.shipped.on: not allowed on a final state",
    ]
    for want in expected:
        assert any(i.startswith(want) for i in issues), (want, issues)
    assert len(issues) == len(expected)
    with pytest.raises(DefinitionError) as info:
        load_definition(doc)
    assert "states.pay.on.paid[0].target" in str(info.value)


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        ({"id": "d", "states": {"a": {}}}, "initial: required"),
        ({"id": "d", "initial": "a", "states": {}}, "states: a definition needs at least one state"),
        (
            base(a={"states": {"x": {}}}),
            "states.a.initial: required: name the child state to start in (one of: x)",
        ),
        (base(a={"initial": "y", "states": {"x": {}}}), "states.a.initial: no child state 'y'"),
        (base(a={"type": "compound"}), "states.a.states: a compound state needs child states"),
        (
            base(a={"type": "atomic", "states": {"x": {}}}),
            "states.a.states: an atomic state has no child states",
        ),
        (
            base(a={"type": "parallel", "states": {"r": {}}}),
            "states.a.states.r: a region of a parallel state must be",
        ),
        (base(a={"type": "parallel"}), "states.a.states: a parallel state needs at least one region"),
        (
            base(
                a={"type": "parallel", "initial": "r", "states": {"r": {"initial": "x", "states": {"x": {}}}}}
            ),
            "states.a.initial: not allowed on a parallel state",
        ),
        (base(a={}, h={"type": "history"}), "states.h: a history state must be a child of a compound state"),
        (
            base(
                a={
                    "type": "parallel",
                    "states": {"r": {"initial": "x", "states": {"x": {}}}, "h": {"type": "history"}},
                }
            ),
            "states.a.states.h: a history state must be a child of a compound state "
            "(its parent here is parallel)",
        ),
        (
            base(a={"initial": "h", "states": {"h": {"type": "history"}, "x": {}}}),
            "states.a.states.h.target: required",
        ),
        (
            base(a={"initial": "x", "states": {"x": {}, "h": {"type": "history", "target": "nope"}}}),
            "states.a.states.h.target: no state 'nope'",
        ),
        (
            base(a={"initial": "x", "states": {"x": {}, "h": {"type": "history", "on": {"e": "x"}}}}),
            "states.a.states.h.on: not allowed on a history state",
        ),
        (base(a={"type": "final", "states": {"x": {}}}), "states.a.states: not allowed on a final state"),
        (base(a={"type": "final", "always": "a"}), "states.a.always: not allowed on a final state"),
        (base(a={"outcome": "x"}), "states.a.outcome: not allowed on a atomic state"),
        (base(a={"history": "deep"}), "states.a.history: not allowed on a atomic state"),
        (
            base(a={"after": {"seconds": -1, "target": "a"}}),
            "states.a.after.seconds: must be a positive number",
        ),
        (base(a={"after": {"target": "a"}}), "states.a.after.seconds: required"),
        (base(a={"on_done": "a"}), "states.a.on_done: not allowed on a state without `invoke` or `map`"),
        (
            base(a={"initial": "x", "on_done": "b", "states": {"x": {}}}, b={}),
            "states.a.on_done: never taken",
        ),
        (base(a={"invoke": {}}), "states.a.invoke.definition: required"),
        (
            base(a={"initial": "x", "invoke": {"task": {"python": "m:f"}}, "states": {"x": {}}}),
            "states.a.invoke: a compound state invokes a child definition only",
        ),
        (
            base(a={"on": {"durastate.timeout": "a"}}),
            "states.a.on.durastate.timeout: event names starting with 'durastate.'",
        ),
        (
            base(a={"on": {"e": {"actions": [{"assign": {}}]}}}),
            "states.a.on.e[0].actions[0].assign: takes a mapping",
        ),
        (
            base(a={"on": {"e": {"actions": [{"send": {"to": "parent"}}]}}}),
            "states.a.on.e[0].actions[0].send.event: required",
        ),
        (
            base(a={"on": {"e": {"actions": [{"send": {"event": "x", "too": "parent"}}]}}}),
            "states.a.on.e[0].actions[0].send.too: unknown key (did you mean 'to'?)",
        ),
        (
            base(a={"on": {"e": {"actions": [{"log": "a", "assign": {}}]}}}),
            "states.a.on.e[0].actions[0]: an action is one of",
        ),
        (
            base(a={"on": {"e": {"actions": ["not a callable"]}}}),
            "states.a.on.e[0].actions[0]: an action is one of",
        ),
        (
            base(a={"on": {"e": {"actions": [{"call": "no-dots"}]}}}),
            "states.a.on.e[0].actions[0].call: 'no-dots' is not a callable",
        ),
        (
            base(a={"on": {"e": {"actions": [{"call": "json:nothing_here"}]}}}),
            "states.a.on.e[0].actions[0].call: 'json' has no attribute 'nothing_here'",
        ),
        (base(a={"on": {"e": {"actions": [{"call": "json:__name__"}]}}}), "is not callable"),
        (
            base(a={"on": {"e": {"guard": {"eq": [1]}, "target": "a"}}}),
            "states.a.on.e[0].guard.eq: takes a list of 2 values",
        ),
        (
            base(a={"on": {"e": {"guard": {"exists": "context.x"}, "target": "a"}}}),
            "states.a.on.e[0].guard.exists: takes a reference",
        ),
        (
            base(a={"on": {"e": {"actions": [{"assign": {"x": {"add": [1]}}}]}}}),
            "states.a.on.e[0].actions[0].assign.x.add: takes 2 argument(s), got 1",
        ),
        (
            base(a={"on": {"e": {"actions": [{"assign": {"x": "$contxt.y"}}]}}}),
            "unknown reference '$contxt.y'",
        ),
        (
            base(
                a={"on": {"e": "b.y"}},
                b={"type": "parallel", "states": {"y": {"initial": "z", "states": {"z": {}}}}},
            ),
            "states.a.on.e[0].target: 'b.y' is inside a region of the parallel state 'b'; target 'b' itself",
        ),
        (
            base(
                b={
                    "type": "parallel",
                    "states": {"y": {"initial": "z", "states": {"z": {"on": {"e": "a"}}}}},
                },
                a={},
            ),
            "states.b.states.y.states.z.on.e[0].target: 'a' is outside the parallel region 'b.y'",
        ),
        (base(**{"a.b": {}}), "states.a.b: state names cannot be empty or contain '.'"),
        (base(a={"tpye": "final"}), "states.a.tpye: unknown key (did you mean 'type'?)"),
        (
            base(a={"type": "finale"}),
            "states.a.type: must be 'atomic', 'compound', 'parallel', 'final' or 'history'",
        ),
        (
            base(a={"on": {"e": {"target": "a", "gaurd": True}}}),
            "states.a.on.e[0].gaurd: unknown key (did you mean 'guard'?)",
        ),
        (
            base(a={"after": {"seconds": 1, "traget": "a"}}),
            "states.a.after.traget: unknown key (did you mean 'target'?)",
        ),
        (
            {"id": "d", "initial": "a", "states": {"a": {}}, "contxt": {}},
            "contxt: unknown key (did you mean 'context'?)",
        ),
    ],
)
def test_each_rule_names_the_node(doc: Any, want: str) -> None:
    issues = issues_of(doc)
    assert any(i.startswith(want) or want in i for i in issues), issues


def test_yaml_on_key_and_yes_no_are_not_booleans() -> None:
    defn = load_definition(
        "id: d\ninitial: a\ncontext: {answer: yes, ok: true}\nstates:\n  a:\n    on:\n      go: a\n"
    )
    assert defn.context == {"answer": "yes", "ok": True}
    assert list(defn.states["a"].on) == ["go"]


def test_invalid_yaml_and_json_and_non_mapping() -> None:
    assert issues_of("id: [")[0].startswith("(document): invalid YAML at line")
    assert issues_of('{"id": ')[0].startswith("(document): invalid JSON at line")
    assert issues_of("- just\n- a list\n")[0].startswith("(document): a definition is a mapping")


def test_file_errors_carry_the_source(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("id: d\ninitial: a\nstates: {a: {on: {go: b}}}\n")
    with pytest.raises(DefinitionError) as info:
        load_definition(f)
    assert info.value.source == str(f) and str(f) in str(info.value)
    with pytest.raises(DefinitionError, match="cannot read"):
        load_definition(tmp_path / "missing.yaml")


def test_shorthands_normalise_to_the_same_model() -> None:
    short = load_definition(base(a={"on": {"go": "b", "x": {"target": "b"}}, "entry": {"log": "hi"}}, b={}))
    long = load_definition(
        base(a={"on": {"go": [{"target": "b"}], "x": [{"target": "b"}]}, "entry": [{"log": "hi"}]}, b={})
    )
    assert short == long
    assert short.states["a"].on["go"] == [Transition(target="b")]


def test_json_yaml_dict_and_python_built_give_the_same_definition(tmp_path: Path) -> None:
    doc = base(a={"on": {"go": "b"}}, b={"type": "final", "outcome": "ok"})
    (tmp_path / "d.json").write_text(json.dumps(doc))
    from_json = load_definition(tmp_path / "d.json")
    from_text = load_definition(json.dumps(doc))
    import yaml

    from_yaml = load_definition(yaml.safe_dump(doc))
    built = Definition(
        id="d",
        initial="a",
        states={"a": State(on={"go": [Transition(target="b")]}), "b": State(type="final", outcome="ok")},
    )
    assert from_json == from_text == from_yaml == built == load_definition(doc)
    assert load_definition(built.to_dict()) == built


def test_python_built_definitions_validate_the_same_way() -> None:
    with pytest.raises(DefinitionError) as info:
        Definition(
            id="d", initial="a", states={"a": State(on={"go": "shiped"}), "shipped": State(type="final")}
        )
    assert info.value.issues == ["states.a.on.go[0].target: no state 'shiped' (did you mean 'shipped'?)"]


def test_python_callables_may_be_passed_directly() -> None:
    seen: list[str] = []

    def remember(context: dict[str, Any], event: Event) -> None:
        seen.append(event.name)

    defn = Definition(id="d", initial="a", states={"a": State(on={"go": Transition(actions=[remember])})})
    exe = Execution(definition_id="d")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    step(defn, exe, Event(name="go"), 0.0)
    assert seen == ["go"]


def test_examples_load_and_registry_lookups() -> None:
    reg = DefinitionRegistry.from_dir(EXAMPLES)
    assert {"order", "payment"} <= set(reg.ids())
    assert reg.unknown_references() == []
    assert reg.get("order").id == "order" and "order" in reg
    with pytest.raises(UnknownDefinition) as info:
        reg.get("ordr")
    assert "order" in str(info.value)


def test_registry_reports_every_broken_file_and_duplicate_ids(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("id: a\ninitial: x\nstates: {x: {on: {go: y}}}\n")
    (tmp_path / "b.json").write_text('{"id": "b", "states": {"x": {}}}')
    (tmp_path / "c.yml").write_text("id: c\ninitial: x\nstates: {x: {}}\n")
    (tmp_path / "c2.yaml").write_text("id: c\ninitial: x\nstates: {x: {}}\n")
    (tmp_path / "notes.txt").write_text("ignored")
    with pytest.raises(DefinitionError) as info:
        DefinitionRegistry.from_dir(tmp_path)
    issues = info.value.issues
    assert any(i.startswith("a.yaml: states.x.on.go[0].target: no state 'y'") for i in issues)
    assert any(i.startswith("b.json: initial: required") for i in issues)
    assert any(i.startswith("c2.yaml: id: 'c' is also defined by c.yml") for i in issues)
    assert any(i.startswith("c.yml: id: 'c' is also defined by c2.yaml") for i in issues)


def test_registry_unknown_invoke_reference() -> None:
    reg = DefinitionRegistry([base(a={"invoke": {"definition": "ghost"}})])
    assert reg.unknown_references() == ["d: states.a.invoke.definition: no definition 'ghost' (known: d)"]


def test_registry_imports_python_defined_definitions_by_fqn() -> None:
    reg = DefinitionRegistry()
    exe = Execution(definition_id="ticket", definition_fqn="examples.python_defined:definition")
    defn = reg.for_execution(exe)
    assert defn.id == "ticket" and "ticket" in reg

