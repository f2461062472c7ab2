"""The ``map`` of a state (durastate.engine.fanout): one child per item, a bounded window, outputs in item
order, fail fast or tolerate N, leaving cancels; and 10,000 items within DynamoDB's item size."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durastate.engine import Event, Execution, control, load_definition, step
from durastate.engine.checks import static_issues
from durastate.engine.explore import explore
from durastate.engine.ids import cancel_event_id
from durastate.engine.migration import apply_migration, plan_migration
from durastate.engine.model import CANCEL, FINISHED, START
from durastate.errors import DefinitionError
from durastate.store.dynamodb.limits import MAX_ITEM_BYTES, N, S, item_size

from .harness import Harness

WORK: dict[str, Any] = {
    "id": "work",
    "initial": "busy",
    "states": {
        "busy": {
            "on": {
                "ok": {"target": "done", "actions": [{"assign": {"result": {"mul": ["$context.n", 10]}}}]},
                "crash": {"target": "done", "actions": [{"assign": {"result": {"div": [1, 0]}}}]},
            }
        },
        "done": {"type": "final"},
    },
}


def fan(max_concurrency: int = 2, tolerate: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "id": "fan",
        "initial": "mapping",
        "context": {"list": [1, 2, 3, 4, 5]},
        "states": {
            "mapping": {
                "map": {
                    "items": "$context.list",
                    "invoke": {"definition": "work", "context": {"n": "$item", "i": "$index"}},
                    "max_concurrency": max_concurrency,
                    "tolerate": tolerate,
                    **extra,
                },
                "on": {"abort": "aborted"},
                "on_done": {"target": "done", "actions": [{"assign": {"outputs": "$event.outputs",
                                                                      "failed": "$event.failed"}}]},
                "on_error": {"target": "broken", "actions": [{"assign": {"error": "$event.error",
                                                                         "index": "$event.index"}}]},
            },
            "done": {"type": "final"},
            "broken": {"type": "final"},
            "aborted": {"type": "final"},
        },
    }


def running(h: Harness, parent: str = "p") -> list[str]:
    """The parent's running map children, by item index."""
    refs = h[parent].children
    return sorted((cid for cid, ref in refs.items() if ref.status == "running"), key=lambda c: refs[c].index or 0)


def test_children_start_in_a_window_with_their_item_and_index() -> None:
    h = Harness(fan(max_concurrency=2), WORK)
    p = h.start("fan", "p")
    assert running(h) == ["p~1", "p~2"]
    assert h["p~1"].context == {"n": 1, "i": 0} and h["p~2"].context == {"n": 2, "i": 1}
    assert {ref.kind for ref in p.children.values()} == {"map"}
    progress = p.maps["mapping"]
    assert (progress.total, progress.started, progress.running, progress.pending) == (5, 2, 2, [3, 4, 5])


def test_outputs_come_back_in_item_order_when_children_finish_out_of_order() -> None:
    h = Harness(fan(max_concurrency=5), WORK)
    h.start("fan", "p")
    for cid in ("p~4", "p~2", "p~5", "p~1", "p~3"):
        h.send(cid, "ok")
    p = h["p"]
    assert p.status == "finished" and p.active_path == "done"
    assert [o["result"] for o in p.context["outputs"]] == [10, 20, 30, 40, 50]
    assert p.context["outputs"][0] == {"n": 1, "i": 0, "result": 10}  # the child's whole final context
    assert p.maps == {} and p.children == {}


def test_output_selects_what_the_map_keeps_of_each_child() -> None:
    h = Harness(fan(max_concurrency=3, output="$event.output.result"), WORK)
    h.start("fan", "p")
    for cid in ("p~3", "p~1", "p~2", "p~5", "p~4"):
        h.send(cid, "ok")
    assert h["p"].context["outputs"] == [10, 20, 30, 40, 50]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(0, 50), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_any_finishing_order_keeps_the_window_and_the_item_order(
    max_concurrency: int, values: list[int], rnd: Any
) -> None:
    """Whatever order the children finish in, never more than max_concurrency run, each item gets exactly one
    child, and the outputs are in item order."""
    defn = fan(max_concurrency=max_concurrency, output="$event.output.result")
    defn["context"] = {"list": values}
    h = Harness(defn, WORK)
    h.start("fan", "p")
    started: list[int] = []
    while h["p"].status == "running":
        now = running(h)
        assert 1 <= len(now) <= max_concurrency
        assert len(now) == min(max_concurrency, len(values) - h["p"].maps["mapping"].done)
        started.extend(h["p"].children[c].index or 0 for c in now if h[c].context["i"] not in started)
        h.send(rnd.choice(now), "ok")
    assert sorted(set(started)) == list(range(len(values)))
    assert h["p"].context["outputs"] == [v * 10 for v in values]


def test_an_empty_list_takes_on_done_at_once() -> None:
    defn = fan()
    defn["context"] = {"list": []}
    h = Harness(defn, WORK)
    p = h.start("fan", "p")
    assert p.status == "finished" and p.context["outputs"] == [] and p.context["failed"] == []


@pytest.mark.parametrize("items", [None, {"a": 1}, "text", 3])
def test_items_that_are_not_a_list_fail_the_step_clearly(items: Any) -> None:
    defn = fan()
    defn["context"] = {"list": items}
    h = Harness(defn, WORK)
    p = h.start("fan", "p")
    assert p.status == "failed"
    assert "map items must evaluate to a JSON array" in (p.error or "")
    assert "states.mapping.map.items" in (p.error or "")
    assert h.exes.keys() == {"p"}  # no child started


def test_fail_fast_cancels_the_running_children_and_on_error_gets_the_first_failure() -> None:
    h = Harness(fan(max_concurrency=3), WORK)
    h.start("fan", "p")
    h.send("p~1", "ok")
    h.send("p~3", "crash")
    p = h["p"]
    assert p.active_path == "broken"
    assert p.context["index"] == 2 and "ZeroDivisionError" in p.context["error"]
    assert h["p~2"].status == "cancelled" and h["p~4"].status == "cancelled"  # the window at the failure
    assert "p~5" not in h.exes  # the last item never started
    assert h["p~1"].status == "finished"


def test_tolerate_n_failures_then_on_done_marks_them() -> None:
    h = Harness(fan(max_concurrency=5, tolerate=2, output="$event.output.result"), WORK)
    h.start("fan", "p")
    for cid, what in (("p~2", "crash"), ("p~1", "ok"), ("p~4", "crash"), ("p~3", "ok"), ("p~5", "ok")):
        h.send(cid, what)
    p = h["p"]
    assert p.active_path == "done"
    assert p.context["outputs"] == [10, None, 30, None, 50]
    assert [(f["index"], f["child_id"], f["status"]) for f in p.context["failed"]] == [
        (1, "p~2", "failed"), (3, "p~4", "failed")]
    assert all("ZeroDivisionError" in f["error"] for f in p.context["failed"])


def test_one_failure_more_than_tolerated_takes_on_error() -> None:
    h = Harness(fan(max_concurrency=5, tolerate=1), WORK)
    h.start("fan", "p")
    h.send("p~2", "crash")
    assert h["p"].active_path == "mapping"
    h.send("p~5", "crash")
    p = h["p"]
    assert p.active_path == "broken" and p.context["index"] == 4
    assert {h[c].status for c in ("p~1", "p~3", "p~4")} == {"cancelled"}


@pytest.mark.parametrize(("tolerate", "accepted"), [("40%", 2), ("39%", 1), ("0%", 0), ("100%", 5)])
def test_tolerate_as_a_percentage_of_the_items_rounds_down(tolerate: str, accepted: int) -> None:
    h = Harness(fan(max_concurrency=5, tolerate=tolerate), WORK)  # type: ignore[arg-type]
    h.start("fan", "p")
    for n in range(1, min(accepted, 4) + 1):
        h.send(f"p~{n}", "crash")
        assert h["p"].active_path == "mapping", n  # within the percentage: the map goes on
    if accepted == 5:
        h.send("p~5", "crash")
        assert h["p"].active_path == "done" and len(h["p"].context["failed"]) == 5
        return
    h.send(f"p~{accepted + 1}", "crash")
    assert h["p"].active_path == "broken" and h["p"].context["index"] == accepted


RETRY = {"max_attempts": 3, "backoff": {"initial": 10, "factor": 2}}


def retrying(**extra: Any) -> dict[str, Any]:
    defn = fan(max_concurrency=2, output="$event.output.result", **extra)
    defn["states"]["mapping"]["map"]["invoke"]["retry"] = RETRY
    return defn


def test_a_failed_item_is_retried_as_a_new_child_after_the_backoff_and_keeps_its_slot() -> None:
    h = Harness(retrying(), WORK)
    h.start("fan", "p")
    assert running(h) == ["p~1", "p~2"]
    h.send("p~1", "crash")  # attempt 1 of item 0 failed: a retry in 10 s, its slot held
    p = h["p"]
    assert running(h) == ["p~2"] and p.maps["mapping"].failed == 0 and "p~3" not in h.exes
    assert p.timers == {"~invoke:mapping": h.now + 10}
    h.advance(10)
    assert running(h) == ["p~3", "p~2"]  # the new try of item 0 (a new child id, by index), not item 2
    assert h["p"].children["p~3"].index == 0 and h["p"].children["p~3"].attempt == 2
    assert h["p~3"].context["n"] == 1  # the same item
    h.send("p~3", "crash")  # attempt 2 failed: the next wait is 20 s
    h.advance(19)
    assert "p~4" not in h.exes
    h.advance(1)
    assert h["p"].children["p~4"].attempt == 3
    h.send("p~4", "ok")  # the third try succeeds
    for cid in ("p~2", "p~5", "p~6", "p~7"):
        h.send(cid, "ok")
    p = h["p"]
    assert p.active_path == "done" and p.context["outputs"] == [10, 20, 30, 40, 50] and p.context["failed"] == []
    assert p.timers == {}


def test_an_item_whose_tries_run_out_fails_the_map_like_any_failed_child() -> None:
    h = Harness(retrying(), WORK)
    h.start("fan", "p")
    for cid in ("p~1",):
        h.send(cid, "crash")
    h.advance(10)
    h.send("p~3", "crash")
    h.advance(20)
    h.send("p~4", "crash")  # the third and last try
    p = h["p"]
    assert p.active_path == "broken" and p.context["index"] == 0 and "ZeroDivisionError" in p.context["error"]
    assert h["p~2"].status == "cancelled" and p.timers == {}


def test_retry_on_names_the_errors_retried_and_leaving_disarms_the_retry() -> None:
    defn = retrying(tolerate=5)
    defn["states"]["mapping"]["map"]["invoke"]["retry"] = {**RETRY, "on": ["TimeoutError"]}
    h = Harness(defn, WORK)
    h.start("fan", "p")
    h.send("p~1", "crash")  # a ZeroDivisionError: not retried, counted as failed at once
    assert h["p"].maps["mapping"].failed == 1 and h["p"].timers == {}
    h2 = Harness(retrying(), WORK)
    h2.start("fan", "p")
    h2.send("p~1", "crash")
    assert h2["p"].timers
    res = h2.apply("p", Event(name="abort"))
    assert res is not None and h2["p"].timers == {} and h2["p"].active_path == "aborted"
    h2.advance(60)
    assert "p~3" not in h2.exes  # the disarmed retry never starts


def test_a_failure_without_on_error_fails_the_parent() -> None:
    defn = fan()
    del defn["states"]["mapping"]["on_error"]
    h = Harness(defn, WORK)
    h.start("fan", "p")
    h.send("p~2", "crash")
    p = h["p"]
    assert p.status == "failed" and "map child p~2 (item 1) failed" in (p.error or "")
    assert h["p~1"].status == "cancelled"


def test_leaving_the_map_state_cancels_its_running_children() -> None:
    h = Harness(fan(max_concurrency=3), WORK)
    h.start("fan", "p")
    h.send("p~1", "ok")
    res = h.apply("p", Event(name="abort"))
    assert res is not None
    cancels = sorted(target for target, ev in res.emits if ev.name == CANCEL)
    assert cancels == ["p~2", "p~3", "p~4"]
    assert all(ev.id == cancel_event_id(t) for t, ev in res.emits if ev.name == CANCEL)
    h.drain()
    p = h["p"]
    assert p.active_path == "aborted" and p.maps == {} and p.children == {}
    assert {h[c].status for c in ("p~2", "p~3", "p~4")} == {"cancelled"}


def test_cancelling_the_parent_cancels_its_map_children() -> None:
    h = Harness(fan(max_concurrency=2), WORK)
    h.start("fan", "p")
    h.send("p", CANCEL)
    assert h["p"].status == "cancelled"
    assert h["p~1"].status == "cancelled" and h["p~2"].status == "cancelled"


def test_late_and_forged_notices_change_nothing() -> None:
    h = Harness(fan(max_concurrency=2), WORK)
    h.start("fan", "p")
    p = h["p"]
    for cid in ("p~9", "p~3", "nobody"):  # never started, not started yet, not a child id
        res = step(h.reg.get("fan"), p, Event(name=FINISHED, data={"child_id": cid, "status": "finished"}), 0.0)
        assert res.ignored
    h.send("p~1", "ok")
    again = step(h.reg.get("fan"), p, Event(name=FINISHED, data={"child_id": "p~1", "status": "finished"}), 0.0)
    assert again.ignored and p.maps["mapping"].done == 1  # a duplicate notice of a child already counted


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"invoke": {"definition": "work", "retry": {"max_attempts": 0}}}, "map.invoke.retry.max_attempts"),
        ({"tolerate": "150%"}, "map.tolerate: must be a whole number of failed children from 0 (e.g. 3) or a "
                               "percentage of the items from 0% to 100%"),
        ({"tolerate": "ten%"}, "got 'ten%'"),
        ({"tolerate": "10"}, "got '10'"),
        ({"tolerate": True}, "got True"),
        ({"invoke": {"definition": "work", "context": {"x": "$event.x"}}}, "sees $item, $index and $context"),
        ({"items": 5}, "map.items: must be a list or an expression"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"tolerate": -1}, "tolerate"),
        ({"itmes": []}, "did you mean 'items'"),
    ],
)
def test_a_bad_map_is_a_validation_issue(change: dict[str, Any], message: str) -> None:
    defn = fan()
    defn["states"]["mapping"]["map"].update(change)
    with pytest.raises(DefinitionError) as err:
        load_definition(defn)
    assert message in str(err.value)


def test_map_with_invoke_or_on_a_compound_state_is_refused() -> None:
    defn = fan()
    defn["states"]["mapping"]["invoke"] = {"definition": "work"}
    defn["states"]["other"] = {"initial": "a", "states": {"a": {}},
                               "map": {"items": [], "invoke": {"definition": "work"}}}
    with pytest.raises(DefinitionError) as err:
        load_definition(defn)
    text = str(err.value)
    assert "states.mapping.map: a state either invokes one child" in text
    assert "states.other.map: only an atomic state" in text


# -- size: 10,000 items in one DynamoDB item --------------------------------------------------------------

ITEMS = 10_000


def stored_size(exe: Execution) -> int:
    """The size DynamoDB counts for the execution's item as the DynamoDB store writes it (the JSON of the
    execution in ``data``, plus its key and the attributes broken out for listings and dedupe)."""
    item = {"id": S(exe.id), "data": S(exe.model_dump_json()), "version": N(exe.version + 1),
            "definition_id": S(exe.definition_id), "status": S(exe.status), "active_path": S("mapping"),
            "created_at": N(1.7e9), "updated_at": N(1.7e9), "rids": {"L": [S("~finished:p~12345")] * 8}}
    return item_size(item)


def run_big_map(output: str, child_output: dict[str, Any]) -> tuple[int, Execution]:
    """Run a map over 10,000 order ids to the end, the children finishing in waves; the largest item seen."""
    defn = load_definition({
        "id": "big", "initial": "mapping",
        "states": {
            "mapping": {
                "map": {"items": "$context.orders", "invoke": {"definition": "work", "context": {"order": "$item"}},
                        "max_concurrency": 100, "output": output},
                "on_done": {"target": "done", "actions": [{"assign": {"outputs": "$event.outputs"}}]},
            },
            "done": {"type": "final"},
        },
    })
    orders = [f"order-{i:05d}" for i in range(ITEMS)]
    exe = Execution(id="p", definition_id="big", context={"orders": orders})
    res = step(defn, exe, Event(name=START), 0.0)
    largest = stored_size(exe)
    finished = 0
    while exe.status == "running":
        for cid in [c for c, ref in exe.children.items() if ref.status == "running"]:
            out = {"order": orders[exe.children[cid].index or 0], **child_output}
            res = step(defn, exe, Event(name=FINISHED, data={"child_id": cid, "status": "finished", "output": out}),
                       1.0)
            assert not res.ignored
            finished += 1
            if finished % 1000 == 0 or finished == ITEMS - 1:
                largest = max(largest, stored_size(exe))
    assert finished == ITEMS and exe.status == "finished"
    assert [o if isinstance(o, int) else o["cents"] for o in exe.context["outputs"]][:3] == [1234] * 3
    return largest, exe


def test_ten_thousand_items_fit_in_one_dynamodb_item() -> None:
    """10,000 order ids (11 characters), each child's output one small number kept with ``output``: the
    parent item stays under DynamoDB's 400 KB (the measured numbers are in docs/definitions.md)."""
    largest, exe = run_big_map("$event.output.cents", {"cents": 1234})
    assert largest < MAX_ITEM_BYTES, largest  # measured: 288,140 bytes, at entry (the list is in the context too)
    assert exe.context["outputs"] == [1234] * ITEMS


# -- static checks and exploration ---------------------------------------------------------------------------


def test_static_checks_accept_a_map_and_exploration_runs_every_finishing_order() -> None:
    defn = load_definition(fan(max_concurrency=2))
    assert static_issues(defn) == []
    found = explore(defn, limit=5000)
    assert found.complete and found.findings == []
    # 5 items, 2 at a time, each child finished or failed: the map's progress tells configurations apart
    assert found.configurations > 10


def test_exploration_finds_a_map_that_never_leaves() -> None:
    defn = fan()
    del defn["states"]["mapping"]["on_done"], defn["states"]["mapping"]["on"], defn["states"]["aborted"]
    found = explore(load_definition(defn), limit=5000)
    assert [f.kind for f in found.findings] == ["deadlock"]
    assert "child mapping finished" in found.findings[0].describe()


def test_a_migration_that_renames_the_map_state_moves_its_progress() -> None:
    old = load_definition(fan(max_concurrency=2))
    renamed = fan(max_concurrency=2)
    renamed["states"]["fanning"] = renamed["states"].pop("mapping")
    renamed["initial"] = "fanning"
    new = load_definition(renamed)
    exe = Execution(id="p", definition_id="fan", context=old.initial_context())
    step(old, exe, Event(name=START), 0.0)
    plan = plan_migration(exe, old, new, {"mapping": "fanning"})
    assert plan.unmapped == [] and plan.maps == {"mapping": "fanning"}
    apply_migration(exe, plan)
    assert list(exe.maps) == ["fanning"] and {ref.path for ref in exe.children.values()} == {"fanning"}
    res = step(new, exe, Event(name=FINISHED, data={"child_id": "p~1", "status": "finished", "output": {}}), 1.0)
    assert not res.ignored and exe.maps["fanning"].done == 1 and "p~3" in exe.children


def test_a_failed_step_of_a_map_is_redriven_from_the_progress_before_it() -> None:
    defn = load_definition(fan(max_concurrency=2, output={"div": [10, "$event.output.n"]}))
    exe = Execution(id="p", definition_id="fan", context=defn.initial_context())
    step(defn, exe, Event(name=START), 0.0)
    before = exe.model_copy(deep=True)
    bad = Event(name=FINISHED, data={"child_id": "p~1", "status": "finished", "output": {"n": 0}})
    step(defn, exe, bad, 1.0)
    assert exe.status == "failed" and "ZeroDivisionError" in (exe.error or "") and "map.output" in exe.error
    control.record_failure(exe, before, bad)
    control.redrive(exe, 2.0)
    assert exe.status == "running" and exe.maps == before.maps and exe.children == before.children
