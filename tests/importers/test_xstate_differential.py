"""The XState importer against XState itself: generated machines, stepped event by event in both.

Hypothesis draws XState v5 machine configs (JSON) with hierarchy, parallel states (compound and atomic
regions, a parallel machine), shallow and deep history, ``stateIn`` guards, ``always``, ``onDone`` (also on a
state without a final child, which never fires), ``reenter`` and targets written every way XState reads them
(``'#id'``, a sibling's name, ``'.child'``), plus a list of events. Every entry and exit action logs
``enter:<state>`` / ``exit:<state>`` and transitions log and assign constants, so the log is the order in which
states are left and entered. ``xstate_run.cjs`` runs each machine in XState (the ``xstate`` package pinned in
package.json, run in node) and prints, after the start and after each event, the active state nodes, the
status, the context and the step's log; durastate steps the imported definition with the engine's own
:func:`~durastate.engine.step` and must give the same four, for every machine (the actions of the
transitions one microstep takes together are compared as a set: see :func:`_grouped`).

Machines are batched (one node process for many) so the test stays fast. What the generator avoids, because
the importer cannot give XState's answer statically, is in docs/importing.md: a transition from inside a
history state's parent to that history (XState computes the domain from the recorded states).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.inline import configuration
from durastate.importers import xstate
from durastate.importers.result import REGION_LEAF

from .conftest import HERE

RUNNER = HERE / "xstate_run.cjs"
XSTATE = HERE.parent.parent / "node_modules" / "xstate" / "package.json"
EVENTS = ("a", "b", "c.x", "c.y")
KEYS = (*EVENTS, "c.*")
"""The ``on`` keys drawn: the exact names and a wildcard one (never ``c``: an exact name in XState, a token
prefix in durastate; nor ``*``, which in XState also takes the done events XState raises itself)."""

pytestmark = pytest.mark.skipif(shutil.which("node") is None or not XSTATE.exists(),
                                reason="needs node and the xstate package (npm ci)")


# -- the generator -------------------------------------------------------------------------------------
@dataclass
class _Node:
    name: str
    path: str
    kind: str  # atomic, compound, parallel, final, history
    parent: _Node | None
    rank: int
    children: list[_Node] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def ancestors(self) -> list[_Node]:
        out, p = [], self.parent
        while p is not None:
            out.append(p)
            p = p.parent
        return out

    def subtree(self) -> list[_Node]:
        return [self, *(d for c in self.children for d in c.subtree())]

    def region(self) -> _Node | None:
        """The innermost region (a child of a parallel state) this state is or is in."""
        for s in (self, *self.ancestors()):
            if s.parent is not None and s.parent.kind == "parallel":
                return s
        return None


@st.composite
def machines(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    nodes: list[_Node] = []
    top = _Node("m", "", draw(st.sampled_from(["compound", "compound", "parallel"])), None, -1)

    def grow(parent: _Node, depth: int) -> None:
        if parent.kind == "parallel":
            kinds = [draw(st.sampled_from(["compound", "compound", "atomic"]) if depth < 3 else st.just("atomic"))
                     for _ in range(draw(st.integers(1 if parent is not top else 2, 3)))]
        else:
            count = draw(st.integers(2 if parent is top else 1, 3))
            inner = ["atomic", "atomic", "compound", "parallel"] if depth < 3 else ["atomic"]
            kinds = [draw(st.sampled_from(inner))]  # the initial child: never final
            kinds += [draw(st.sampled_from([*inner, "final"])) for _ in range(count - 1)]
            if depth > 0 and draw(st.integers(0, 3)) == 0:
                kinds.append("history")
        for kind in kinds:
            name = f"s{len(nodes)}"
            node = _Node(name, f"{parent.path}.{name}" if parent.path else name, kind, parent, len(nodes))
            nodes.append(node)
            parent.children.append(node)
            if kind in ("compound", "parallel"):
                grow(node, depth + 1)

    grow(top, 0)
    real = [n for n in nodes if n.kind != "history"]

    def write(target: _Node, source: _Node) -> str:
        ways = [f"#{target.name}"]
        if target.parent is source.parent and source.parent is not None:
            ways.append(target.name)
        if target in source.subtree() and target is not source:
            ways.append("." + target.path[len(source.path) + 1:])
        return draw(st.sampled_from(ways))

    def guard() -> dict[str, Any] | None:
        if draw(st.integers(0, 3)) != 0:
            return None
        return {"type": "xstate.stateIn", "stateValue": f"#{draw(st.sampled_from(real)).name}"}

    def transition(source: _Node, label: str, targets: list[_Node]) -> dict[str, Any]:
        tr: dict[str, Any] = {}
        if targets and draw(st.integers(0, 7)) != 0:
            target = draw(st.sampled_from(targets))
            tr["target"] = write(target, source)
            if draw(st.booleans()):
                tr["reenter"] = draw(st.booleans())
        g = guard()
        if g is not None:
            tr["guard"] = g
        acts: list[Any] = [{"type": "xstate.log", "message": f"{label}:{source.name}"}]
        if draw(st.booleans()):
            key, value = draw(st.sampled_from("xyz")), draw(st.integers(0, 9))
            acts.append({"type": "xstate.assign", "assignment": {key: value}})
        tr["actions"] = acts
        return tr

    for n in nodes:
        cfg = n.config
        cfg["id"] = n.name
        if n.kind == "history":
            cfg["type"] = "history"
            if draw(st.booleans()):
                cfg["history"] = "deep"
            continue
        if n.kind in ("parallel", "final"):
            cfg["type"] = n.kind
        if n.kind == "compound":
            cfg["initial"] = n.children[0].name
        cfg["entry"] = [{"type": "xstate.log", "message": f"enter:{n.name}"}]
        cfg["exit"] = [{"type": "xstate.log", "message": f"exit:{n.name}"}]
        if n.kind == "final":
            continue
        # a history target from inside the history's parent: XState's domain depends on what was recorded
        targets = [t for t in nodes if not (t.kind == "history" and t.parent in n.ancestors())]
        on: dict[str, Any] = {}
        for event in draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True)):
            trs = [transition(n, event, targets) for _ in range(draw(st.integers(1, 2)))]
            on[event] = trs if len(trs) > 1 else trs[0]
        if on:
            cfg["on"] = on
        # eventless and done transitions only go forward (in document order, inside the same region), so no
        # generated machine loops forever
        region = n.region()
        inside = [t for t in real if region is None or (t in region.subtree() and t is not region)]
        if n.kind == "atomic":
            ahead = [t for t in inside if t.rank > n.rank]
            if ahead and draw(st.integers(0, 3)) == 0:
                cfg["always"] = transition(n, "always", ahead)
                cfg["always"].setdefault("target", write(draw(st.sampled_from(ahead)), n))
        if n.kind in ("compound", "parallel") and draw(st.integers(0, 2)) == 0:
            last = max(d.rank for d in n.subtree())
            ahead = [t for t in inside if t.rank > last]
            if ahead:
                cfg["onDone"] = transition(n, "done", ahead)
                cfg["onDone"].setdefault("target", write(draw(st.sampled_from(ahead)), n))

    def config(n: _Node) -> dict[str, Any]:
        out = dict(n.config)
        if n.children:
            out["states"] = {c.name: config(c) for c in n.children}
        return out

    machine: dict[str, Any] = {"id": "m", "states": {c.name: config(c) for c in top.children}}
    if top.kind == "parallel":
        machine["type"] = "parallel"
    else:
        machine["initial"] = top.children[0].name
    return machine, draw(st.lists(st.sampled_from(EVENTS), min_size=3, max_size=12))


# -- the two runs ----------------------------------------------------------------------------------------
def _xstate(cases: list[tuple[dict[str, Any], list[str]]]) -> list[Any]:
    payload = json.dumps([{"config": c, "events": e} for c, e in cases])
    done = subprocess.run(["node", str(RUNNER)], input=payload, capture_output=True, text=True, timeout=120,
                          check=True)
    return list(json.loads(done.stdout))


_STATUS = {"running": "active", "finished": "done", "failed": "error"}


def _durastate(config: dict[str, Any], events: list[str]) -> list[dict[str, Any]]:
    result = xstate.convert(json.dumps(config))
    assert result.issues == [], [str(i) for i in result.issues]
    defn = load_definition(result.document)
    t = defn.tables
    prefix = "m." if config.get("type") == "parallel" else ""
    exe = Execution(id="x-1", definition_id="m", context=defn.initial_context())
    out = []
    for i, name in enumerate(["durastate.start", *events]):
        res = step(defn, exe, Event(name=name), now=float(i))
        assert exe.status != "failed", exe.error
        nodes = sorted(p.removeprefix(prefix) for p in (t.paths[s] for s in configuration(t, exe) if s > 0)
                       if p != prefix.rstrip(".") and not p.endswith("." + REGION_LEAF))
        out.append({"nodes": nodes, "status": _STATUS[exe.status], "context": copy.deepcopy(exe.context),
                    "log": res.logs})
    return out


def _grouped(log: list[str]) -> list[Any]:
    """The log with each run of transition actions (between the exits and entries of a microstep) as a set:
    XState runs the actions of the transitions one microstep takes in the order the states they come from
    were entered, durastate (as SCXML) in document order."""
    out: list[Any] = []
    for line in log:
        if line.startswith(("enter:", "exit:")):
            out.append(line)
        elif out and isinstance(out[-1], list):
            out[-1].append(line)
        else:
            out.append([line])
    return [sorted(x) if isinstance(x, list) else x for x in out]


def _compare(case: tuple[dict[str, Any], list[str]], theirs: Any) -> None:
    config, events = case
    assert not (isinstance(theirs, dict) and "error" in theirs), theirs
    ours = _durastate(config, events)
    for i, (mine, want) in enumerate(zip(ours, theirs, strict=True)):
        after = "the start" if i == 0 else f"event {i} ({events[i - 1]!r})"
        want = {k: v for k, v in want.items() if k != "value"}
        mine, want = {**mine, "log": _grouped(mine["log"])}, {**want, "log": _grouped(want["log"])}
        if want["status"] == "done":
            mine, want = {**mine, "nodes": []}, {**want, "nodes": []}  # (XState keeps the final configuration)
        if mine != want:
            raise AssertionError(f"after {after}:\n{json.dumps(config)}\nevents {events}\ndurastate {mine}\n"
                                 f"xstate    {want}")
        if want["status"] == "done":
            break


MACHINES = 400


@pytest.mark.slow
def test_imported_machines_step_as_xstate_steps_them() -> None:
    """Hypothesis draws the machines (no shrinking: they all go to one node process, then each is compared);
    a disagreement reports the smallest machine that shows one, with its events."""
    cases: list[tuple[dict[str, Any], list[str]]] = []

    @settings(max_examples=MACHINES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(machines())
    def collect(case: tuple[dict[str, Any], list[str]]) -> None:
        cases.append(case)

    collect()
    failures: list[tuple[int, str]] = []
    for case, theirs in zip(cases, _xstate(cases), strict=True):
        try:
            _compare(case, theirs)
        except AssertionError as exc:
            failures.append((len(json.dumps(case[0])), str(exc)))
    assert not failures, f"{len(failures)} of {len(cases)} machines differ; the smallest:\n{min(failures)[1]}"


def _logged(name: str, **node: Any) -> dict[str, Any]:
    return {"id": name, "entry": [{"type": "xstate.log", "message": f"enter:{name}"}],
            "exit": [{"type": "xstate.log", "message": f"exit:{name}"}], **node}


def _states(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {n["id"]: n for n in nodes}


REDUCED = {
    # a self-target below the top level, reenter false: no exit, no entry
    "self target below the top": ({"id": "m", "initial": "s0", "states": _states(_logged(
        "s0", initial="s4", states=_states(_logged("s4", on={"b": "#s4"}))))}, ["b"]),
    # a target inside the source inside a region: internal, the other region is not reset
    "target inside the source in a region": ({"id": "m", "type": "parallel", "states": _states(
        _logged("r1", initial="a", states=_states(_logged("a", initial="x", on={"b": ".y"}, states=_states(
            _logged("x"), _logged("y"))))),
        _logged("r2", initial="p", states=_states(_logged("p", on={"c": "q"}), _logged("q"))))}, ["c", "b"]),
    # a compound source targeting itself, reenter false: its children exit, its initial child enters again
    "compound self target": ({"id": "m", "initial": "s0", "states": _states(_logged(
        "s0", initial="a", on={"go": "s0"}, states=_states(_logged("a", on={"n": "b"}), _logged("b"))))},
        ["n", "go"]),
    # a parallel source targeting itself: every region starts again, the parallel state stays
    "parallel self target": ({"id": "m", "initial": "p", "states": _states(_logged(
        "p", type="parallel", on={"go": "p"}, states=_states(
            _logged("r1", initial="a", states=_states(_logged("a", on={"n": "b"}), _logged("b"))),
            _logged("r2", initial="c", states=_states(_logged("c", on={"n": "d"}), _logged("d"))))))},
        ["n", "go"]),
    # a transition between regions: XState keeps the parallel state (SCXML would exit and re-enter it)
    "between regions": ({"id": "m", "initial": "p", "states": _states(_logged(
        "p", type="parallel", states=_states(
            _logged("r1", initial="a", states=_states(_logged("a", on={"go": "#d"}), _logged("b"))),
            _logged("r2", initial="c", states=_states(_logged("c"), _logged("d"))))))}, ["go"]),
    # an onDone on a state without a final child: accepted, never taken
    "onDone without a final child": ({"id": "m", "initial": "s", "states": _states(
        _logged("s", initial="a", onDone="t", states=_states(_logged("a", on={"n": "b"}), _logged("b"))),
        _logged("t"))}, ["n"]),
    # a parallel state's own transition is XState's only when no region takes the event
    "parallel's own transition after its regions'": ({"id": "m", "initial": "p", "states": _states(_logged(
        "p", type="parallel", on={"e": {"actions": [{"type": "xstate.log", "message": "p took e"}]}},
        states=_states(_logged("r1", initial="a", states=_states(_logged("a", on={"e": "b"}), _logged("b"))),
                       _logged("r2", initial="c", states=_states(_logged("c"))))))}, ["e", "e"]),
    # a parallel machine is done when every region is in a final state
    "parallel machine done": ({"id": "m", "type": "parallel", "states": _states(
        _logged("a", initial="a1", states=_states(_logged("a1", on={"go": "a2"}), _logged("a2", type="final"))),
        _logged("b", initial="b1", states=_states(_logged("b1", always="b2"), _logged("b2", type="final"))))},
        ["go"]),
}


@pytest.mark.parametrize("name", sorted(REDUCED))
def test_reduced_case_steps_as_xstate_steps_it(name: str) -> None:
    case = REDUCED[name]
    (theirs,) = _xstate([case])
    _compare(case, theirs)
