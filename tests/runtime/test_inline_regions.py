"""Inline regions through the runtime on every store: one execution, one commit per event, no spawns.

The same chart as ``FORK`` (two regions that join), written ``regions: inline``, plus a timer in one region:
the regions step on the events sent to the execution itself, the timer fires through the store's timer
table, and the join finishes the execution, with nothing forwarded or spawned.
"""

from __future__ import annotations

import copy

from durastate.engine import DefinitionRegistry, load_definition
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore

from .conftest import FORK, ev

INLINE_FORK = copy.deepcopy(FORK)
INLINE_FORK["id"] = "inline-fork"
INLINE_FORK["states"]["both"]["regions"] = "inline"
INLINE_FORK["states"]["both"]["states"]["right"]["states"]["r1"]["after"] = {"seconds": 30, "target": "r2"}


def test_inline_regions_step_join_and_fire_timers_in_one_execution(every_store: ExecutionStore,
                                                                    clock: ManualClock) -> None:
    registry = DefinitionRegistry([load_definition(INLINE_FORK)])
    rt = LocalRuntime(every_store, registry, clock=clock)
    rt.start("inline-fork", execution_id="p")
    stats = rt.run_until_idle()
    assert stats.spawned == 0
    exe = rt.get("p")
    assert exe is not None and exe.active_path == "both" and exe.leaves == ["both.left.l1", "both.right.r1"]
    assert exe.children == {} and list(exe.timers) == ["both.right.r1"]
    rt.send("p", ev("go"))  # both regions take it in one step: l1 -> l2 (final), r1 -> r2 (final): joined
    rt.run_until_idle()
    exe = rt.get("p")
    assert exe is not None and exe.status == "finished" and exe.outcome == "joined"
    assert exe.version == 2 and exe.timers == {} and exe.leaves == []
    trace = every_store.read_trace("p")
    assert [(t["event"], t["from"], t["to"]) for t in trace] == [
        ("durastate.start", None, "both"), ("go", "both", "joined")]
    assert every_store.list_executions().items[0].active_path == "joined"


def test_a_timer_in_one_region_moves_only_that_region(every_store: ExecutionStore, clock: ManualClock) -> None:
    registry = DefinitionRegistry([load_definition(INLINE_FORK)])
    rt = LocalRuntime(every_store, registry, clock=clock)
    rt.start("inline-fork", execution_id="q")
    rt.run_until_idle()
    clock.advance(30)
    assert rt.run_until_idle().fired == 1
    exe = rt.get("q")
    assert exe is not None and exe.leaves == ["both.left.l1", "both.right.r2"] and exe.status == "running"
    rt.send("q", ev("go"))
    rt.run_until_idle()
    exe = rt.get("q")
    assert exe is not None and exe.outcome == "joined"
