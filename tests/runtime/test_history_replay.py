"""Whole histories on every store, and the replay check over them: a history recorded by a worker replays
through its own definition without a difference, and a new version whose action changed is caught at the
first step that runs it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.replay import replay
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore
from tests.runtime.conftest import ev

NOTIFY = {"send": {"event": "counted", "data": {"n": "$context.count"}}}

CHART: dict[str, Any] = {
    "id": "tally",
    "initial": "idle",
    "context": {"count": 0, "note": None},
    "states": {
        "idle": {
            "on": {
                "inc": {"actions": [{"assign": {"count": {"add": ["$context.count", 1]}}}, NOTIFY]},
                "note": {"actions": [{"assign": {"note": "$event.text"}}]},
                "wait": "waiting",
                "stop": "done",
            },
        },
        "waiting": {"after": {"seconds": 30, "target": "idle"}},
        "done": {"type": "final", "outcome": "ok"},
    },
}


def changed(edit: Any) -> Any:
    doc = copy.deepcopy(CHART)
    edit(doc)
    return load_definition(doc)


def run_history(store: ExecutionStore) -> tuple[str, list[dict[str, Any]]]:
    """A tally run on ``store`` with history kept and a ring of 3: incs, a long note, a timer, a pause."""
    store.history, store.trace_max = True, 3
    registry = DefinitionRegistry()
    registry.register(load_definition(CHART))
    clock = ManualClock(1_000.0)
    rt = LocalRuntime(store, registry, clock=clock)
    eid = rt.start("tally", {"count": 5}, execution_id="h-1")
    for event in (ev("inc", "e1"), ev("note", "e2", text="x" * 5000), ev("inc", "e3"), ev("wait", "e4")):
        rt.send(eid, event)
        rt.run_until_idle()
        clock.advance(10)
    clock.advance(30)
    rt.run_until_idle()  # the timer fires: back to idle
    rt.suspend(eid)
    rt.run_until_idle()
    rt.send(eid, ev("inc", "e5"))  # held while suspended
    rt.run_until_idle()
    rt.resume(eid)
    rt.run_until_idle()
    rt.send(eid, ev("stop", "e6"))
    rt.run_until_idle()
    return eid, store.read_history(eid)


def test_history_is_complete_and_replays_clean(every_store: ExecutionStore) -> None:
    eid, history = run_history(every_store)
    events = [s.get("event") for s in history]
    assert events[:6] == ["durastate.start", "inc", "note", "inc", "wait", "durastate.timeout"]
    assert events[-1] == "stop"
    assert [s["index"] for s in history] == list(range(len(history)))
    assert len(every_store.read_trace(eid)) == 3
    note = history[2]
    assert note["data_cut"] and note["data_full"] == {"text": "x" * 5000}  # exact, for the replay
    assert note["context_cut"] and note["context_full"] == {"note": [None, "x" * 5000]}
    report = replay(load_definition(CHART), history, eid)
    assert report.ok and report.stopped is None, report.describe()
    assert report.checked == len([s for s in history if "control" not in s and "held" not in s]) + 1


@pytest.mark.parametrize(("edit", "index", "field"), [
    pytest.param(lambda d: d["states"]["idle"]["on"]["inc"]["actions"][0]["assign"]["count"].update(
        add=["$context.count", 2]), 1, "context", id="assign"),
    pytest.param(lambda d: d["states"]["idle"]["on"]["inc"]["actions"][1]["send"].update(data={"n": 0}),
                 1, "emits_digest", id="send-data"),
    pytest.param(lambda d: d["states"]["idle"]["on"]["inc"]["actions"][1]["send"].update(event="tallied"),
                 1, "emits", id="send-name"),
    pytest.param(lambda d: d["states"]["waiting"]["after"].update(seconds=60), 4, "timers", id="timer"),
    pytest.param(lambda d: d["states"]["idle"]["on"].update(stop="idle"), None, "to", id="target"),
])
def test_replay_catches_a_changed_action(every_store: ExecutionStore, edit: Any, index: int | None,
                                         field: str) -> None:
    eid, history = run_history(every_store)
    report = replay(changed(edit), history, eid)
    assert report.difference is not None, report.describe()
    expected = index if index is not None else history[-1]["index"]
    assert report.difference.index == expected
    assert field in report.difference.fields
    assert f"step #{expected}" in report.describe()


def add_fee(doc: dict[str, Any]) -> dict[str, Any]:
    return {"total": doc["input"]["amount"] + 1}


TASKED: dict[str, Any] = {
    "id": "billing",
    "initial": "charging",
    "context": {"amount": 5},
    "states": {
        "charging": {
            "invoke": {"task": {"python": "tests.runtime.test_history_replay:add_fee"},
                       "input": {"amount": "$context.amount"}},
            "on_done": {"target": "paid", "actions": [{"assign": {"result": "$event.output"}}]},
        },
        "paid": {"type": "final"},
    },
}


def test_a_history_with_a_task_replays_without_the_execution_secret(tmp_path: Any) -> None:
    """A task's id carries a MAC under the execution's secret, which no trace holds: the replay, which
    derives the task id without it, still matches the request and the answer to what was recorded."""
    from durastate.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "tasks.db", history=True)
    registry = DefinitionRegistry()
    registry.register(load_definition(TASKED))
    rt = LocalRuntime(store, registry, clock=ManualClock(1_000.0))
    rt.start("billing", execution_id="b-1")
    rt.run_until_idle()
    assert rt.get("b-1").status == "finished"  # type: ignore[union-attr]
    history = store.read_history("b-1")
    answer = next(s for s in history if s["event"] == "durastate.finished")
    assert answer["data"]["child_id"].count("~") == 2  # b-1~1~<mac>
    report = replay(load_definition(TASKED), history, "b-1")
    assert report.ok and report.stopped is None, report.describe()
    doc = copy.deepcopy(TASKED)
    doc["states"]["charging"]["invoke"]["input"] = {"amount": 7}
    report = replay(load_definition(doc), history, "b-1")
    assert report.difference is not None and report.difference.index == 0
    assert "emits_digest" in report.difference.fields
    store.close()


def test_replay_stops_at_a_reset_with_why(every_store: ExecutionStore) -> None:
    """A reset is an operator's move, not something a version decides: the replay checks the steps before
    it and stops there without a verdict, rather than report a difference that is only the reset's."""
    every_store.history = True
    registry = DefinitionRegistry()
    registry.register(load_definition(CHART))
    rt = LocalRuntime(every_store, registry, clock=ManualClock(1_000.0))
    eid = rt.start("tally", execution_id="r-1")
    rt.send(eid, ev("inc", "e1"))
    rt.run_until_idle()
    rt.reset(eid, ["waiting"], reason="stuck")
    rt.run_until_idle()
    rt.send(eid, ev("inc", "e2"))  # not handled in waiting: what the replay must not judge
    rt.run_until_idle()
    history = every_store.read_history(eid)
    assert [s.get("control") for s in history].count("reset") == 1
    report = replay(load_definition(CHART), history, eid)
    assert report.ok and report.checked == 2, report.describe()
    assert report.stopped is not None and "cannot replay past a reset" in report.stopped
    assert "waiting" in report.stopped


def test_a_history_with_a_run_timeout_replays_clean(every_store: ExecutionStore) -> None:
    """The run timeout's timer is armed by the start step and fires as a timeout step: both replay."""
    every_store.history = True
    doc = {**copy.deepcopy(CHART), "timeout": "1m", "on_timeout": "cancel"}
    registry = DefinitionRegistry()
    registry.register(load_definition(doc))
    clock = ManualClock(1_000.0)
    rt = LocalRuntime(every_store, registry, clock=clock)
    eid = rt.start("tally", execution_id="t-1")
    rt.run_until_idle()
    clock.advance(61)
    rt.run_until_idle()
    assert rt.get(eid).status == "cancelled"  # type: ignore[union-attr]
    history = every_store.read_history(eid)
    assert [s.get("event") for s in history] == ["durastate.start", "durastate.timeout"]
    report = replay(load_definition(doc), history, eid)
    assert report.ok and report.stopped is None and report.checked == 2, report.describe()
    shorter = replay(load_definition({**doc, "timeout": "2m"}), history, eid)
    assert shorter.difference is not None and shorter.difference.index == 0
    assert "timers" in shorter.difference.fields
