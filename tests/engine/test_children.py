"""Parallel regions (fork / forward / join / cancel) and invoked children, routed by the test harness."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.ids import cancel_event_id
from durastate.errors import DefinitionError

from .harness import Harness

PAR: dict[str, Any] = {
    "id": "par",
    "initial": "idle",
    "context": {"n": 1},
    "states": {
        "idle": {"on": {"go": "both"}},
        "both": {
            "type": "parallel",
            "entry": [{"log": "+both"}],
            "exit": [{"log": "-both"}],
            "on": {"abort": "aborted", "note": {"actions": [{"assign": {"noted": "$event.v"}}]}},
            "on_done": {"target": "joined", "actions": [{"log": "joined"}]},
            "states": {
                "left": {
                    "initial": "l1",
                    "entry": [{"log": "+left"}],
                    "states": {
                        "l1": {
                            "on": {
                                "step": "l2",
                                "tell": {
                                    "actions": [
                                        {"send": {"to": "parent", "event": "note", "data": {"v": "$event.v"}}}
                                    ]
                                },
                            }
                        },
                        "l2": {"type": "final"},
                    },
                },
                "right": {
                    "initial": "r1",
                    "states": {
                        "r1": {"on": {"step": "r2"}},
                        "r2": {"on": {"step": "r3"}},
                        "r3": {"type": "final"},
                    },
                },
            },
        },
        "joined": {"type": "final", "outcome": "ok"},
        "aborted": {"type": "final", "outcome": "aborted"},
    },
}


def test_parallel_state_forks_one_child_per_region() -> None:
    h = Harness(PAR)
    parent = h.start("par", "p")
    h.send("p", "go")
    assert parent.active_path == "both"
    assert set(parent.children) == {"p~1", "p~2"}
    assert {c.path for c in parent.children.values()} == {"both.left", "both.right"}
    assert all(c.kind == "region" and c.status == "running" for c in parent.children.values())
    spawn_res = next(r for e, ev, r in h.results if e == "p" and ev.name == "go")
    assert [(cid, root) for cid, root, _ in spawn_res.spawns] == [("p~1", "both.left"), ("p~2", "both.right")]
    assert spawn_res.spawns[0][2] == {"n": 1}
    left, right = h["p~1"], h["p~2"]
    assert (left.root_path, left.parent_id, left.child_id, left.active_path) == (
        "both.left",
        "p",
        "p~1",
        "both.left.l1",
    )
    assert right.active_path == "both.right.r1"
    assert h.logs("p") == ["+both"] and h.logs("p~1") == ["+left"]


def test_unhandled_events_are_forwarded_to_regions_and_the_join_takes_on_done() -> None:
    h = Harness(PAR)
    parent = h.start("par", "p")
    h.send("p", "go")
    h.send("p", "step", id="ev-1")
    fwd = next(r for e, ev, r in h.results if e == "p" and ev.id == "ev-1")
    assert sorted(t for t, _ in fwd.emits) == ["p~1", "p~2"]
    assert len({e.id for _, e in fwd.emits}) == 2 and not fwd.ignored
    assert h["p~1"].status == "finished" and h["p~2"].active_path == "both.right.r2"
    assert parent.children["p~1"].status == "finished" and parent.active_path == "both"
    h.send("p", "step")
    assert h["p~2"].status == "finished"
    assert parent.status == "finished" and parent.outcome == "ok"
    assert h.logs("p")[-2:] == ["-both", "joined"]
    assert parent.children == {}


def test_region_sends_to_parent_and_parent_handles_it_without_forwarding() -> None:
    h = Harness(PAR)
    parent = h.start("par", "p")
    h.send("p", "go")
    h.send("p", "tell", {"v": 42})
    assert parent.context["noted"] == 42
    assert "noted" not in h["p~2"].context


def test_leaving_the_parallel_state_early_cancels_running_regions() -> None:
    h = Harness(PAR)
    parent = h.start("par", "p")
    h.send("p", "go")
    h.send("p", "step")  # left finishes, right keeps running
    h.send("p", "abort")
    abort = h.results[next(i for i, (e, ev, _) in enumerate(h.results) if ev.name == "abort")][2]
    assert [(t, e.name, e.id) for t, e in abort.emits if e.name == "durastate.cancel"] == [
        ("p~2", "durastate.cancel", cancel_event_id("p~2"))
    ]
    assert parent.outcome == "aborted" and parent.children == {}
    assert h["p~2"].status == "cancelled" and h["p~1"].status == "finished"


def test_late_finished_from_a_forgotten_child_is_ignored() -> None:
    defn = load_definition(PAR)
    exe = Execution(id="p", definition_id="par")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    step(defn, exe, Event(name="go"), 0.0)
    step(defn, exe, Event(name="abort"), 0.0)
    res = step(defn, exe, Event(name="durastate.finished", data={"child_id": "p~1", "status": "finished"}), 0.0)
    assert res.ignored


def test_failed_region_without_on_error_fails_the_parent_and_cancels_the_rest() -> None:
    defn = load_definition(PAR)
    exe = Execution(id="p", definition_id="par")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    step(defn, exe, Event(name="go"), 0.0)
    res = step(
        defn,
        exe,
        Event(name="durastate.finished", data={"child_id": "p~1", "status": "failed", "error": "ValueError: x"}),
        0.0,
    )
    assert exe.status == "failed" and "region both.left (p~1) failed: ValueError: x" in (exe.error or "")
    assert ("p~2", "durastate.cancel") in [(t, e.name) for t, e in res.emits]


def test_failed_region_takes_on_error() -> None:
    doc = {**PAR, "states": {**PAR["states"], "both": {**PAR["states"]["both"], "on_error": "aborted"}}}
    defn = load_definition(doc)
    exe = Execution(id="p", definition_id="par")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    step(defn, exe, Event(name="go"), 0.0)
    res = step(defn, exe, Event(name="durastate.finished", data={"child_id": "p~2", "status": "failed"}), 0.0)
    assert exe.outcome == "aborted"
    assert ("p~1", "durastate.cancel") in [(t, e.name) for t, e in res.emits]


def test_history_of_a_parallel_state_refork_fresh_regions() -> None:
    doc = {
        "id": "hp",
        "initial": "w",
        "states": {
            "w": {
                "initial": "par",
                "on": {"pause": "paused"},
                "states": {
                    "par": {"type": "parallel", "states": {"r": {"initial": "a", "states": {"a": {}}}}},
                    "h": {"type": "history", "history": "deep"},
                },
            },
            "paused": {"on": {"resume": "w.h"}},
        },
    }
    h = Harness(doc)
    exe = h.start("hp", "x")
    assert set(exe.children) == {"x~1"}
    h.send("x", "pause")
    assert exe.children == {} and h["x~1"].status == "cancelled"
    h.send("x", "resume")
    assert exe.active_path == "w.par" and set(exe.children) == {"x~2"}


# -- invoke --------------------------------------------------------------------------------------------

CHILD = {
    "id": "child",
    "initial": "work",
    "context": {"amount": 0},
    "states": {
        "work": {
            "on": {
                "ok": {"target": "done", "actions": [{"assign": {"receipt": "r-1"}}]},
                "bad": "broke",
                "explode": {"actions": ["tests.engine.test_semantics:boom"]},
            },
            "after": {"seconds": 60, "target": "late"},
        },
        "done": {"type": "final", "outcome": "paid"},
        "broke": {"type": "final", "outcome": "declined"},
        "late": {"type": "final", "outcome": "expired"},
    },
}

MOM = {
    "id": "mom",
    "initial": "idle",
    "context": {"total": 12},
    "states": {
        "idle": {"on": {"go": "paying"}},
        "paying": {
            "invoke": {"definition": "child", "context": {"amount": "$context.total"}},
            "on": {"stop": "stopped"},
            "on_done": [
                {
                    "target": "paid",
                    "guard": {"eq": ["$event.outcome", "paid"]},
                    "actions": [{"assign": {"receipt": "$event.output.receipt"}}],
                },
                {"target": "unpaid"},
            ],
            "on_error": {"target": "errored", "actions": [{"assign": {"why": "$event.error"}}]},
        },
        "paid": {"type": "final"},
        "unpaid": {"type": "final"},
        "errored": {"type": "final"},
        "stopped": {"type": "final"},
    },
}


def test_invoke_starts_the_child_with_its_context() -> None:
    h = Harness(CHILD, MOM)
    mom = h.start("mom", "m")
    h.send("m", "go")
    go = next(r for e, ev, r in h.results if ev.name == "go")
    [(cid, start)] = [(t, e) for t, e in go.emits]
    assert cid == "m~1" and start.id == "m~1:start" and start.name == "durastate.start"
    assert start.data == {
        "definition_id": "child",
        "context": {"amount": 12},
        "parent_id": "m",
        "child_id": "m~1",
    }
    assert mom.children["m~1"].kind == "invoke" and mom.children["m~1"].path == "paying"
    assert h["m~1"].context == {"amount": 12} and h["m~1"].active_path == "work"


def test_invoke_on_done_sees_the_child_outcome_and_output() -> None:
    h = Harness(CHILD, MOM)
    mom = h.start("mom", "m")
    h.send("m", "go")
    h.send("m~1", "ok")
    assert mom.active_path == "paid" and mom.context["receipt"] == "r-1"
    h2 = Harness(CHILD, MOM)
    mom2 = h2.start("mom", "m")
    h2.send("m", "go")
    h2.send("m~1", "bad")
    assert mom2.active_path == "unpaid"


def test_invoke_child_timeout_and_failure() -> None:
    h = Harness(CHILD, MOM)
    mom = h.start("mom", "m")
    h.send("m", "go")
    h.advance(60)
    assert h["m~1"].outcome == "expired" and mom.active_path == "unpaid"
    h2 = Harness(CHILD, MOM)
    mom2 = h2.start("mom", "m")
    h2.send("m", "go")
    h2.send("m~1", "explode")
    assert h2["m~1"].status == "failed"
    assert mom2.active_path == "errored" and "card reader on fire" in mom2.context["why"]


def test_leaving_the_invoking_state_cancels_the_child() -> None:
    h = Harness(CHILD, MOM)
    mom = h.start("mom", "m")
    h.send("m", "go")
    h.send("m", "stop")
    assert mom.outcome == "stopped" and h["m~1"].status == "cancelled"
    assert h.timers == {}


def test_invoke_without_on_error_fails_the_parent() -> None:
    doc = {
        "id": "solo",
        "initial": "a",
        "states": {"a": {"invoke": {"definition": "child"}, "on_done": "b"}, "b": {}},
    }
    h = Harness(CHILD, doc)
    solo = h.start("solo", "s")
    h.send("s~1", "explode")
    assert solo.status == "failed" and "invoked child s~1 failed" in (solo.error or "")


HOLDER = {
    "id": "holder",
    "initial": "idle",
    "states": {
        "idle": {"on": {"go": "paying"}},
        "paying": {
            "initial": "asking",
            "invoke": {"definition": "child", "context": {"amount": 3}},
            "on": {"stop": "stopped"},
            "on_done": "settled",
            "on_error": {"target": "errored", "actions": [{"assign": {"why": "$event.error"}}]},
            "states": {
                "asking": {"on": {"next": "waiting"}},
                "waiting": {"on": {"next": "over"}},
                "over": {"type": "final"},
            },
        },
        "settled": {"type": "final"},
        "stopped": {"type": "final"},
        "errored": {"type": "final"},
    },
}


def test_a_compound_state_keeps_its_invoked_child_while_any_of_its_states_is_active() -> None:
    h = Harness(CHILD, HOLDER)
    holder = h.start("holder", "h")
    h.send("h", "go")
    assert holder.children["h~1"].path == "paying" and h["h~1"].status == "running"
    h.send("h", "next")  # asking -> waiting, inside the invoking state: the child runs on
    assert holder.active_path == "paying.waiting" and h["h~1"].status == "running" and len(holder.children) == 1
    h.send("h", "stop")  # leaving the state cancels it
    assert (holder.outcome, h["h~1"].status) == ("stopped", "cancelled")


def test_a_compound_states_on_done_stays_its_final_childs() -> None:
    """The child's end takes no transition (it would be the state's on_done, which its final child takes)."""
    h = Harness(CHILD, HOLDER)
    holder = h.start("holder", "h")
    h.send("h", "go")
    h.send("h~1", "ok")
    assert h["h~1"].status == "finished" and holder.active_path == "paying.asking"
    h.send("h", "next")
    h.send("h", "next")
    assert holder.outcome == "settled"


def test_a_compound_states_failed_child_takes_its_on_error() -> None:
    h = Harness(CHILD, HOLDER)
    holder = h.start("holder", "h")
    h.send("h", "go")
    h.send("h~1", "explode")
    assert holder.outcome == "errored" and "card reader on fire" in holder.context["why"]


def test_id_key_holds_the_childs_execution_id_for_sends_to_it() -> None:
    doc = {"id": "boss", "initial": "paying", "states": {
        "paying": {"invoke": {"definition": "child", "id_key": "worker"},
                   "on": {"push": {"actions": [{"send": {"to": "$context.worker", "event": "ok"}}]}},
                   "on_done": "done"},
        "done": {"type": "final"}}}
    h = Harness(CHILD, doc)
    boss = h.start("boss", "b")
    assert boss.context == {"worker": "b~1"}
    h.send("b", "push")
    assert h["b~1"].status == "finished" and boss.outcome == "done"


ECHO = {"id": "echo", "initial": "w", "context": {"heard": []}, "states": {"w": {"on": {"*": {"actions": [
    {"assign": {"heard": {"add": ["$context.heard", ["$event.name"]]}}}]}}}}}
FORWARDING = {"id": "fwd", "initial": "s", "states": {
    "s": {"invoke": {"definition": "echo", "forward": True},
          "on": {"a": {"actions": [{"raise": {"event": "inner"}}, {"send": {"to": "self", "event": "later"}}]},
                 "leave": "t"}},
    "t": {}}}


def test_forward_sends_each_event_from_outside_to_the_child_while_the_state_is_active() -> None:
    h = Harness(ECHO, FORWARDING)
    h.start("fwd", "f")
    h.send("f", "a")  # handled by the parent, forwarded all the same; the event it raises is not
    h.send("f", "b")  # handled by nobody in the parent
    assert h["f~1"].context["heard"] == ["a", "later", "b"]
    h.send("f", "leave")  # taken while the state is active: forwarded, then the state is left
    h.send("f", "c")
    assert h["f~1"].status == "cancelled" and h["f~1"].context["heard"] == ["a", "later", "b", "leave"]


def test_id_key_is_for_child_executions_only() -> None:
    with pytest.raises(DefinitionError, match=r"states.a.invoke.id_key: for child executions"):
        load_definition({"id": "t", "initial": "a", "states": {
            "a": {"invoke": {"task": {"python": "m:f"}, "id_key": "k"}, "on_done": "b"}, "b": {}}})
    with pytest.raises(DefinitionError, match=r"states.a.invoke.forward: for child executions"):
        load_definition({"id": "t", "initial": "a", "states": {
            "a": {"invoke": {"task": {"python": "m:f"}, "forward": True}, "on_done": "b"}, "b": {}}})
    with pytest.raises(DefinitionError, match=r"states.a.map.invoke.id_key"):
        load_definition({"id": "t", "initial": "a", "states": {
            "a": {"map": {"items": [], "invoke": {"definition": "c", "id_key": "k"}}, "on_done": "b"}, "b": {}}})


def test_state_entered_and_left_in_one_step_starts_nothing() -> None:
    doc = {
        "id": "pass",
        "initial": "a",
        "states": {
            "a": {"on": {"go": "b"}},
            "b": {"invoke": {"definition": "child"}, "always": "c", "on_done": "c"},
            "c": {"type": "parallel", "always": "d", "states": {"r": {"initial": "x", "states": {"x": {}}}}},
            "d": {},
        },
    }
    defn = load_definition(doc)
    exe = Execution(definition_id="pass")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    res = step(defn, exe, Event(name="go"), 0.0)
    assert exe.active_path == "d" and res.emits == [] and res.spawns == [] and exe.children == {}


def test_cancelled_parent_cancels_its_children() -> None:
    h = Harness(CHILD, MOM)
    mom = h.start("mom", "m")
    h.send("m", "go")
    h.send("m", "durastate.cancel")
    assert mom.status == "cancelled" and h["m~1"].status == "cancelled"
