"""Retention through the runtime: a purged execution stays recognised, and ``Retention`` purges in batches.

The worker treats a tombstone as ended: a repeated start of its id is a duplicate (its mark is kept), a
start or an event with a new id is consumed and ignored, and nothing brings the execution back.
"""

from __future__ import annotations

from durastate.engine import DefinitionRegistry
from durastate.engine.model import START, Event
from durastate.runtime import HandleResult, LocalRuntime, ManualClock, Worker
from durastate.runtime.retention import Retention
from durastate.store.base import ExecutionStore

from .conftest import ev

DAY = 86400.0


def start_event(eid: str) -> Event:
    return Event(id=f"{eid}:start", name=START, data={"definition_id": "counter"})


def finish(w: Worker, eid: str) -> None:
    assert w.handle(eid, start_event(eid)) == HandleResult.APPLIED
    assert w.handle(eid, ev("stop", f"{eid}:stop")) == HandleResult.APPLIED


def test_a_purged_execution_ignores_a_repeated_start_and_late_events(
        every_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    w = Worker(every_store, registry, clock)
    finish(w, "c1")
    assert w.handle("c2", start_event("c2")) == HandleResult.APPLIED  # still running
    clock.advance(31 * DAY)

    run = Retention(every_store, 30 * DAY, clock).run_once()

    assert run.purged == 1 and not run.more
    assert w.handle("c1", start_event("c1")) == HandleResult.DUPLICATE
    assert w.handle("c1", Event(id="another-start", name=START, data={"definition_id": "counter"})) == "ignored"
    assert w.handle("c1", ev("inc", "late")) == HandleResult.IGNORED
    assert w.handle("c1", ev("stop", "c1:stop")) == HandleResult.DUPLICATE
    tomb = every_store.load("c1")
    assert tomb is not None and tomb.status == "purged" and tomb.outcome == "ok" and tomb.context == {}
    running = every_store.load("c2")
    assert running is not None and running.status == "running"


def test_retention_runs_bounded_batches_when_due(dict_store: ExecutionStore, registry: DefinitionRegistry,
                                                 clock: ManualClock) -> None:
    w = Worker(dict_store, registry, clock)
    for n in range(5):
        finish(w, f"c{n}")
    retention = Retention(dict_store, DAY, clock, batch=2, max_batches=2, interval=60.0)

    assert retention.run_if_due().purged == 0  # nothing ended a day ago yet
    clock.advance(30)
    assert retention.run_if_due().batches == 0  # the interval has not passed since the last run
    clock.advance(DAY)
    first = retention.run_if_due()
    assert (first.purged, first.batches, first.more) == (4, 2, True)
    second = retention.run_if_due()  # work was left behind: it goes on at once
    assert (second.purged, second.more) == (1, False)
    assert retention.run_if_due().batches == 0  # then it waits an interval again
    assert all(dict_store.load(f"c{n}").status == "purged" for n in range(5))  # type: ignore[union-attr]


def test_local_runtime_purges_between_rounds(dict_store: ExecutionStore, registry: DefinitionRegistry,
                                             clock: ManualClock) -> None:
    rt = LocalRuntime(dict_store, registry, clock=clock, retention=Retention(dict_store, DAY, clock))
    rt.start("counter", execution_id="c1")
    rt.send("c1", Event(name="stop"))
    rt.run_until_idle()
    clock.advance(DAY + 61)
    stats = rt.run_until_idle()
    assert stats.purged == 1
    assert rt.get("c1").status == "purged"  # type: ignore[union-attr]


def test_a_retention_built_without_a_clock_runs_on_the_runtimes(
        dict_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    retention = Retention(dict_store, DAY)  # no clock: the runtime's, not wall time
    rt = LocalRuntime(dict_store, registry, clock=clock, retention=retention)
    assert retention.clock is clock
    rt.start("counter", execution_id="c1")
    rt.send("c1", Event(name="stop"))
    rt.run_until_idle()
    clock.advance(DAY + 61)
    assert rt.run_until_idle().purged == 1
    own = ManualClock(clock() + 99 * DAY)
    kept = Retention(dict_store, DAY, own)
    LocalRuntime(dict_store, registry, clock=clock, retention=kept)
    assert kept.clock is own  # one given its own clock keeps it
