"""Properties of loading and of the semantics fixed alongside it.

- Loading never fails with anything but a :class:`DefinitionError` (bytes, text, data: whatever comes in).
- One load reports every injected defect, each at its path, and nothing a defect did not cause: fixing
  what was reported is always enough (no second round of issues).
- Event descriptors select exactly what a plain reading of SCXML's rule selects.
- A cancelled execution runs the exit actions of exactly its active states, leaf first.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durastate.engine import Definition, Event, Execution, load_definition, step
from durastate.errors import DefinitionError

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def load_or_issues(source: Any) -> Definition | list[str]:
    try:
        return load_definition(source)
    except DefinitionError as exc:
        return exc.issues


# -- loading never fails untyped -------------------------------------------------------------------------

YAML_BITS = ["id: d\n", "initial: a\n", "states:\n", "  a: {}\n", "  a: &x {on: {go: *x}}\n", "context: &c ",
             "{k: *c}\n", "- *c\n", "[", "]", "{", "}", ": ", "- ", "on:\n", "    ", "  b: {type: final}\n",
             ".nan", "1e400", "!!python/object:os.system\n", "\t", "\xff", "é", "<<: *x\n", "'", '"', "\n"]


@PROPS
@given(st.lists(st.sampled_from(YAML_BITS), max_size=25))
def test_any_text_loads_or_is_a_definition_error(bits: list[str]) -> None:
    load_or_issues("".join(bits) + "\n")


@PROPS
@given(st.binary(max_size=200))
def test_any_file_loads_or_is_a_definition_error(tmp_path_factory: Any, raw: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("raw")) / "x.yaml"
    path.write_bytes(raw)
    result = load_or_issues(path)
    assert isinstance(result, Definition | list)


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6))
any_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=12,
)
KEYS = ["id", "initial", "context", "states", "type", "on", "entry", "exit", "after", "invoke", "target",
        "guard", "actions", "internal", "seconds", "on_done", "on_error", "always", "history", "outcome"]


@PROPS
@given(st.data())
def test_any_data_in_any_place_loads_or_is_a_definition_error(data: st.DataObject) -> None:
    doc = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(1, 4))):
        node = doc
        for _ in range(data.draw(st.integers(0, 4))):
            children = [k for k, v in node.items() if isinstance(v, dict)]
            if not children:
                break
            node = node[data.draw(st.sampled_from(sorted(children)))]
        node[data.draw(st.sampled_from(KEYS))] = data.draw(any_value)
    if data.draw(st.booleans()):  # sometimes a cycle too
        node["loop"] = doc
    load_or_issues(doc)


# -- one load reports every defect, and only those ------------------------------------------------------

BASE: dict[str, Any] = {
    "id": "d",
    "initial": "a",
    "context": {"n": 0},
    "states": {
        "a": {"type": "compound", "initial": "a1", "on": {"stop": "c"}, "states": {
            "a1": {"on": {"go": "b"}, "entry": [{"assign": {"n": "$context.n"}}]},
            "a2": {"on": {"back": "a1"}},
        }},
        "b": {"on": {"next": {"target": "c", "guard": {"gt": ["$context.n", 0]}}}, "entry": [{"log": "hi"}],
              "after": {"seconds": 5, "target": "a"}},
        "c": {"type": "parallel", "on_done": "d", "states": {
            "r1": {"initial": "x", "states": {"x": {}}},
            "r2": {"initial": "y", "states": {"y": {}}},
        }},
        "d": {"type": "final"},
    },
}


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    return loop


# name -> (change the document, the path of the issue it must cause)
DEFECTS: dict[str, tuple[Any, str]] = {
    "unknown key": (lambda d: d["states"]["b"].update(entr=[]), "states.b.entr"),
    "bad target": (lambda d: d["states"]["a"]["states"]["a1"]["on"].update(go="nowhere"),
                   "states.a.states.a1.on.go[0].target"),
    "bad guard": (lambda d: d["states"]["b"]["on"]["next"].update(guard={"gtt": [1, 2]}),
                  "states.b.on.next[0].guard"),
    "bad action": (lambda d: d["states"]["b"].update(entry=[{"lgo": "hi"}]), "states.b.entry[0]"),
    "bad reference": (lambda d: d["states"]["a"]["states"]["a1"].update(entry=[{"assign": {"n": "$contxt.n"}}]),
                      "states.a.states.a1.entry[0].assign.n"),
    "type typo": (lambda d: d["states"]["c"].update(type="paralel"), "states.c.type"),
    "compound typo": (lambda d: d["states"]["a"].update(type="compund"), "states.a.type"),
    "initial not a name": (lambda d: d["states"]["a"].update(initial=5), "states.a.initial"),
    "seconds not a number": (lambda d: d["states"]["b"]["after"].update(seconds="soon"), "states.b.after.seconds"),
    "after target": (lambda d: d["states"]["b"]["after"].update(target="zz"), "states.b.after.target"),
    "bad descriptor": (lambda d: d["states"]["a"]["states"]["a2"].update(on={"back.": "a1"}),
                       "states.a.states.a2.on.back."),
    "reserved key": (lambda d: d["states"]["b"]["on"].update({"durastate.x": "a"}), "states.b.on.durastate.x"),
    "invoke not a mapping": (lambda d: d["states"]["a"]["states"]["a2"].update(invoke=7),
                             "states.a.states.a2.invoke"),
    "region not compound": (lambda d: d["states"]["c"]["states"].update(r2={}), "states.c.states.r2"),
    "final with on": (lambda d: d["states"]["d"].update(on={"x": "a"}), "states.d.on"),
    "missing id": (lambda d: d.pop("id"), "id"),
    "top-level history": (lambda d: d["states"].update(h={"type": "history"}), "states.h"),
    "state not a mapping": (lambda d: d["states"].update(e=5), "states.e"),
    "nan in context": (lambda d: d["context"].update(n=float("nan")), "context.n"),
    "cycle in context": (lambda d: d["context"].update(loop=_cycle()), "context.loop"),
    "nan in a value": (lambda d: d["states"]["b"]["entry"].append({"assign": {"m": float("inf")}}),
                       "states.b.entry[1].assign.m"),
}


def _at(issue: str, path: str) -> bool:
    return issue.startswith(path) and issue[len(path) : len(path) + 1] in (":", ".", "[")


@PROPS
@given(st.sets(st.sampled_from(sorted(DEFECTS))), st.booleans())
def test_one_load_reports_every_defect_and_nothing_else(defects: set[str], as_text: bool) -> None:
    doc = copy.deepcopy(BASE)
    for name in sorted(defects):
        DEFECTS[name][0](doc)
    cyclic = "cycle in context" in defects
    source: Any = doc
    if as_text and not cyclic:
        source = yaml.safe_dump(doc) if "nan" not in json.dumps(doc).lower() else doc
    result = load_or_issues(source)
    if not defects:
        assert isinstance(result, Definition)
        return
    assert isinstance(result, list), defects
    wanted = {DEFECTS[name][1] for name in defects}
    for path in wanted:
        assert any(_at(i, path) for i in result), (path, result)
    for issue in result:
        assert any(_at(issue, path) for path in wanted), (issue, defects)


# -- event descriptors -----------------------------------------------------------------------------------

DESCRIPTORS = ["*", "a", "a.b", "a.b.c", "a.*", "b", "ab"]
NAMES = ["a", "a.b", "a.b.c", "a.bc", "ab", "ab.c", "b.a", "c", "durastate.x"]


def reference_match(descriptor: str, name: str) -> bool:
    """SCXML's rule, written plainly: reserved names aside, ``*`` or a token-list prefix."""
    if name.startswith("durastate."):
        return False
    if descriptor == "*":
        return True
    tokens = [t for t in descriptor.split(".") if t != "*"]
    return name.split(".")[: len(tokens)] == tokens


transitions = st.lists(st.tuples(st.sampled_from(DESCRIPTORS), st.booleans()), max_size=5)


@PROPS
@given(transitions, transitions, st.lists(st.sampled_from(NAMES), min_size=1, max_size=4))
def test_selection_is_innermost_state_then_document_order_of_matching_descriptors(
    outer: list[tuple[str, bool]], inner: list[tuple[str, bool]], names: list[str]
) -> None:
    def on(ts: list[tuple[str, bool]], where: str) -> dict[str, Any]:
        out: dict[str, list[Any]] = {}
        for k, (descriptor, guard) in enumerate(ts):
            out.setdefault(descriptor, []).append({"guard": guard, "actions": [{"log": f"{where}{k}"}]})
        return out

    doc = {"id": "d", "initial": "p", "states": {"p": {"initial": "c", "on": on(outer, "outer"),
                                                        "states": {"c": {"on": on(inner, "inner")}}}}}
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id="d", context={})
    step(defn, exe, Event(name="durastate.start"), 0.0)
    for name in names:
        expected = None
        for where, ts in (("inner", inner), ("outer", outer)):
            # document order: keys in first-appearance order, then each key's list in order
            ordered = [(d, g, f"{where}{k}") for d in dict.fromkeys(d for d, _ in ts)
                       for k, (d2, g) in enumerate(ts) if d2 == d]
            hit = next((label for d, g, label in ordered if g and reference_match(d, name)), None)
            if hit is not None:
                expected = hit
                break
        res = step(defn, exe, Event(name=name), 0.0)
        assert res.logs == ([expected] if expected else []), (name, inner, outer, res.logs)


# -- exits at the end --------------------------------------------------------------------------------------

trees = st.recursive(st.just({}), lambda kids: st.lists(kids, min_size=1, max_size=3), max_leaves=8)


def build(tree: Any, events: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A definition from a shape (``{}`` a leaf, a list a compound), every state logging entry and exit,
    every leaf moving to a state chosen by each event."""
    paths: list[str] = []

    def node(shape: Any, path: str) -> dict[str, Any]:
        paths.append(path)
        name = path.rsplit(".", 1)[-1]
        out: dict[str, Any] = {"entry": [{"log": f"+{name}"}], "exit": [{"log": f"-{name}"}]}
        if isinstance(shape, list):
            out["states"] = {f"{name}_{i}": node(kid, f"{path}.{name}_{i}") for i, kid in enumerate(shape)}
            out["initial"] = f"{name}_0"
        return out

    top = {"s": node(tree, "s"), "t": node({}, "t")}
    leaves = [p for p in paths if "states" not in _get(top, p)] + ["t"]
    for k, leaf in enumerate(leaves):
        _get(top, leaf)["on"] = {e: paths[(k + i) % len(paths)] for i, e in enumerate(events)}
    return {"id": "tree", "initial": "s", "states": top}, paths


def _get(top: dict[str, Any], path: str) -> dict[str, Any]:
    parts = path.split(".")
    node = top[parts[0]]
    for p in parts[1:]:
        node = node["states"][p]
    return node


@PROPS
@given(trees, st.lists(st.sampled_from(["e0", "e1", "e2"]), max_size=6))
def test_cancel_runs_the_exit_actions_of_exactly_the_active_states_leaf_first(
    tree: Any, events: list[str]
) -> None:
    doc, _ = build(tree, ["e0", "e1", "e2"])
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id="tree", context={})
    step(defn, exe, Event(name="durastate.start"), 0.0)
    for name in events:
        step(defn, exe, Event(name=name), 0.0)
    active = exe.active_path
    assert active is not None
    res = step(defn, exe, Event(name="durastate.cancel"), 0.0)
    assert res.logs == [f"-{part}" for part in reversed(active.split("."))]
    assert exe.status == "cancelled"
