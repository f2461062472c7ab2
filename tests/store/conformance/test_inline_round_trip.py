"""An execution inside an inline parallel state (several active leaves) round-trips through every store.

The leaves live in the execution's JSON (``Execution.leaves``); the broken-out summary column is
``active_path`` (the parallel state), which listings show as for any other execution.
"""

from __future__ import annotations

from durastate.engine import Event, load_definition, step
from durastate.engine.model import Execution
from durastate.store.base import ExecutionStore

INLINE = {
    "id": "inline-rt",
    "initial": "work",
    "states": {
        "work": {"type": "parallel", "regions": "inline", "on_done": "done", "states": {
            "a": {"initial": "a1", "states": {"a1": {"after": {"seconds": 60, "target": "a2"}},
                                              "a2": {"type": "final"}}},
            "b": {"initial": "b1", "states": {"b1": {"on": {"go": "b2"}}, "b2": {"type": "final"}}},
        }},
        "done": {"type": "final"},
    },
}


def test_leaves_and_multi_leaf_history_round_trip(store: ExecutionStore) -> None:
    defn = load_definition(INLINE)
    exe = Execution(id="inl-1", definition_id=defn.id)
    res = step(defn, exe, Event(id="s", name="durastate.start"), 100.0)
    exe.history["work"] = "work.a.a1 work.b.b1"
    store.commit(exe, res.emits, "s", res.timers, res.spawns, res.trace)
    got = store.load("inl-1")
    assert got is not None
    assert got.leaves == ["work.a.a1", "work.b.b1"] and got.active_path == "work"
    assert got.history == {"work": "work.a.a1 work.b.b1"} and got.timers == exe.timers
    [summary] = store.list_executions(definition_id=defn.id).items
    assert summary.active_path == "work"
    # the next step reads the configuration back from what the store returned
    res = step(defn, got, Event(id="g", name="go"), 101.0)
    store.commit(got, res.emits, "g", res.timers, res.spawns, res.trace)
    again = store.load("inl-1")
    assert again is not None and again.leaves == ["work.a.a1", "work.b.b2"] and again.version == 2
    assert store.due_timers(1000.0) == [("inl-1", "work.a.a1", 160.0)]
