"""The ``choose`` and ``foreach`` actions (SCXML's ``<if>`` and ``<foreach>``), and the XState transition keys
``parallel_domain`` and ``defer``, on the engine directly."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import Event, Execution, load_definition, step
from durastate.errors import DefinitionError


def _run(doc: dict[str, Any], *events: str) -> tuple[Execution, list[str]]:
    defn = load_definition(doc)
    exe = Execution(id="e-1", definition_id=doc["id"], context=defn.initial_context())
    logs: list[str] = []
    for i, name in enumerate(("durastate.start", *events)):
        logs.extend(step(defn, exe, Event(name=name), now=float(i)).logs)
    return exe, logs


def test_choose_takes_the_first_branch_whose_guard_holds_when_it_runs() -> None:
    exe, logs = _run({"id": "c", "initial": "a", "context": {"n": 0}, "states": {"a": {"entry": [
        {"assign": {"n": 2}},  # the guards below see it
        {"choose": [{"guard": {"eq": ["$context.n", 1]}, "actions": [{"log": "one"}]},
                    {"guard": {"eq": ["$context.n", 2]}, "actions": [{"log": "two"}, {"raise": "go"}]},
                    {"actions": [{"log": "other"}]}]}], "on": {"go": "b"}}, "b": {"type": "final"}}})
    assert (exe.status, logs) == ("finished", ["two"])


def test_choose_with_in_state_reads_the_configuration_of_inline_regions() -> None:
    region = {"initial": "x", "states": {"x": {}}}
    _, logs = _run({"id": "c", "initial": "p", "states": {"p": {
        "type": "parallel", "regions": "inline", "states": {"r1": region, "r2": {"initial": "y", "states": {"y": {
            "entry": [{"choose": [{"guard": {"in_state": "p.r1.x"}, "actions": [{"log": "r1 is in x"}]}]}]}}}}}}})
    assert logs == ["r1 is in x"]


def test_foreach_runs_once_per_item_of_a_copy_and_keeps_item_and_index() -> None:
    exe, _ = _run({"id": "f", "initial": "a", "context": {"xs": [1, 2, 3], "sum": 0}, "states": {"a": {"entry": [
        {"foreach": {"array": "$context.xs", "item": "x", "index": "i", "actions": [
            {"assign": {"sum": {"add": ["$context.sum", "$context.x"]}, "xs": [0]}}]}}]}}})
    # the loop walks the list as it was: assigning xs inside it changes nothing of the loop
    assert exe.context == {"xs": [0], "sum": 6, "x": 3, "i": 2}


def test_foreach_over_something_that_is_not_a_list_fails_the_step() -> None:
    exe, _ = _run({"id": "f", "initial": "a", "context": {"xs": 7}, "states": {"a": {"entry": [
        {"foreach": {"array": "$context.xs", "item": "x", "actions": [{"log": "never"}]}}]}}})
    assert exe.status == "failed" and "foreach array must evaluate to a list, got int" in (exe.error or "")


@pytest.mark.parametrize(("action", "message"), [
    ({"choose": []}, "takes a list of branches"),
    ({"choose": [{"when": True}]}, "a branch is {guard: G, actions: [...]}"),
    ({"choose": [{"guard": {"in_state": "nowhere"}, "actions": []}]}, "choose: in_state: no state 'nowhere'"),
    ({"foreach": {"array": [], "actions": []}}, "takes {array: VALUE, item: KEY"),
    ({"foreach": {"array": [], "item": "x", "each": []}}, "unknown key"),
    ({"foreach": {"array": [], "item": "x", "actions": [{"nope": 1}]}}, "unknown action 'nope'"),
])
def test_a_malformed_choose_or_foreach_is_a_definition_error(action: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        load_definition({"id": "bad", "initial": "a", "states": {"a": {"entry": [action]}}})
    assert message in str(err.value)


def test_choose_and_foreach_of_declarative_actions_run_no_user_code() -> None:
    defn = load_definition({"id": "d", "initial": "a", "states": {"a": {"entry": [
        {"choose": [{"guard": True, "actions": [{"foreach": {"array": [1], "item": "x", "actions": [
            {"log": "$context.x"}]}}]}]}]}}})
    assert defn.tables.runs_user_code is False


def _regions(on_p: dict[str, Any], on_a: dict[str, Any]) -> dict[str, Any]:
    def logged(name: str, **node: Any) -> dict[str, Any]:
        return {"entry": [{"log": f"enter:{name}"}], "exit": [{"log": f"exit:{name}"}], **node}

    return {"id": "x", "initial": "p", "states": {"p": logged("p", type="parallel", regions="inline", on=on_p,
                                                                    states={
        "r1": logged("r1", initial="a", states={"a": logged("a", on=on_a), "b": logged("b")}),
        "r2": logged("r2", initial="c", states={"c": logged("c"), "d": logged("d")})})}}


def test_parallel_domain_keeps_the_parallel_state_a_transition_between_regions_stays_in() -> None:
    _, scxml = _run(_regions({}, {"go": {"target": "p.r2.d"}}), "go")
    _, kept = _run(_regions({}, {"go": {"target": "p.r2.d", "parallel_domain": True}}), "go")
    entered = ["enter:p", "enter:r1", "enter:a", "enter:r2", "enter:c"]
    assert scxml[len(entered):] == ["exit:c", "exit:r2", "exit:a", "exit:r1", "exit:p", *entered[:-1], "enter:d"]
    assert kept[len(entered):] == ["exit:c", "exit:r2", "exit:a", "exit:r1", "enter:r1", "enter:a", "enter:r2",
                                   "enter:d"]


def test_defer_takes_an_ancestor_transition_only_when_no_region_takes_the_event() -> None:
    on_p = {"e": {"actions": [{"log": "p took e"}]}}
    _, scxml = _run(_regions(on_p, {"e": {"actions": [{"log": "a took e"}]}}), "e")
    assert scxml[-2:] == ["a took e", "p took e"]  # leaf c has no e of its own: it takes p's
    deferred = {"e": {"actions": [{"log": "p took e"}], "defer": True}}
    _, xstate = _run(_regions(deferred, {"e": {"actions": [{"log": "a took e"}]}}), "e")
    assert xstate[-1] == "a took e" and "p took e" not in xstate
    _, alone = _run(_regions(deferred, {}), "e")
    assert alone[-1] == "p took e"  # no state below took it
