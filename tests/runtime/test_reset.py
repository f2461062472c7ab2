"""Reset to a named configuration, on every sync store, through the worker.

What a Temporal or Step Functions user expects of "put it back there": the execution moves to the states
named (a partial configuration completed with defaults), the timers and children of what it leaves go, those
of what it enters come, the context patch and the event sent with it apply in the same commit, and the trace
says who did it and why. A reset that cannot apply is refused before anything is queued, and one forged
under another's id changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.errors import ControlRefused
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore
from durastate.store.control import reset_event, suspend_event

from .conftest import FORK

FLOW: dict[str, Any] = {
    "id": "flow",
    "initial": "a",
    "context": {"n": 0},
    "states": {
        "a": {"on": {"next": "b"}, "exit": [{"assign": {"left_a": True}}]},
        "b": {"entry": [{"assign": {"entered_b": True}}], "after": {"seconds": 60, "target": "c"},
              "on": {"next": "c", "bump": {"actions": [{"assign": {"n": {"add": ["$context.n", 1]}}}]}}},
        "c": {"initial": "c1", "on_done": "done",
              "states": {"c1": {"on": {"next": "c2"}}, "c2": {"type": "final"}}},
        "broken": {"entry": [{"assign": {"x": {"div": [1, 0]}}}]},
        "done": {"type": "final", "outcome": "ok"},
    },
}

PAR: dict[str, Any] = {
    "id": "par",
    "initial": "p",
    "states": {
        "p": {"type": "parallel", "regions": "inline", "states": {
            "x": {"initial": "x1", "states": {"x1": {"on": {"go": "x2"}}, "x2": {}}},
            "y": {"initial": "y1", "states": {"y1": {"on": {"go": "y2"}}, "y2": {}}},
        }},
        "out": {},
    },
}


@pytest.fixture
def store(every_store: ExecutionStore) -> ExecutionStore:
    return every_store


@pytest.fixture
def rt(store: ExecutionStore, clock: ManualClock) -> LocalRuntime:
    reg = DefinitionRegistry()
    for doc in (FLOW, PAR, FORK):
        reg.register(load_definition(doc))
    return LocalRuntime(store, reg, clock=clock)


def run(rt: LocalRuntime, target: str, *events: Event) -> None:
    for e in events:
        rt.send(target, e)
    rt.run_until_idle()


def timers(store: ExecutionStore, exe_id: str, clock: ManualClock) -> list[str]:
    return sorted(path for eid, path, _ in store.due_timers(clock() + 10_000) if eid == exe_id)


def test_a_reset_moves_the_execution_disarms_what_it_leaves_and_arms_what_it_enters(
        rt: LocalRuntime, store: ExecutionStore, clock: ManualClock) -> None:
    rt.start("flow", execution_id="f")
    run(rt, "f", Event(id="n1", name="next"))
    assert timers(store, "f", clock) == ["b"]
    rt.reset("f", ["c.c1"], reason="skip the wait", by="ops@example")
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and (f.status, f.active_path, f.timers) == ("running", "c.c1", {})
    assert timers(store, "f", clock) == []
    last = rt.store.read_trace("f")[-1]
    assert (last["control"], last["by"], last["reason"], last["from"], last["to"]) == (
        "reset", "ops@example", "skip the wait", "b", "c.c1")
    rt.reset("f", ["b"])  # back into b: its timer is armed again, by the runtime's clock
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and f.timers == {"b": clock() + 60} and timers(store, "f", clock) == ["b"]
    run(rt, "f", Event(id="n2", name="next"), Event(id="n3", name="next"))
    f = rt.get("f")
    assert f is not None and (f.status, f.outcome) == ("finished", "ok")


def test_actions_run_only_when_asked_as_a_transition_would_run_them(rt: LocalRuntime) -> None:
    rt.start("flow", execution_id="quiet")
    rt.start("flow", execution_id="loud")
    rt.run_until_idle()
    rt.reset("quiet", ["b"])
    rt.reset("loud", ["b"], actions="transition")
    rt.run_until_idle()
    quiet, loud = rt.get("quiet"), rt.get("loud")
    assert quiet is not None and loud is not None
    assert "left_a" not in quiet.context and "entered_b" not in quiet.context
    assert loud.context["left_a"] is True and loud.context["entered_b"] is True


def test_the_context_patch_and_the_sent_event_apply_in_the_same_commit(rt: LocalRuntime) -> None:
    rt.start("flow", execution_id="f", context={"n": 5, "drop": "me"})
    rt.run_until_idle()
    version = rt.get("f").version  # type: ignore[union-attr]
    rt.reset("f", ["b"], context_patch={"n": 41, "drop": None}, send=("bump", {}))
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and f.context["n"] == 42 and "drop" not in f.context
    assert f.version == version + 1  # one commit
    assert [s["event"] for s in rt.store.read_trace("f")[-1]["steps"]] == ["bump"]


def test_a_reset_whose_entry_action_fails_is_refused_and_changes_nothing(rt: LocalRuntime) -> None:
    rt.start("flow", execution_id="f")
    rt.run_until_idle()
    rt.reset("f", ["broken"], actions="transition")  # 1/0 in the entry action of broken
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and (f.status, f.active_path) == ("running", "a")
    assert any("reset of f refused" in letter.reason for letter in rt.dead_letters)


def test_a_failed_execution_can_be_reset(rt: LocalRuntime, store: ExecutionStore) -> None:
    reg = DefinitionRegistry()
    reg.register(load_definition({**FLOW, "states": {**FLOW["states"], "a": {
        "on": {"next": "broken"}}}}))
    local = LocalRuntime(store, reg, clock=rt.clock)
    local.start("flow", execution_id="g")
    run(local, "g", Event(id="n1", name="next"))
    g = local.get("g")
    assert g is not None and g.status == "failed"
    run(local, "g", Event(id="held", name="next"))  # held for after a redrive/reset
    local.reset("g", ["b"], reason="fixed by hand")
    local.run_until_idle()
    g = local.get("g")
    assert g is not None and (g.status, g.active_path, g.error, g.held) == ("running", "c.c1", None, [])


def test_a_partial_configuration_of_an_inline_parallel_state_is_completed_with_defaults(rt: LocalRuntime) -> None:
    rt.start("par", execution_id="p")
    run(rt, "p", Event(id="g", name="go"))
    assert rt.get("p").leaves == ["p.x.x2", "p.y.y2"]  # type: ignore[union-attr]
    rt.reset("p", ["p.y.y2"])
    rt.run_until_idle()
    p = rt.get("p")
    assert p is not None and p.leaves == ["p.x.x1", "p.y.y2"]
    rt.reset("p", ["p.x.x2", "p.y.y1"])
    rt.run_until_idle()
    assert rt.get("p").leaves == ["p.x.x2", "p.y.y1"]  # type: ignore[union-attr]


def test_leaving_a_parallel_state_cancels_its_regions_and_entering_it_starts_new_ones(rt: LocalRuntime) -> None:
    rt.start("fork", execution_id="k")
    rt.run_until_idle()
    old = sorted(rt.get("k").children)  # type: ignore[union-attr]
    rt.reset("k", ["both"])
    rt.run_until_idle()
    k = rt.get("k")
    assert k is not None and k.active_path == "both"
    new = sorted(k.children)
    assert len(new) == 2 and not set(new) & set(old)
    assert [rt.get(c).status for c in old] == ["cancelled", "cancelled"]  # type: ignore[union-attr]
    assert [rt.get(c).status for c in new] == ["running", "running"]  # type: ignore[union-attr]
    run(rt, "k", Event(id="go", name="go"))
    assert rt.get("k").outcome == "joined"  # type: ignore[union-attr]


@pytest.mark.parametrize(("to", "says"), [
    (["nope"], "'nope' is not a state of 'flow'"),
    (["c.c1", "b"], "are both children of the top level"),
])
def test_a_configuration_that_does_not_exist_is_refused_and_nothing_is_queued(
        rt: LocalRuntime, to: list[str], says: str) -> None:
    rt.start("flow", execution_id="f")
    rt.run_until_idle()
    before = rt.get("f")
    with pytest.raises(ControlRefused, match=says):
        rt.reset("f", to)
    rt.run_until_idle()
    after = rt.get("f")
    assert after is not None and before is not None and after.version == before.version


def test_a_region_inside_a_parallel_of_child_executions_is_refused(rt: LocalRuntime) -> None:
    rt.start("fork", execution_id="k")
    rt.run_until_idle()
    with pytest.raises(ControlRefused, match="whose regions run as child executions"):
        rt.reset("k", ["both.left.l2"])


def test_an_ended_execution_is_not_reset(rt: LocalRuntime) -> None:
    rt.start("flow", execution_id="f")
    run(rt, "f", Event(id="n1", name="next"), Event(id="n2", name="next"), Event(id="n3", name="next"))
    assert rt.get("f").status == "finished"  # type: ignore[union-attr]
    with pytest.raises(ControlRefused, match="only a running, suspended or failed execution can be reset"):
        rt.reset("f", ["a"])


def test_a_suspended_execution_stays_suspended_and_holds_the_sent_event(rt: LocalRuntime) -> None:
    rt.start("flow", execution_id="f")
    run(rt, "f", suspend_event("f", event_id="s"))
    rt.reset("f", ["b"], send=("next", {}))
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and (f.status, f.active_path, [e.name for e in f.held]) == ("suspended", "b", ["next"])


def test_a_reset_under_an_id_its_data_does_not_derive_is_refused_and_the_true_one_still_applies(
        rt: LocalRuntime) -> None:
    rt.start("flow", execution_id="f")
    rt.run_until_idle()
    true = reset_event("f", ["b"], request="r1")
    forged = Event(id=true.id, name=true.name, data={**true.data, "to": ["c.c1"]})
    run(rt, "f", forged)
    assert rt.get("f").active_path == "a"  # type: ignore[union-attr]
    assert any("does not have the id durastate derives" in letter.reason for letter in rt.dead_letters)
    run(rt, "f", true)
    assert rt.get("f").active_path == "b"  # type: ignore[union-attr]


def test_the_client_resets_with_a_request_id_applied_once_and_starts_with_a_run_timeout(
        rt: LocalRuntime, store: ExecutionStore, clock: ManualClock) -> None:
    """What an application calls (DurastateClient over the runtime's queue and store): a reset is checked
    against the stored execution before anything is queued, a retried one (same request id) applies once,
    and a start's own timeout fails the run when it passes."""
    from durastate.client import DurastateClient

    client = DurastateClient(rt.transport, store, rt.registry, clock=clock)
    client.start("flow", execution_id="f", timeout="2m")
    rt.run_until_idle()
    with pytest.raises(ControlRefused, match="'nope' is not a state of 'flow'"):
        client.reset("f", ["nope"])
    first = client.reset("f", ["b"], context_patch={"n": 7}, reason="ops", by="cli", request_id="req-1")
    again = client.reset("f", ["b"], context_patch={"n": 7}, reason="ops", by="cli", request_id="req-1")
    assert first == again  # the retry is the same event: the worker applies it once
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and (f.active_path, f.context["n"], f.version) == ("b", 7, 2)
    assert [s.get("control") for s in store.read_trace("f")].count("reset") == 1
    clock.advance(121)  # b's timer (60s) moves it on to c, then the start's own timeout of 2m passes
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and f.status == "failed"
    assert f.error == "timed out: the run did not end within its timeout of 2m"


@pytest.mark.parametrize("name", ["durastate.timeout", "durastate.finished", "durastate.heartbeat",
                                  "durastate.cancel"])
def test_a_reset_cannot_send_an_event_only_durastate_sends(rt: LocalRuntime, clock: ManualClock, name: str) -> None:
    """The reset's own event is a chart's event: one named as the runtime's (a timer firing, a child's end) is
    refused when the reset is built, and a reset event carrying one that reaches the worker anyway is
    dead-lettered with nothing changed — so a reset cannot fire ``b``'s timer a minute early."""
    rt.start("flow", execution_id="f")
    run(rt, "f", Event(id="n1", name="next"))
    before = rt.get("f")
    assert before is not None and before.active_path == "b"
    forged = {"path": "b", "fire_at": before.timers["b"]}
    with pytest.raises(ControlRefused, match=f"{name!r} is an event durastate sends itself"):
        rt.reset("f", ["b"], send=(name, forged))
    event = Event(id="x", name="durastate.reset", data={"to": ["b"], "actions": "none", "request": "r2",
                                                          "send": {"name": name, "data": forged}})
    from durastate.engine.ids import reset_event_id

    run(rt, "f", Event(id=reset_event_id("f", event.data), name=event.name, data=event.data))
    after = rt.get("f")
    assert after is not None and (after.active_path, after.version) == ("b", before.version)
    assert any(f"{name!r} is an event durastate sends itself" in letter.reason for letter in rt.dead_letters)
