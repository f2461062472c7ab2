"""The sweeper: deterministic timeout ids, guarded deletes, a re-armed timer survives a racing sweep."""

from __future__ import annotations

import pytest

from durastate.engine import DefinitionRegistry, timeout_event_id
from durastate.engine.model import TIMEOUT, Event
from durastate.runtime import LocalRuntime, ManualClock, Sweeper, Worker
from durastate.store import DictStore
from durastate.transport import InMemoryTransport

from .conftest import ev
from .test_worker import start_event


def waiting(store: DictStore, registry: DefinitionRegistry, clock: ManualClock, *ids: str) -> Worker:
    w = Worker(store, registry, clock)
    for eid in ids:
        w.handle(eid, start_event(eid))
        w.handle(eid, ev("wait", f"{eid}-wait"))
    return w


def test_only_due_timers_fire_with_deterministic_ids(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    waiting(store, registry, clock, "a")
    clock.advance(10)
    waiting(store, registry, clock, "b")
    transport = InMemoryTransport()
    sweeper = Sweeper(store, transport, clock)
    clock.advance(25)  # a is due (armed at +0, fires at +30), b is not (fires at +40)
    assert sweeper.run_once() == 1
    ((target, event),) = transport.messages()
    fire_at = 1_700_000_030.0
    assert target == "a" and event.name == TIMEOUT
    assert event.id == timeout_event_id("a", "waiting", fire_at)
    assert event.data == {"path": "waiting", "fire_at": fire_at, "swept": True}  # the sweeper deletes it
    assert store.due_timers(clock()) == []
    clock.advance(10)
    assert sweeper.run_once() == 1


class CrashOnDelete(DictStore):
    crash = 0

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        if self.crash:
            self.crash -= 1
            raise RuntimeError("simulated crash between send and delete")
        super().delete_timer(execution_id, path, fire_at)


def test_a_resweep_after_a_crash_before_delete_dedupes(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = CrashOnDelete()
    waiting(store, registry, clock, "a")
    clock.advance(31)
    transport = InMemoryTransport()
    store.crash = 1
    with pytest.raises(RuntimeError, match="simulated crash"):
        Sweeper(store, transport, clock).run_once()
    assert Sweeper(store, transport, clock).run_once() == 1  # the timer is still there: swept again
    assert transport.pending() == 2
    stats = LocalRuntime(store, registry, transport, clock).run_until_idle()
    assert (stats.applied, stats.duplicates) == (1, 1)
    exe = store.load("a")
    assert exe is not None and exe.active_path == "idle"


def test_a_sweep_racing_a_rearm_keeps_the_rearmed_timer(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    w = waiting(store, registry, clock, "a")
    clock.advance(31)

    class RearmOnSend(InMemoryTransport):
        """The execution re-arms its timer after the sweep read it, before the sweep deletes it."""

        def send(self, messages: list[tuple[str, Event]]) -> None:  # type: ignore[override]
            w.handle("a", ev("rearm", "r1"))
            super().send(messages)

    transport = RearmOnSend(clock)
    assert Sweeper(store, transport, clock).run_once() == 1
    rearmed = clock() + 30
    assert store.due_timers(rearmed) == [("a", "waiting", rearmed)]  # survived the guarded delete
    rt = LocalRuntime(store, registry, InMemoryTransport(clock), clock)
    rt.transport.send(transport.messages())
    stats = rt.run_until_idle()
    assert stats.ignored == 1  # the stale timeout
    exe = store.load("a")
    assert exe is not None and exe.active_path == "waiting" and exe.timers == {"waiting": rearmed}
    clock.advance(30)
    rt.run_until_idle()
    exe = store.load("a")
    assert exe is not None and exe.active_path == "idle" and exe.timers == {}


def test_limit_bounds_the_work_of_one_run(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    waiting(store, registry, clock, *[f"e{i}" for i in range(7)])
    clock.advance(31)
    transport = InMemoryTransport()
    sweeper = Sweeper(store, transport, clock, batch_size=2)
    assert sweeper.run_once(limit=5) == 5
    assert sweeper.run_once(limit=5) == 2
    assert sweeper.run_once(limit=5) == 0
    assert transport.pending() == 7
