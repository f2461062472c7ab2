"""Parent-close policy of an invoked child, on every sync store, through the worker.

What a Temporal user expects of ParentClosePolicy: when the parent leaves the invoking state or ends, its
child is cancelled (exit actions run: the default), terminated (no action runs), or abandoned — it runs on,
and its finished notice, when it comes, changes nothing in the parent and is traced as ignored, with why.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.errors import DefinitionError
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore

JOB: dict[str, Any] = {
    "id": "job",
    "initial": "working",
    "states": {
        "working": {"on": {"done": "ok"}, "exit": [{"assign": {"exited": True}}]},
        "ok": {"type": "final", "outcome": "ok"},
    },
}


def boss(policy: str | None) -> dict[str, Any]:
    invoke: dict[str, Any] = {"definition": "job"}
    if policy is not None:
        invoke["parent_close"] = policy
    return {
        "id": f"boss_{policy or 'default'}",
        "initial": "waiting",
        "states": {
            "waiting": {"invoke": invoke, "on": {"skip": "elsewhere", "quit": "gone"}, "on_done": "joined"},
            "elsewhere": {"on": {"quit": "gone"}},
            "joined": {"type": "final", "outcome": "joined"},
            "gone": {"type": "final", "outcome": "gone"},
        },
    }


@pytest.fixture
def store(every_store: ExecutionStore) -> ExecutionStore:
    return every_store


@pytest.fixture
def rt(store: ExecutionStore, clock: ManualClock) -> LocalRuntime:
    reg = DefinitionRegistry()
    for doc in (JOB, boss(None), boss("cancel"), boss("terminate"), boss("abandon")):
        reg.register(load_definition(doc))
    return LocalRuntime(store, reg, clock=clock)


def started(rt: LocalRuntime, policy: str | None) -> str:
    rt.start(f"boss_{policy or 'default'}", execution_id="b")
    rt.run_until_idle()
    (child,) = rt.get("b").children  # type: ignore[union-attr]
    return child


@pytest.mark.parametrize("policy", [None, "cancel"])
def test_by_default_leaving_the_state_cancels_the_child_and_its_exit_actions_run(
        rt: LocalRuntime, policy: str | None) -> None:
    child = started(rt, policy)
    rt.send("b", Event(id="s", name="skip"))
    rt.run_until_idle()
    c = rt.get(child)
    assert c is not None and (c.status, c.context.get("exited")) == ("cancelled", True)


def test_terminate_ends_the_child_without_running_its_actions(rt: LocalRuntime) -> None:
    child = started(rt, "terminate")
    rt.send("b", Event(id="q", name="quit"))  # the parent ends: the same policy applies
    rt.run_until_idle()
    c = rt.get(child)
    assert c is not None and c.status == "terminated" and "exited" not in c.context
    assert rt.get("b").outcome == "gone"  # type: ignore[union-attr]


def test_an_abandoned_child_runs_on_and_its_end_is_traced_as_ignored(rt: LocalRuntime) -> None:
    child = started(rt, "abandon")
    rt.send("b", Event(id="s", name="skip"))
    rt.run_until_idle()
    assert rt.get(child).status == "running"  # type: ignore[union-attr]
    b = rt.get("b")
    assert b is not None and b.active_path == "elsewhere" and b.children[child].abandoned
    rt.send(child, Event(id="d", name="done"))
    rt.run_until_idle()
    assert rt.get(child).status == "finished"  # type: ignore[union-attr]
    b = rt.get("b")
    assert b is not None and (b.status, b.active_path, b.children) == ("running", "elsewhere", {})
    last = rt.store.read_trace("b")[-1]
    assert last["ignored"] is True and "abandoned when b left waiting (parent_close: abandon)" in last["reason"]


@pytest.mark.parametrize("end", ["quit", "terminate"])
def test_a_parent_that_ends_leaves_an_abandoned_child_running(rt: LocalRuntime, end: str) -> None:
    child = started(rt, "abandon")
    if end == "terminate":
        rt.terminate("b", reason="done with it")
    else:
        rt.send("b", Event(id="q", name="quit"))
    rt.run_until_idle()
    assert rt.get("b").status in ("finished", "terminated")  # type: ignore[union-attr]
    assert rt.get(child).status == "running"  # type: ignore[union-attr]
    rt.send(child, Event(id="d", name="done"))
    rt.run_until_idle()
    assert rt.get(child).status == "finished"  # type: ignore[union-attr]
    assert "parent_close: abandon" in rt.store.read_trace("b")[-1]["reason"]


@pytest.mark.parametrize(("invoke", "says"), [
    ({"definition": "job", "parent_close": "detach"}, "parent_close"),
    ({"task": {"python": "tests.x:f"}, "parent_close": "abandon"}, "parent_close: for child executions"),
])
def test_a_bad_parent_close_is_refused(invoke: dict[str, Any], says: str) -> None:
    doc = boss(None)
    doc["states"]["waiting"]["invoke"] = invoke
    with pytest.raises(DefinitionError, match=says):
        load_definition(doc)


def test_a_map_refuses_a_parent_close() -> None:
    doc = {"id": "fan", "initial": "m", "context": {"xs": [1]}, "states": {
        "m": {"map": {"items": "$context.xs", "invoke": {"definition": "job", "parent_close": "abandon"}},
              "on_done": "end"},
        "end": {"type": "final"}}}
    with pytest.raises(DefinitionError, match="a map's children are always cancelled"):
        load_definition(doc)
