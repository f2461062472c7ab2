"""The peer engines, each driving the same chart with the same event sequence.

Chart 1 ("toggle"): idle --go--> active{a <-toggle-> b} --stop--> idle.
Chart 2 ("history"): chart 1 plus a pause/resume through a deep history state and a parallel state with
two regions that join (each region reaches a final state) back to idle.

Each peer is ``factory() -> (make, send, where)``: ``make()`` builds a fresh machine in its initial
state, ``send(m, name)`` dispatches one event and runs it to completion, ``where(m)`` names the active
leaf state(s) — the harness checks it after every run, so a peer that silently drops an event fails
the benchmark instead of winning it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Peer = tuple[Callable[[], Any], Callable[[Any, str], None], Callable[[Any], str]]

CHART1_CYCLE = ["go", "toggle", "toggle", "toggle", "stop"]
"""One round of chart 1; repeated to build the benchmark sequence (ends where it started: idle)."""

CHART2_CYCLE = ["go", "toggle", "pause", "resume", "toggle", "split", "l", "r"]
"""One round of chart 2: a, b, paused, b again (deep history), a, fork, left done, right done -> idle."""


# -- chart 1 ------------------------------------------------------------------------------------------
def transitions_chart1() -> Peer:
    from transitions.extensions import HierarchicalMachine

    states: list[Any] = ["idle", {"name": "active", "children": ["a", "b"], "initial": "a"}]
    trans = [["go", "idle", "active"], ["toggle", "active_a", "active_b"],
             ["toggle", "active_b", "active_a"], ["stop", "active", "idle"]]

    def make() -> Any:
        return HierarchicalMachine(states=states, transitions=trans, initial="idle")

    def send(m: Any, name: str) -> None:
        m.trigger(name)

    return make, send, lambda m: str(m.state)


def statemachine_chart1() -> Peer:
    from statemachine import State, StateChart

    class Chart(StateChart):  # type: ignore[misc]
        idle = State(initial=True)

        class active(State.Compound):  # type: ignore[misc,name-defined]
            a = State(initial=True)
            b = State()
            toggle = a.to(b) | b.to(a)

        go = idle.to(active)
        stop = active.to(idle)

    def send(m: Any, name: str) -> None:
        m.send(name)

    return Chart, send, _psm_where


def _psm_where(m: Any) -> str:
    return ",".join(sorted(s.id for s in m.configuration if not s.states))


SISMIC_CHART1 = """
statechart:
  name: toggle
  root state:
    name: root
    initial: idle
    states:
    - name: idle
      transitions: [{target: active, event: go}]
    - name: active
      initial: a
      transitions: [{target: idle, event: stop}]
      states:
      - name: a
        transitions: [{target: b, event: toggle}]
      - name: b
        transitions: [{target: a, event: toggle}]
"""


def _sismic(yaml_text: str) -> Peer:
    from sismic.interpreter import Interpreter
    from sismic.io import import_from_yaml

    chart = import_from_yaml(yaml_text)

    def make() -> Any:
        it = Interpreter(chart)
        it.execute()
        return it

    def send(it: Any, name: str) -> None:
        it.queue(name)
        it.execute()

    def where(it: Any) -> str:
        return ",".join(sorted(s for s in it.configuration if not chart.children_for(s)))

    return make, send, where


def sismic_chart1() -> Peer:
    return _sismic(SISMIC_CHART1)


# -- chart 2 ------------------------------------------------------------------------------------------
def transitions_chart2() -> Peer:
    """transitions has parallel states (and ``on_final`` for the join) but no history states.

    History is emulated the way a transitions user would: an exit callback on each child of ``active``
    remembers it, and ``resume`` is two guarded transitions to the remembered child. The join uses
    ``on_final`` on the parallel state, which triggers ``done`` (queued machine).
    """
    from transitions.extensions import HierarchicalMachine

    states: list[Any] = [
        "idle", "paused",
        {"name": "active", "children": ["a", "b"], "initial": "a"},
        {"name": "both", "on_final": "joined", "parallel": [
            {"name": "left", "children": ["l1", {"name": "l2", "final": True}], "initial": "l1"},
            {"name": "right", "children": ["r1", {"name": "r2", "final": True}], "initial": "r1"}]},
    ]
    trans: list[Any] = [
        ["go", "idle", "active"], ["toggle", "active_a", "active_b"], ["toggle", "active_b", "active_a"],
        ["pause", "active", "paused"],
        {"trigger": "resume", "source": "paused", "dest": "active_a", "conditions": "was_a"},
        {"trigger": "resume", "source": "paused", "dest": "active_b", "unless": "was_a"},
        ["split", "active", "both"], ["l", "both_left_l1", "both_left_l2"],
        ["r", "both_right_r1", "both_right_r2"], ["done", "both", "idle"],
    ]

    class Model:
        def __init__(self) -> None:
            self.hist = "active_a"

        def was_a(self) -> bool:
            return self.hist == "active_a"

        def joined(self) -> None:
            self.trigger("done")  # type: ignore[attr-defined]

        def left_a(self) -> None:
            self.hist = "active_a"

        def left_b(self) -> None:
            self.hist = "active_b"

    def make() -> Any:
        model = Model()
        m = HierarchicalMachine(model=model, states=states, transitions=trans, initial="idle", queued=True)
        m.on_exit("active_a", "left_a")
        m.on_exit("active_b", "left_b")
        return model

    def send(m: Any, name: str) -> None:
        m.trigger(name)

    return make, send, lambda m: str(m.state)


def statemachine_chart2() -> Peer:
    from statemachine import HistoryState, State, StateChart

    class Chart(StateChart):  # type: ignore[misc]
        idle = State(initial=True)
        paused = State()

        class active(State.Compound):  # type: ignore[misc,name-defined]
            a = State(initial=True)
            b = State()
            h = HistoryState(type="deep")
            toggle = a.to(b) | b.to(a)

        class both(State.Parallel):  # type: ignore[misc,name-defined]
            class left(State.Compound):  # type: ignore[misc,name-defined]
                l1 = State(initial=True)
                l2 = State(final=True)
                l = l1.to(l2)  # noqa: E741

            class right(State.Compound):  # type: ignore[misc,name-defined]
                r1 = State(initial=True)
                r2 = State(final=True)
                r = r1.to(r2)

        go = idle.to(active)
        pause = active.to(paused)
        resume = paused.to(active.h)
        split = active.to(both)
        done_state_both = both.to(idle)

    def send(m: Any, name: str) -> None:
        m.send(name)

    return Chart, send, _psm_where


SISMIC_CHART2 = """
statechart:
  name: history
  root state:
    name: root
    initial: idle
    states:
    - name: idle
      transitions: [{target: active, event: go}]
    - name: paused
      transitions: [{target: active.h, event: resume}]
    - name: active
      initial: a
      transitions:
      - {target: paused, event: pause}
      - {target: both, event: split}
      states:
      - name: a
        transitions: [{target: b, event: toggle}]
      - name: b
        transitions: [{target: a, event: toggle}]
      - name: active.h
        type: deep history
    - name: both
      parallel states:
      - name: left
        initial: l1
        states:
        - name: l1
          transitions: [{target: l2, event: l}]
        - name: l2
          type: final
      - name: right
        initial: r1
        states:
        - name: r1
          transitions: [{target: r2, event: r}]
        - name: r2
          type: final
      transitions:
      - target: idle
        guard: active('l2') and active('r2')
"""
"""sismic's join: an eventless transition on the parallel state guarded on both final states."""


def sismic_chart2() -> Peer:
    return _sismic(SISMIC_CHART2)


PEERS_CHART1: dict[str, Callable[[], Peer]] = {
    "transitions (HierarchicalMachine)": transitions_chart1,
    "python-statemachine (StateChart)": statemachine_chart1,
    "sismic": sismic_chart1,
}
PEERS_CHART2: dict[str, Callable[[], Peer]] = {
    "transitions (HierarchicalMachine)": transitions_chart2,
    "python-statemachine (StateChart)": statemachine_chart2,
    "sismic": sismic_chart2,
}
PEER_NOTES = {
    ("chart2", "transitions (HierarchicalMachine)"): "no history states: emulated with exit callbacks and "
                                                      "two guarded `resume` transitions",
}
