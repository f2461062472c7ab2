"""What a definition file may contain: plain JSON-able data, UTF-8, each key once, every issue in one report.

Each test goes through the entry points a user hits (``load_definition``, ``DefinitionRegistry.from_dir``)
and checks that a bad document is refused with a :class:`DefinitionError` that says what and where, never
with an untyped exception, and never accepted to fail later at ``start``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, Event, Execution, load_definition, step
from durastate.engine.values import MAX_DEPTH
from durastate.errors import DefinitionError


def issues_of(doc: Any) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        load_definition(doc)
    return info.value.issues


def has(issues: list[str], *fragments: str) -> bool:
    return any(all(f in i for f in fragments) for i in issues)


# -- (1) the context is plain JSON ---------------------------------------------------------------------


def test_a_cyclic_yaml_anchor_in_the_context_is_refused_at_load_naming_the_path() -> None:
    issues = issues_of("id: d\ninitial: a\ncontext: &a {x: *a}\nstates: {a: {}}\n")
    assert len(issues) == 1 and issues[0].startswith("context.x: "), issues
    assert "cycl" in issues[0]


def test_a_cyclic_alias_elsewhere_is_refused_with_the_other_issues() -> None:
    doc = "id: d\ninitial: a\nstates:\n  a:\n    entry: &e [{log: *e}]\n    on: {go: nowhere}\n"
    issues = issues_of(doc)
    assert has(issues, "states.a.entry[0].log: ", "cycl"), issues
    assert has(issues, "states.a.on.go[0].target: no state 'nowhere'"), issues


@pytest.mark.parametrize(("context", "fragment"), [
    ("{x: .nan}", "context.x: nan is not a finite number"),
    ("{x: [1, -.inf]}", "context.x[1]: -inf is not a finite number"),
    ("{1: one}", "context: the key 1 is not a string"),
])
def test_non_finite_numbers_in_the_context_are_refused(context: str, fragment: str) -> None:
    issues = issues_of(f"id: d\ninitial: a\ncontext: {context}\nstates: {{a: {{}}}}\n")
    assert has(issues, fragment), issues


def test_infinity_in_a_json_definition_is_refused() -> None:
    issues = issues_of('{"id": "d", "initial": "a", "context": {"big": 1e400}, "states": {"a": {}}}')
    assert has(issues, "context.big: inf is not a finite number"), issues


def test_context_nesting_is_bounded_by_max_depth() -> None:
    def nest(levels: int) -> str:
        return "[" * levels + "]" * levels

    ok = load_definition(f"id: d\ninitial: a\ncontext: {{x: {nest(MAX_DEPTH - 1)}}}\nstates: {{a: {{}}}}\n")
    assert ok.initial_context()["x"] is not None
    issues = issues_of(f"id: d\ninitial: a\ncontext: {{x: {nest(MAX_DEPTH + 1)}}}\nstates: {{a: {{}}}}\n")
    assert has(issues, "context.x", f": nests deeper than {MAX_DEPTH}"), issues


@pytest.mark.parametrize("text", [
    "id: d\ninitial: a\nstates: {a: {}}\ncontext: {x: " + "[" * 1500 + "]" * 1500 + "}\n",
    '{"id": "d", "initial": "a", "states": {"a": {}}, "context": {"x": ' + "[" * 1500 + "]" * 1500 + "}}",
    "id: d\ninitial: a\nstates: {a: {on: {x: {guard: " + "{not: " * 1500 + "true" + "}" * 1500 + "}}}}\n",
])
def test_absurdly_deep_documents_are_a_definition_error_not_a_recursion_error(text: str) -> None:
    issues = issues_of(text)
    assert has(issues, "deep"), issues


def test_an_alias_bomb_is_refused_instead_of_expanded() -> None:
    lines = ["id: d", "initial: a", "states: {a: {}}", "context:", "  l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    issues = issues_of("\n".join(lines) + "\n")
    assert has(issues, "(document)", "alias"), issues


def test_the_context_of_a_python_built_definition_is_checked_too() -> None:
    doc: dict[str, Any] = {"id": "d", "initial": "a", "context": {"x": float("nan")}, "states": {"a": {}}}
    assert has(issues_of(doc), "context.x: nan is not a finite number")
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert has(issues_of({**doc, "context": cyclic}), "context.self", "cycl")


def test_a_shared_anchor_that_is_not_a_cycle_is_fine() -> None:
    defn = load_definition("id: d\ninitial: a\ncontext: {a: &v {n: 1}, b: *v}\nstates: {a: {}}\n")
    ctx = defn.initial_context()
    ctx["a"]["n"] = 2
    assert ctx["b"] == {"n": 1}  # independent copies in every execution
    exe = Execution(id="x", definition_id="d", context=defn.initial_context())
    assert step(defn, exe, Event(name="durastate.start"), 0.0).trace["status"] == "running"


# -- (2) files are UTF-8 ---------------------------------------------------------------------------------


def test_a_non_utf8_file_is_a_definition_error_saying_where(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("id: d\ninitial: a\ndescription: caf\xe9\nstates: {a: {}}\n".encode("latin-1"))
    with pytest.raises(DefinitionError) as info:
        load_definition(path)
    assert info.value.source == str(path)
    (issue,) = info.value.issues
    assert "not UTF-8" in issue and "line 3" in issue and "0xe9" in issue, issue


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "d", "initial": "a", "states": {"a": {}}}).encode())
    assert load_definition(path).id == "d"


def test_the_registry_reports_a_non_utf8_file_with_the_others(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("id: good\ninitial: a\nstates: {a: {}}\n", encoding="utf-8")
    (tmp_path / "bad.yaml").write_bytes(b"id: bad\ninitial: a\nstates: {a: {description: \xff}}\n")
    with pytest.raises(DefinitionError) as info:
        DefinitionRegistry.from_dir(tmp_path)
    assert [i for i in info.value.issues if i.startswith("bad.yaml: ") and "not UTF-8" in i]


# -- (3) every key once ------------------------------------------------------------------------------------


def test_a_state_defined_twice_in_yaml_is_refused_naming_the_key_and_both_lines() -> None:
    doc = "id: d\ninitial: a\nstates:\n  a: {}\n  b: {}\n  a: {on: {x: b}}\n"
    issues = issues_of(doc)
    assert has(issues, "states.a: ", "duplicate key 'a'", "line 4", "line 6"), issues


def test_every_duplicate_key_is_reported_with_the_other_issues() -> None:
    doc = (
        "id: d\ninitial: a\nstates:\n"
        "  a:\n    on: {go: b, go: nowhere}\n"
        "  b: {entry: [], entry: [{log: x}], on: {back: c}}\n"
    )
    issues = issues_of(doc)
    assert has(issues, "states.a.on.go: ", "duplicate key 'go'", "line 5"), issues
    assert has(issues, "states.b.entry: ", "duplicate key 'entry'", "line 6"), issues
    assert has(issues, "states.b.on.back[0].target: no state 'c'"), issues


def test_yaml_merge_keys_may_be_overridden_without_a_duplicate_error() -> None:
    doc = (
        "id: d\ninitial: a\nstates:\n"
        "  a: &base {on: {go: b}, description: base}\n"
        "  b:\n    <<: *base\n    description: overridden\n"
    )
    defn = load_definition(doc)
    assert defn.states["b"].description == "overridden" and "go" in defn.states["b"].on


def test_a_duplicate_key_in_json_is_refused_naming_the_key_and_both_lines() -> None:
    text = '{\n  "id": "d",\n  "initial": "a",\n  "states": {\n    "a": {},\n    "a": {"on": {"x": "a"}}\n  }\n}'
    issues = issues_of(text)
    assert has(issues, "states.a: ", "duplicate key 'a'", "line 5", "line 6"), issues


def test_a_duplicate_key_in_a_json_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    path.write_text('{"id": "d", "id": "e", "initial": "a", "states": {"a": {}}}', encoding="utf-8")
    with pytest.raises(DefinitionError) as info:
        load_definition(path)
    assert has(info.value.issues, "id: ", "duplicate key 'id'", "line 1"), info.value.issues


# -- (4) every issue in one report ---------------------------------------------------------------------------

BROKEN = """
id: d
initial: a
states:
  a:
    type: paralel
    states:
      left:
        initial: l1
        states:
          l1: {on: {go: l3}}
      right:
        initial: 5
        states:
          r1: {entry: [{lgo: x}]}
  b:
    on:
      durastate.x: nowhere
      ok:
        actions: [{send: {event: e, too: parent, data: {v: $contxt.v}}}]
    after: {seconds: soon, target: nowhere_either}
    invoke: 7
    on_done: a
"""

FIXED = """
id: d
initial: a
states:
  a:
    type: parallel
    states:
      left:
        initial: l1
        states:
          l1: {on: {go: l2}}
          l2: {}
      right:
        initial: r1
        states:
          r1: {entry: [{log: x}]}
  b:
    on:
      x: a
      ok:
        actions: [{send: {event: e, to: parent, data: {v: $context.v}}}]
    after: {seconds: 5, target: a}
    invoke: {definition: other}
    on_done: a
"""


def test_one_load_reports_the_issues_that_used_to_appear_only_after_fixing_the_first_ones() -> None:
    issues = issues_of(BROKEN)
    expected = [
        "states.a.type: ",                                      # structure
        "states.a.states.right.initial: ",
        "states.b.after.seconds: ",
        "states.b.invoke: ",
        "states.a.states.left.states.l1.on.go[0].target: no state 'l3'",   # semantics in a broken state
        "states.a.states.right.states.r1.entry[0]: unknown action 'lgo'",
        "states.b.on.durastate.x: ",                              # reserved key: and what is inside it
        "states.b.on.durastate.x[0].target: no state 'nowhere'",
        "states.b.on.ok[0].actions[0].send.too: unknown key",     # and the rest of the same action
        "states.b.on.ok[0].actions[0].send.data.v: unknown reference '$contxt.v'",
        "states.b.after.target: no state 'nowhere_either'",
    ]
    for want in expected:
        assert any(i.startswith(want) for i in issues), (want, issues)
    assert len(issues) == len(expected), issues
    assert "did you mean 'parallel'" in next(i for i in issues if i.startswith("states.a.type"))
    load_definition(FIXED)  # fixing what was reported is enough: no second round of issues


def test_structural_issues_do_not_hide_semantic_ones_when_python_objects_are_inside() -> None:
    def never(ctx: dict[str, Any], ev: Event) -> bool:
        return False

    doc = {"id": "d", "initial": "a", "description": 5,
           "states": {"a": {"on": {"go": {"target": "nowhere", "guard": never}}}}}
    issues = issues_of(doc)
    assert has(issues, "description: ")
    assert has(issues, "states.a.on.go[0].target: no state 'nowhere'"), issues


def test_an_unknown_state_type_without_a_close_match_does_not_invent_kind_issues() -> None:
    doc = {"id": "d", "initial": "a", "states": {
        "a": {"type": "zzz", "initial": "a1", "states": {"a1": {"on": {"go": "nowhere"}}}}}}
    issues = issues_of(doc)
    assert has(issues, "states.a.type: ")
    assert has(issues, "states.a.states.a1.on.go[0].target: no state 'nowhere'")
    assert len(issues) == 2, issues


# -- (5) one id per definition -------------------------------------------------------------------------------


def test_the_registry_names_both_files_of_a_duplicate_id(tmp_path: Path) -> None:
    for name in ("one.yaml", "two.json"):
        (tmp_path / name).write_text(json.dumps({"id": "same", "initial": "a", "states": {"a": {}}}))
    with pytest.raises(DefinitionError) as info:
        DefinitionRegistry.from_dir(tmp_path)
    issues = info.value.issues
    assert has(issues, "one.yaml: ", "'same'", "two.json"), issues
    assert has(issues, "two.json: ", "'same'", "one.yaml"), issues
