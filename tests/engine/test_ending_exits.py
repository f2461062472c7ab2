"""An execution that ends runs the exit actions of its active states, as SCXML does.

Reaching a final child of the top level, or ``durastate.cancel``, exits every active state: exit actions,
leaf first, then its ancestors. Regions and invoked children are separate executions: each runs its own
exits when it is cancelled (or reaches its own end). A failure runs nothing more.
"""

from __future__ import annotations

from typing import Any

from durastate.engine import Event, Execution, load_definition, step

from .harness import Harness


def logged(name: str, **kw: Any) -> dict[str, Any]:
    return {"entry": [{"log": f"+{name}"}], "exit": [{"log": f"-{name}"}], **kw}


NESTED = {
    "id": "nested",
    "initial": "work",
    "states": {
        "work": logged("work", initial="inner", states={
            "inner": logged("inner", initial="leaf", states={
                "leaf": logged("leaf", on={"quit": "stopped"}),
            }),
        }),
        "stopped": logged("stopped", type="final", outcome="stopped"),
    },
}


def run(doc: dict[str, Any], *events: str) -> tuple[Execution, list[list[str]], list[Any]]:
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id=defn.id, parent_id="p", context=defn.initial_context())
    results = [step(defn, exe, Event(name="durastate.start"), 0.0)]
    results += [step(defn, exe, Event(name=name), 0.0) for name in events]
    return exe, [r.logs for r in results], results


def test_cancel_runs_the_exit_actions_of_every_active_state_leaf_first() -> None:
    exe, logs, results = run(NESTED, "durastate.cancel")
    assert logs[-1] == ["-leaf", "-inner", "-work"]
    assert exe.status == "cancelled"
    assert results[-1].emits[-1][1].data["status"] == "cancelled"


def test_reaching_a_top_level_final_state_runs_its_exit_actions_after_its_entry() -> None:
    exe, logs, _ = run(NESTED, "quit")
    assert logs[-1] == ["-leaf", "-inner", "-work", "+stopped", "-stopped"]
    assert exe.status == "finished" and exe.outcome == "stopped"


def test_exit_actions_at_the_end_are_part_of_the_output_and_may_notify() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "context": {"n": 0},
        "states": {
            "a": {"on": {"go": "end"},
                  "exit": [{"assign": {"n": {"add": ["$context.n", 1]}}}]},
            "end": {"type": "final",
                    "exit": [{"assign": {"closed": True}}, {"send": {"event": "closing", "to": "parent"}}]},
        },
    }
    exe, _, results = run(doc, "go")
    emitted = [(target, ev.name) for target, ev in results[-1].emits]
    assert emitted == [("p", "closing"), ("p", "durastate.finished")]  # exits run before the end is told
    assert results[-1].emits[-1][1].data["output"] == {"n": 1, "closed": True}
    assert exe.context == {"n": 1, "closed": True}


def test_an_execution_that_starts_in_a_final_state_exits_it() -> None:
    doc = {"id": "d", "initial": "end", "states": {"end": logged("end", type="final")}}
    exe, logs, _ = run(doc)
    assert logs[0] == ["+end", "-end"] and exe.status == "finished"


def test_events_raised_by_exit_actions_at_the_end_are_dropped() -> None:
    doc = {"id": "d", "initial": "a", "states": {
        "a": {"exit": [{"raise": "again"}], "on": {"again": {"actions": [{"log": "handled"}]}}}}}
    exe, logs, _ = run(doc, "durastate.cancel")
    assert logs[-1] == [] and exe.status == "cancelled"


def test_an_exit_action_that_raises_on_cancel_fails_the_execution_with_the_place() -> None:
    doc = {"id": "d", "initial": "a", "states": {"a": {"exit": [{"call": "builtins:divmod"}]}}}
    exe, _, results = run(doc, "durastate.cancel")
    assert exe.status == "failed" and "states.a.exit" in (exe.error or "")
    assert results[-1].emits[-1][1].data["status"] == "failed"


def test_a_cancel_after_the_end_runs_nothing() -> None:
    exe, logs, results = run(NESTED, "quit", "durastate.cancel")
    assert logs[-1] == [] and results[-1].ignored and exe.status == "finished"


def test_a_failure_runs_no_exit_actions() -> None:
    doc = {"id": "d", "initial": "a", "states": {
        "a": logged("a", on={"boom": {"actions": [{"call": "builtins:divmod"}]}})}}
    exe, logs, _ = run(doc, "boom")
    assert logs[-1] == [] and exe.status == "failed"


# -- children: each runs its own exits -------------------------------------------------------------------

PAR = {
    "id": "par",
    "initial": "both",
    "states": {
        "both": logged("both", type="parallel", on={"abort": "aborted"}, states={
            "left": logged("left", initial="l1", states={"l1": logged("l1", on={"l": "l2"}),
                                                          "l2": logged("l2", type="final")}),
            "right": logged("right", initial="r1", states={"r1": logged("r1")}),
        }),
        "aborted": {"type": "final"},
    },
}


def test_cancelling_the_parent_cancels_each_region_which_runs_its_own_exits() -> None:
    h = Harness(PAR)
    h.start("par", "p")
    regions = sorted(cid for cid in h.exes if cid != "p")
    h.send("p", "durastate.cancel")
    assert h["p"].status == "cancelled"
    assert h.logs("p")[-1:] == ["-both"]
    by_region = {h[c].root_path: h.logs(c) for c in regions}
    assert by_region["both.left"][-2:] == ["-l1", "-left"]
    assert by_region["both.right"][-2:] == ["-r1", "-right"]
    assert all(h[c].status == "cancelled" for c in regions)


def test_a_region_that_reaches_its_final_state_exits_it_and_its_region() -> None:
    h = Harness(PAR)
    h.start("par", "p")
    left = next(c for c in h.exes if c != "p" and h[c].root_path == "both.left")
    h.send("p", "l")
    assert h[left].status == "finished"
    assert h.logs(left)[-4:] == ["-l1", "+l2", "-l2", "-left"]


def test_leaving_the_parallel_state_cancels_the_running_regions_which_run_their_exits() -> None:
    h = Harness(PAR)
    h.start("par", "p")
    right = next(c for c in h.exes if c != "p" and h[c].root_path == "both.right")
    h.send("p", "abort")
    assert h["p"].outcome == "aborted"
    assert h.logs(right)[-2:] == ["-r1", "-right"]


CHILD = {"id": "child", "initial": "busy", "states": {"busy": logged("busy")}}
MOM = {"id": "mom", "initial": "waiting", "states": {
    "waiting": logged("waiting", invoke={"definition": "child"}, on_done="over", on={"stop": "over"}),
    "over": {"type": "final"},
}}


def test_a_cancelled_invoked_child_runs_its_exit_actions() -> None:
    h = Harness(CHILD, MOM)
    h.start("mom", "m")
    child = next(c for c in h.exes if c != "m")
    h.send("m", "durastate.cancel")
    assert h.logs("m")[-1:] == ["-waiting"]
    assert h[child].status == "cancelled" and h.logs(child)[-1:] == ["-busy"]


def test_an_invoked_child_cancelled_by_leaving_the_state_runs_its_exit_actions() -> None:
    h = Harness(CHILD, MOM)
    h.start("mom", "m")
    child = next(c for c in h.exes if c != "m")
    h.send("m", "stop")
    assert h["m"].status == "finished"
    assert h[child].status == "cancelled" and h.logs(child)[-1:] == ["-busy"]
