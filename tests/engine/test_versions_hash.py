"""A definition's version is the hash of its canonical form: the same chart has one version however it is
written (YAML, JSON, Python; formatting, comments, key order, shorthands), and any change a running
execution could notice makes a new one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, Execution, load_definition
from durastate.engine.versions import VERSION_LENGTH, canonical_form, definition_version
from durastate.errors import UnknownDefinitionVersion

YAML = """
# an order, shipped
id: order
initial: idle
context: {count: 0, tags: [a, b]}
states:
  idle:
    on:
      submit: busy          # shorthand target
      poke: {actions: {assign: {count: 1}}}
  busy:
    type: atomic
    after: {seconds: 5, target: done}
  done: {type: final}
"""

JSON = json.dumps({
    "states": {
        "idle": {"on": {"submit": [{"target": "busy"}], "poke": [{"actions": [{"assign": {"count": 1}}]}]}},
        "busy": {"after": {"target": "done", "seconds": 5}},
        "done": {"type": "final"},
    },
    "context": {"tags": ["a", "b"], "count": 0},
    "initial": "idle",
    "id": "order",
}, indent=4)


def test_the_same_chart_written_differently_has_one_version() -> None:
    from_yaml, from_json = load_definition(YAML), load_definition(JSON)
    from_python = load_definition(from_yaml.to_dict())
    versions = {definition_version(d) for d in (from_yaml, from_json, from_python)}
    assert len(versions) == 1
    (version,) = versions
    assert len(version) == VERSION_LENGTH and int(version, 16) >= 0


def test_the_canonical_form_loads_back_into_the_same_version() -> None:
    defn = load_definition(YAML)
    again = load_definition(canonical_form(defn))
    assert canonical_form(again) == canonical_form(defn)
    assert again.paths == defn.paths
    assert definition_version(again) == definition_version(defn)


@pytest.mark.parametrize("change", [
    lambda d: d["states"].update(busy2=d["states"].pop("busy")),  # a state renamed (and its target dangles)
    lambda d: d["states"]["done"].update(outcome="shipped"),
    lambda d: d["context"].update(count=1),
    lambda d: d["states"]["busy"]["after"].update(seconds=6),
    lambda d: d.update(states={"busy": d["states"]["busy"], "idle": d["states"]["idle"],
                               "done": d["states"]["done"]}),  # order of states: the first is the default initial
])
def test_a_change_a_running_execution_could_notice_is_a_new_version(change: Any) -> None:
    doc = json.loads(JSON)
    before = definition_version(load_definition(doc))
    change(doc)
    if "busy2" in doc["states"]:
        doc["states"]["idle"]["on"]["submit"] = [{"target": "busy2"}]
    assert definition_version(load_definition(doc)) != before


def test_a_python_callable_is_hashed_by_its_reference() -> None:
    def check(ctx: dict[str, Any]) -> None:
        return None

    doc: dict[str, Any] = {"id": "py", "initial": "a", "states": {"a": {"entry": [{"call": check}]}}}
    by_object = load_definition(doc)
    assert canonical_form(by_object)["states"]["a"]["entry"][0]["call"].endswith(":" + check.__qualname__)
    assert definition_version(by_object) == definition_version(load_definition(doc))


def test_the_registry_runs_each_execution_on_its_version() -> None:
    old, new = load_definition(YAML), load_definition(YAML.replace("seconds: 5", "seconds: 9"))
    registry = DefinitionRegistry([old])
    registry.register(new)  # the file changed: the newest is what `get` returns, the old one is kept
    assert registry.get("order") is new
    on_old = Execution(id="x", definition_id="order", definition_version=definition_version(old))
    assert registry.for_execution(on_old) is old
    assert registry.for_execution(Execution(id="y", definition_id="order")) is new  # recorded none: newest
    lost = Execution(id="z", definition_id="order", definition_version="0" * VERSION_LENGTH)
    with pytest.raises(UnknownDefinitionVersion, match="durastate migrate"):
        registry.for_execution(lost)
