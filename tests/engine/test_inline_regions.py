"""``regions: inline``: a parallel state whose regions run inside its own execution (SCXML semantics).

One test (or a few) per rule: every region steps on each event in document order, a transition that
leaves the parallel state exits every region, ``on_done`` joins the regions, ``in_state`` guards, timers,
history, ``always``, and nested states; plus properties against single-region charts.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.checks import static_issues
from durastate.engine.control import record_failure, redrive
from durastate.engine.explain import explain
from durastate.engine.explore import explore
from durastate.engine.inline_rules import configuration_problem
from durastate.engine.migration import apply_migration, plan_migration
from durastate.errors import DefinitionError

from .harness import Harness


def logged(name: str, **kw: Any) -> dict[str, Any]:
    """A state whose entry and exit actions log ``+name`` / ``-name``."""
    return {"entry": [{"log": f"+{name}"}], "exit": [{"log": f"-{name}"}], **kw}


def two_regions(**extra: Any) -> dict[str, Any]:
    """``work`` runs regions ``a`` (a1 -go-> a2, final) and ``b`` (b1 -go-> b2 -go-> b3, final) inline."""
    return {
        "id": "two",
        "initial": "work",
        "states": {
            "work": logged("work", type="parallel", regions="inline", on_done={"target": "done"},
                           on={"abort": {"target": "aborted"}}, states={
                "a": logged("a", initial="a1", states={
                    "a1": logged("a1", on={"go": {"target": "a2"}}),
                    "a2": {"type": "final"},
                }),
                "b": logged("b", initial="b1", states={
                    "b1": logged("b1", on={"go": {"target": "b2"}}),
                    "b2": logged("b2", on={"go": {"target": "b3"}}),
                    "b3": {"type": "final"},
                }),
            }),
            "done": {"type": "final"},
            "aborted": {"type": "final"},
        },
        **extra,
    }


def run(doc: dict[str, Any], *events: str, context: dict[str, Any] | None = None) -> tuple[Harness, Execution]:
    h = Harness(doc)
    exe = h.start(doc["id"], context=context)
    for name in events:
        h.send("e", name)
    return h, exe


# -- entering and stepping ------------------------------------------------------------------------------


def test_entering_the_parallel_state_enters_every_region_in_document_order() -> None:
    h, exe = run(two_regions())
    assert exe.active_path == "work"
    assert exe.leaves == ["work.a.a1", "work.b.b1"]
    assert h.logs() == ["+work", "+a", "+a1", "+b", "+b1"]
    assert h.results[0][2].spawns == []  # no child execution
    assert exe.children == {}


def test_every_region_steps_on_one_event_exits_in_reverse_document_order() -> None:
    h, exe = run(two_regions(), "go")
    assert exe.leaves == ["work.a.a2", "work.b.b2"]
    # SCXML microstep: every exit (reverse document order), then every entry (document order)
    assert h.results[-1][2].logs == ["-b1", "-a1", "+b2"]
    assert exe.version == 2  # one step (one commit) per event


def test_on_done_fires_when_all_regions_reach_a_final_state() -> None:
    h, exe = run(two_regions(), "go")
    assert exe.status == "running"  # region a is final, region b is not yet
    h.send("e", "go")
    assert exe.status == "finished" and exe.outcome == "done"
    assert exe.leaves == [] and exe.active_path == "done"
    assert h.results[-1][2].logs == ["-b2", "-b", "-a", "-work"]


def test_done_of_each_region_is_raised_too() -> None:
    doc = two_regions()
    doc["states"]["work"]["states"]["a"]["on_done"] = {"actions": [{"assign": {"a_done": True}}]}
    _, exe = run(doc, "go")
    assert exe.context == {"a_done": True}


def test_a_transition_leaving_the_parallel_state_exits_every_region_then_it() -> None:
    h, exe = run(two_regions(), "go", "abort")
    assert exe.status == "finished" and exe.outcome == "aborted"
    assert h.results[-1][2].logs == ["-b2", "-b", "-a", "-work"]


def test_a_transition_from_inside_a_region_can_leave_the_parallel_state() -> None:
    doc = two_regions()
    doc["states"]["work"]["states"]["b"]["states"]["b1"]["on"]["out"] = {"target": "aborted"}
    h, exe = run(doc, "out")
    assert exe.outcome == "aborted"
    assert h.results[-1][2].logs == ["-b1", "-b", "-a1", "-a", "-work"]


def test_the_first_region_in_document_order_wins_a_conflict() -> None:
    doc = two_regions()
    states = doc["states"]["work"]["states"]
    states["a"]["states"]["a1"]["on"]["x"] = {"target": "done"}
    states["b"]["states"]["b1"]["on"]["x"] = {"target": "aborted"}
    _, exe = run(doc, "x")
    assert exe.outcome == "done"


def test_a_descendant_preempts_its_ancestor_but_not_a_sibling_region() -> None:
    doc = two_regions()
    states = doc["states"]["work"]["states"]
    states["a"]["on"] = {"x": {"target": "aborted"}}  # the region itself: exits everything
    states["b"]["states"]["b1"]["on"]["x"] = {"target": "b2"}  # conflicts with it, and is later
    _, exe = run(doc, "x")
    assert exe.outcome == "aborted"
    # b1's own `y` (inside the parallel state) preempts the parallel state's, which leaf a1 selected first
    doc["states"]["work"]["on"]["y"] = {"target": "aborted"}
    states["b"]["states"]["b1"]["on"]["y"] = {"target": "b2"}
    _, exe = run(doc, "y")
    assert exe.status == "running" and exe.leaves == ["work.a.a1", "work.b.b2"]


def test_innermost_state_first_within_a_region() -> None:
    doc = two_regions()
    a = doc["states"]["work"]["states"]["a"]
    a["on"] = {"go": {"target": "work.a.a1", "actions": [{"log": "region a"}]}}
    h, exe = run(doc, "go")
    assert "region a" not in h.logs()  # a1's own `go` is selected first
    assert exe.leaves == ["work.a.a2", "work.b.b2"]


def test_a_transition_on_the_parallel_state_itself_is_taken_once() -> None:
    doc = two_regions()
    doc["states"]["work"]["on"]["tick"] = {"actions": [{"assign": {"n": {"add": ["$context.n", 1]}}}]}
    _, exe = run(doc, "tick", context={"n": 0})
    assert exe.context["n"] == 1


def test_regions_share_the_context() -> None:
    doc = two_regions()
    states = doc["states"]["work"]["states"]
    states["a"]["states"]["a1"]["on"]["go"]["actions"] = [{"assign": {"seen": ["a"]}}]
    states["b"]["states"]["b1"]["on"]["go"]["actions"] = [{"assign": {"count": {"add": ["$context.count", 1]}}}]
    _, exe = run(doc, "go", context={"count": 1})
    assert exe.context == {"count": 2, "seen": ["a"]}


def test_an_event_no_region_handles_is_ignored() -> None:
    h, exe = run(two_regions(), "nothing")
    assert h.results[-1][2].ignored
    assert exe.leaves == ["work.a.a1", "work.b.b1"]


def test_targeting_a_state_inside_one_region_enters_the_others_by_default() -> None:
    doc = two_regions()
    doc["initial"] = "idle"
    doc["states"]["idle"] = {"on": {"jump": {"target": "work.b.b2"}}}
    h, exe = run(doc, "jump")
    assert exe.leaves == ["work.a.a1", "work.b.b2"]
    assert h.results[-1][2].logs == ["+work", "+a", "+a1", "+b", "+b2"]


def test_a_transition_between_regions_exits_and_reenters_the_parallel_state() -> None:
    doc = two_regions()
    doc["states"]["work"]["states"]["a"]["states"]["a1"]["on"]["cross"] = {"target": "work.b.b2"}
    h, exe = run(doc, "cross")
    assert exe.leaves == ["work.a.a1", "work.b.b2"]
    assert h.results[-1][2].logs == ["-b1", "-b", "-a1", "-a", "-work", "+work", "+a", "+a1", "+b", "+b2"]


def test_nested_compound_states_and_nested_inline_parallel_states() -> None:
    doc = {
        "id": "nest",
        "initial": "p",
        "states": {
            "p": {"type": "parallel", "regions": "inline", "on_done": {"target": "end"}, "states": {
                "r": {"initial": "outer", "states": {
                    "outer": {"initial": "inner", "states": {
                        "inner": {"on": {"go": {"target": "q"}}},
                        "q": {"type": "parallel", "regions": "inline", "states": {
                            "x": {"initial": "x1", "states": {"x1": {"on": {"fin": "x2"}}, "x2": {"type": "final"}}},
                            "y": {"initial": "y1", "states": {"y1": {"on": {"fin": "y2"}}, "y2": {"type": "final"}}},
                        }, "on_done": {"target": "over"}},
                        "over": {"type": "final"},
                    }, "on_done": {"target": "rdone"}},
                    "rdone": {"type": "final"},
                }},
                "s": {"initial": "s1", "states": {"s1": {"on": {"fin": "s2"}}, "s2": {"type": "final"}}},
            }},
            "end": {"type": "final"},
        },
    }
    h, exe = run(doc, "go")
    assert exe.leaves == ["p.r.outer.q.x.x1", "p.r.outer.q.y.y1", "p.s.s1"]
    assert exe.active_path == "p"
    h.send("e", "fin")
    assert exe.status == "finished" and exe.outcome == "end"


# -- in_state --------------------------------------------------------------------------------------------


def test_in_state_guard_sees_the_other_regions() -> None:
    doc = two_regions()
    b1 = doc["states"]["work"]["states"]["b"]["states"]["b1"]
    b1["on"]["check"] = {"target": "b3", "guard": {"in_state": "work.a.a2"}}
    h, exe = run(doc, "check")
    assert h.results[-1][2].ignored  # a is still in a1
    doc2 = copy.deepcopy(doc)
    doc2["states"]["work"]["states"]["a"]["states"]["a1"]["on"]["fin_a"] = {"target": "a2"}
    h, exe = run(doc2, "fin_a", "check")
    assert exe.status == "finished" and exe.outcome == "done"  # b reached b3: both regions final


def test_in_state_in_a_single_leaf_definition_and_with_not() -> None:
    doc = {
        "id": "plain",
        "initial": "outer",
        "states": {
            "outer": {"initial": "inner", "states": {
                "inner": {"on": {"x": [
                    {"target": "no", "guard": {"not": {"in_state": "outer"}}},
                    {"target": "yes", "guard": {"in_state": "outer.inner"}},
                ]}},
            }},
            "no": {"type": "final"},
            "yes": {"type": "final"},
        },
    }
    _, exe = run(doc, "x")
    assert exe.outcome == "yes"


def test_in_state_naming_no_state_is_a_definition_error() -> None:
    doc = two_regions()
    doc["states"]["work"]["on"]["x"] = {"target": "done", "guard": {"in_state": "work.a.a3"}}
    with pytest.raises(DefinitionError, match=r"in_state: no state 'work.a.a3'.*did you mean 'work.a.a"):
        load_definition(doc)
    doc["states"]["work"]["on"]["x"] = {"target": "done", "guard": {"in_state": 3}}
    with pytest.raises(DefinitionError, match="in_state: takes a state path"):
        load_definition(doc)


# -- timers, always, raised events --------------------------------------------------------------------


def test_timers_in_regions_fire_and_are_cancelled_when_the_parallel_state_is_left() -> None:
    doc = two_regions()
    states = doc["states"]["work"]["states"]
    states["a"]["states"]["a1"]["after"] = {"seconds": 10, "target": "a2"}
    states["b"]["states"]["b1"]["after"] = {"seconds": 20, "target": "b2"}
    h, exe = run(doc)
    assert sorted(exe.timers) == ["work.a.a1", "work.b.b1"]
    h.advance(10)
    assert exe.leaves == ["work.a.a2", "work.b.b1"] and sorted(exe.timers) == ["work.b.b1"]
    h.send("e", "abort")
    assert exe.timers == {} and exe.outcome == "aborted"
    assert [op.action for op in h.results[-1][2].timers] == ["cancel"]


def test_always_and_raised_events_inside_regions() -> None:
    doc = two_regions()
    states = doc["states"]["work"]["states"]
    states["a"]["states"]["a1"]["on"]["go"]["actions"] = [{"raise": {"event": "ping"}}]
    states["b"]["states"]["b2"]["on"]["ping"] = {"target": "b3"}
    states["b"]["states"]["b1"]["always"] = {"target": "b2", "guard": {"eq": ["$context.skip", True]}}
    _, exe = run(doc, context={"skip": True})
    assert exe.leaves == ["work.a.a1", "work.b.b2"]  # b1's always moved b on at once
    # go: a1 -> a2 (final) raising ping, b1 -> b2 in the same microstep; then ping: b2 -> b3 (final): done
    h, exe = run(doc, "go", context={"skip": False})
    assert exe.outcome == "done"
    assert h.results[-1][2].logs == ["-b1", "-a1", "+b2", "-b2", "-b", "-a", "-work"]
    del states["b"]["states"]["b2"]["on"]["ping"]
    _, exe = run(doc, "go", context={"skip": False})
    assert exe.leaves == ["work.a.a2", "work.b.b2"]


def test_an_always_cycle_across_regions_fails_the_execution() -> None:
    doc = two_regions()
    states = doc["states"]["work"]["states"]
    states["a"]["states"]["a1"]["always"] = {"target": "a1"}
    _, exe = run(doc)
    assert exe.status == "failed" and "did not settle" in (exe.error or "")


# -- history ---------------------------------------------------------------------------------------------


def history_doc(kind: str) -> dict[str, Any]:
    return {
        "id": f"hist-{kind}",
        "initial": "main",
        "states": {
            "main": {"initial": "work", "on": {"pause": {"target": "paused"}}, "states": {
                "h": {"type": "history", "history": kind},
                "work": {"type": "parallel", "regions": "inline", "states": {
                    "a": {"initial": "a1", "states": {
                        "a1": {"on": {"ga": "a2"}},
                        "a2": {"initial": "deep1", "states": {"deep1": {"on": {"gd": "deep2"}}, "deep2": {}}},
                    }},
                    "b": {"initial": "b1", "states": {"b1": {"on": {"gb": "b2"}}, "b2": {}}},
                }},
            }},
            "paused": {"on": {"resume": {"target": "main.h"}}},
        },
    }


def test_deep_history_restores_every_region_leaf() -> None:
    h, exe = run(history_doc("deep"), "ga", "gd", "gb", "pause")
    assert exe.active_path == "paused"
    assert exe.history["main"] == "main.work.a.a2.deep2 main.work.b.b2"
    h.send("e", "resume")
    assert exe.leaves == ["main.work.a.a2.deep2", "main.work.b.b2"]


def test_shallow_history_restores_the_parallel_state_with_initial_regions() -> None:
    _, exe = run(history_doc("shallow"), "ga", "gd", "gb", "pause", "resume")
    assert exe.leaves == ["main.work.a.a1", "main.work.b.b1"]


def test_history_inside_a_region() -> None:
    doc = two_regions()
    a = doc["states"]["work"]["states"]["a"]
    a["states"] = {
        "inner": {"initial": "a1", "on": {"away": "elsewhere"}, "states": {
            "hist": {"type": "history", "history": "shallow"},
            "a1": {"on": {"go": "a2"}},
            "a2": {},
        }},
        "elsewhere": {"on": {"back": "inner.hist"}},
    }
    a["initial"] = "inner"
    _, exe = run(doc, "go", "away", "back")
    assert exe.leaves == ["work.a.inner.a2", "work.b.b2"]
    assert exe.history == {"work.a.inner": "work.a.inner.a2"}


def test_a_state_of_a_region_invokes_a_child_while_it_is_active() -> None:
    """Each region's invoking state starts its child once the step ends, whichever leaf is the summary; its
    child's end takes the state's on_done; leaving the state cancels its child and not the other's."""
    child = {"id": "kid", "initial": "w", "states": {"w": {"on": {"ok": "f"}}, "f": {"type": "final"}}}
    doc = two_regions()
    regions = doc["states"]["work"]["states"]
    regions["a"]["states"]["a1"].update(invoke={"definition": "kid"}, on_done={"target": "a2"})
    regions["b"]["states"]["b1"].update(invoke={"definition": "kid"})
    h = Harness(child, doc)
    exe = h.start("two")
    assert {ref.path: cid for cid, ref in exe.children.items()} == {"work.a.a1": "e~1", "work.b.b1": "e~2"}
    h.send("e~1", "ok")  # a1's child ends: a1's on_done
    assert exe.leaves == ["work.a.a2", "work.b.b1"]
    h.send("e", "go")  # b1 -> b2 (a is done): b1's child is cancelled
    assert h["e~2"].status == "cancelled" and exe.leaves == ["work.a.a2", "work.b.b2"]


# -- ending ---------------------------------------------------------------------------------------------


def test_cancel_runs_the_exit_actions_of_every_region() -> None:
    h, exe = run(two_regions(), "durastate.cancel")
    assert exe.status == "cancelled"
    assert h.results[-1][2].logs == ["-b1", "-b", "-a1", "-a", "-work"]


# -- definition rules -----------------------------------------------------------------------------------


def test_default_and_children_regions_stay_child_executions() -> None:
    for mode in (None, "children"):
        doc = two_regions()
        if mode is None:
            del doc["states"]["work"]["regions"]
        else:
            doc["states"]["work"]["regions"] = mode
        h = Harness(doc)
        h.start("two")
        assert len(h.results[0][2].spawns) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["states"]["done"].update(regions="inline"), "states.done.regions: only a parallel state"),
        (lambda d: d["states"]["work"]["states"]["a"]["states"]["a1"].update(
            invoke={"definition": "x", "retry": {"max_attempts": 2}}),
         "a1.invoke: a task or a retried invoke is not supported inside the inline parallel state 'work'"),
        (lambda d: d["states"]["work"]["states"]["a"]["states"]["a1"].update(invoke={"task": {"python": "m:f"}}),
         "a1.invoke: a task or a retried invoke is not supported inside the inline parallel state 'work'"),
        (lambda d: d["states"]["work"]["states"]["a"]["states"]["a1"].update(
            map={"items": [1, 2], "invoke": {"definition": "x"}}),
         "a1.map: not supported inside the inline parallel state 'work'"),
        (lambda d: d["states"]["work"]["states"]["a"]["states"].update(
            p={"type": "parallel", "states": {"r": {"initial": "s", "states": {"s": {}}}}}),
         "states.p.regions: a parallel state inside the inline parallel state 'work' runs its regions inline"),
        (lambda d: d["states"]["work"].update(regions="both"), "regions"),
    ],
)
def test_definition_rules(change: Any, message: str) -> None:
    doc = two_regions()
    change(doc)
    with pytest.raises(DefinitionError, match=message):
        load_definition(doc)


# -- properties -----------------------------------------------------------------------------------------


def region(prefix: str, n: int) -> dict[str, Any]:
    """A region of ``n`` states ``s0..s{n-1}``: ``<prefix>`` moves on, ``back`` returns, ``both`` moves on
    and counts in the shared context, ``s{n-1}`` is final."""
    states: dict[str, Any] = {}
    for k in range(n - 1):
        count = {"assign": {f"{prefix}_n": {"add": [f"$context.{prefix}_n", 1]}}}
        on: dict[str, Any] = {prefix: {"target": f"s{k + 1}"}, "both": {"target": f"s{k + 1}", "actions": [count]}}
        if k:
            on["back"] = {"target": "s0"}
        states[f"s{k}"] = {"on": on, "entry": [{"log": f"{prefix}+s{k}"}]}
    states[f"s{n - 1}"] = {"type": "final"}
    return {"initial": "s0", "states": states}


def chart(regions: dict[str, dict[str, Any]], *, inline: bool = True) -> dict[str, Any]:
    """The regions under one inline parallel state ``p`` (or, with one region, ``p`` a compound state holding
    that region, so that the paths are the same)."""
    if inline:
        body = {"type": "parallel", "regions": "inline", "states": regions, "on_done": {"target": "end"}}
    else:
        ((name, only),) = regions.items()
        body = {"initial": name, "states": {name: {**only, "on_done": {"target": "end"}}}}
    return {"id": "prop", "initial": "p", "context": {"a_n": 0, "b_n": 0},
            "states": {"p": body, "end": {"type": "final"}}}


def drive(doc: dict[str, Any], events: list[str]) -> list[tuple[list[str], str, dict[str, Any]]]:
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id="prop", context=dict(defn.context))
    step(defn, exe, Event(name="durastate.start"), 0.0)
    seen = []
    for name in events:
        step(defn, exe, Event(name=name), 0.0)
        again = Execution.model_validate_json(exe.model_dump_json())
        assert again == exe
        leaves = exe.leaves or [exe.active_path or ""]
        seen.append((leaves, exe.status, dict(exe.context)))
    return seen


EVENTS = st.lists(st.sampled_from(["a", "b", "both", "back", "other"]), max_size=25)


@settings(max_examples=60, deadline=None)
@given(events=EVENTS, n=st.integers(2, 4))
def test_one_inline_region_behaves_as_the_flattened_compound(events: list[str], n: int) -> None:
    inline = drive(chart({"r": region("a", n)}), events)
    flat = drive(chart({"r": region("a", n)}, inline=False), events)
    assert inline == flat


@settings(max_examples=60, deadline=None)
@given(events=EVENTS, na=st.integers(2, 4), nb=st.integers(2, 4))
def test_two_inline_regions_step_as_the_two_charts_alone(events: list[str], na: int, nb: int) -> None:
    both = drive(chart({"ra": region("a", na), "rb": region("b", nb)}), events)
    alone_a = drive(chart({"ra": region("a", na)}, inline=False), events)
    alone_b = drive(chart({"rb": region("b", nb)}, inline=False), events)
    for (leaves, status, ctx), (la, sa, ca), (lb, sb, cb) in zip(both, alone_a, alone_b, strict=True):
        if sa == "finished" and sb == "finished":
            assert (leaves, status) == (["end"], "finished")
            break
        # a region that finished alone waits in its final state under the shared parallel state
        own = [f"p.ra.s{na - 1}" if la == ["end"] else la[0], f"p.rb.s{nb - 1}" if lb == ["end"] else lb[0]]
        assert (leaves, status) == (own, "running")
        assert (ctx["a_n"], ctx["b_n"]) == (ca["a_n"], cb["b_n"])


# -- the tools around the interpreter --------------------------------------------------------------------


def test_explain_lists_the_candidates_of_every_leaf() -> None:
    doc = two_regions()
    doc["states"]["work"]["states"]["b"]["states"]["b1"]["on"]["check"] = {
        "target": "b3", "guard": {"in_state": "work.a.a1"}}
    _, exe = run(doc)
    defn = load_definition(doc)
    got = explain(defn, exe, Event(name="go"))
    assert [(c.source, c.target, c.taken) for c in got.candidates] == [
        ("work.a.a1", "work.a.a2", True), ("work.b.b1", "work.b.b2", True)]
    assert got.outcome == "taken: work.a.a1 on go → work.a.a2; and work.b.b1 on go → work.b.b2"
    assert explain(defn, exe, Event(name="check")).candidates[0].value is True
    assert explain(defn, exe, Event(name="nope")).outcome == (
        "ignored: no transition handles it in work.a.a1, work.b.b1 or the states above them")


def test_explore_tells_configurations_apart_by_every_leaf() -> None:
    doc = two_regions()
    found = explore(load_definition(doc), limit=100)
    assert found.complete and found.findings == []
    # a deadlock inside one region shows every leaf
    doc["states"]["work"]["on"] = {}
    doc["states"]["work"]["states"]["b"]["states"]["b2"] = {"on": {"never": {"target": "b2", "guard": False}}}
    stuck = explore(load_definition(doc), limit=100)
    assert [f.kind for f in stuck.findings] == ["deadlock"]
    assert stuck.findings[0].active_path == "work.a.a2 + work.b.b2"


def test_static_checks_reach_the_regions_a_deep_target_enters() -> None:
    doc = two_regions()
    doc["initial"] = "idle"
    doc["states"]["idle"] = {"on": {"jump": {"target": "work.b.b2"}}}
    assert [i for i in static_issues(load_definition(doc)) if "unreachable" in i] == [
        "states.work.states.b.states.b1: unreachable: no transition, initial state or history leads to "
        "'work.b.b1'; target it from somewhere or remove it"]


def test_migration_maps_every_leaf_or_refuses() -> None:
    old = load_definition(two_regions())
    _, exe = run(two_regions(), "go")
    renamed = two_regions()
    b = renamed["states"]["work"]["states"]["b"]
    b["states"]["second"] = b["states"].pop("b2")
    b["states"]["b1"]["on"]["go"]["target"] = "second"
    new = load_definition(renamed)
    plan = plan_migration(exe, old, new, {"work.b.b2": "work.b.second"})
    assert plan.unmapped == [] and plan.leaves == ["work.a.a2", "work.b.second"]
    apply_migration(exe, plan)
    assert exe.leaves == ["work.a.a2", "work.b.second"]
    # two leaves mapped into one region: not a configuration of the new version
    bad = plan_migration(exe, new, new, {"work.a.a2": "work.b.b3"})
    assert bad.unmapped and "not every region of work has an active state" in bad.changes[-1]
    children = two_regions()
    children["states"]["work"]["regions"] = "children"
    refused = plan_migration(exe, new, load_definition(children), {"work.b.second": "work.b.b2"})
    assert refused.unmapped and "runs its regions differently" in " ".join(refused.changes)


def test_redrive_restores_every_leaf() -> None:
    doc = two_regions()
    doc["states"]["work"]["states"]["b"]["states"]["b1"]["on"]["boom"] = {
        "target": "b2", "actions": [{"assign": {"x": {"div": [1, 0]}}}]}
    defn = load_definition(doc)
    _, exe = run(doc)
    before = exe.model_copy(deep=True)
    event = Event(name="boom")
    step(defn, exe, event, 1.0)
    assert exe.status == "failed"
    record_failure(exe, before, event)
    exe.leaves = []
    redrive(exe, 2.0)
    assert exe.leaves == ["work.a.a1", "work.b.b1"] and exe.status == "running"


def test_only_definitions_with_inline_regions_step_on_the_inline_run() -> None:
    from durastate.engine.inline import InlineRun
    from durastate.engine.interpreter import Run

    plain = two_regions()
    plain["states"]["work"]["regions"] = "children"
    for doc, kind in ((plain, Run), (two_regions(), InlineRun)):
        defn = load_definition(doc)
        exe = Execution(id="k", definition_id="two")
        assert type(step(defn, exe, Event(name="durastate.start"), 0.0)) is kind
    assert not load_definition(plain).tables.has_inline


@pytest.mark.parametrize("how", ["after", "always"])
def test_timers_and_always_that_target_inside_a_region_enter_the_other_regions(how: str) -> None:
    doc = two_regions()
    doc["initial"] = "idle"
    doc["states"]["idle"] = ({"after": {"seconds": 5, "target": "work.b.b2"}} if how == "after"
                             else {"always": {"target": "work.b.b2"}})
    h, exe = run(doc)
    if how == "after":
        assert exe.active_path == "idle"
        h.advance(5)
    assert exe.leaves == ["work.a.a1", "work.b.b2"]


def test_a_failure_whose_retries_ran_out_is_caught_by_on_error_inside_a_region() -> None:
    doc = two_regions()
    doc["states"]["work"]["states"]["b"]["states"]["b1"]["on_error"] = {"target": "b2"}
    _, exe = run(doc)
    defn = load_definition(doc)
    caught = Event(name="durastate.catch", data={"error": "Boom: no", "event": {}, "attempts": 3})
    step(defn, exe, caught, 1.0)
    assert exe.leaves == ["work.a.a1", "work.b.b2"]
    del doc["states"]["work"]["states"]["b"]["states"]["b1"]["on_error"]
    _, exe = run(doc)
    step(load_definition(doc), exe, caught, 1.0)
    assert exe.status == "failed" and "no on_error on work or inside it" in (exe.error or "")


UPLOAD = Path(__file__).resolve().parents[2] / "examples" / "upload.yaml"


@settings(max_examples=80, deadline=None)
@given(moves=st.lists(st.sampled_from(["scanned", "clean", "rendered", "render_failed", "cancel", "wait"]),
                      max_size=12))
def test_every_run_of_the_upload_example_keeps_a_valid_configuration(moves: list[str]) -> None:
    h = Harness(UPLOAD)
    exe = h.start("upload")
    defn = h.reg.get("upload")
    t = defn.tables
    for move in moves:
        if move == "wait":
            h.advance(600)  # the scan's timer: leaves the parallel state from inside a region
        elif move == "clean":
            h.send("e", "scanned", {"clean": True})
        else:
            h.send("e", move)
        if exe.leaves:  # the harness checked the JSON round trip and that timers belong to active states
            assert configuration_problem(t, [t.index[p] for p in exe.leaves]) is None
            assert exe.active_path == "processing"
        if exe.status != "running":
            assert exe.timers == {} and exe.leaves == []
            break
