"""The sweeper with a timer hop: timers within 15 minutes are handed over ahead of time, once; a timer whose
hop was lost is fired when overdue; the AWS forwarder never fires a timer early."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, timeout_event_id
from durastate.engine.model import TIMEOUT, Event
from durastate.runtime import ManualClock, Sweeper
from durastate.runtime.aws import AwsRuntime, AwsSettings, LogSink
from durastate.runtime.sweeper import HOP_GRACE, timeout_event
from durastate.store import DictStore
from durastate.transport import InMemoryTransport
from durastate.transport.wire import dump_envelope

from .test_sweeper import waiting

ARMED = 1_700_000_030.0  # the test definition's timer: 30 s after ``waiting`` is entered at the clock's start


class Hops:
    """Records what the sweeper hands over ahead of time."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Event, float]] = []

    def send(self, timeouts: Sequence[tuple[str, Event]], now: float) -> int:
        self.sent += [(t, e, now) for t, e in timeouts]
        return len(timeouts)


def test_a_timer_within_the_horizon_is_hopped_once_and_not_fired(registry: DefinitionRegistry,
                                                                 clock: ManualClock) -> None:
    store, transport, hops = DictStore(), InMemoryTransport(), Hops()
    waiting(store, registry, clock, "a")
    sweeper = Sweeper(store, transport, clock, hops=hops)
    assert sweeper.run_once() == 1
    [(target, event, _)] = hops.sent
    assert target == "a" and event.name == TIMEOUT and event.id == timeout_event_id("a", "waiting", ARMED)
    clock.advance(10)
    waiting(store, registry, clock, "b")  # armed after that run, within its horizon: the worker hops it
    assert sweeper.run_once() == 0  # nothing new came within range
    clock.advance(25)
    assert sweeper.run_once() == 0  # due, in flight: not fired again
    assert transport.messages() == [] and len(hops.sent) == 1
    assert [t[0] for t in store.due_timers(clock())] == ["a"]  # still armed until the worker applies it


def test_a_timer_whose_hop_was_lost_is_fired_once_overdue(registry: DefinitionRegistry,
                                                           clock: ManualClock) -> None:
    store, transport, hops = DictStore(), InMemoryTransport(), Hops()
    waiting(store, registry, clock, "a")
    sweeper = Sweeper(store, transport, clock, hops=hops)
    sweeper.run_once()
    hops.sent.clear()  # the hop never arrived
    clock.advance(30 + HOP_GRACE - 1)
    assert sweeper.run_once() == 0 and transport.messages() == []  # within the grace: maybe in flight
    clock.advance(1)
    assert sweeper.run_once() == 1
    [(target, event)] = transport.messages()
    assert target == "a" and event.id == timeout_event_id("a", "waiting", ARMED)
    assert store.due_timers(clock()) == [] and hops.sent == []


def test_a_new_sweeper_hops_everything_in_range_again(registry: DefinitionRegistry, clock: ManualClock) -> None:
    store, transport, hops = DictStore(), InMemoryTransport(), Hops()
    waiting(store, registry, clock, "a", "b")
    Sweeper(store, transport, clock, hops=hops).run_once()
    clock.advance(5)
    Sweeper(store, transport, clock, hops=hops).run_once()  # a new container knows nothing of the first
    ids = [e.id for _, e, _ in hops.sent]
    assert len(ids) == 4 and len(set(ids)) == 2  # each hopped twice, with the same id: it fires once
    assert transport.messages() == []


class FakeSqs:
    """The timers queue's SQS client: records the hops sent back with their delays."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.batches.append(Entries)
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


def test_the_timers_function_waits_out_the_second_and_sends_back_what_is_early(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    store, sqs = DictStore(), FakeSqs()
    waiting(store, registry, clock, "a", "b")
    settings = AwsSettings(timers_queue_url="https://sqs.local/123/durastate-timers", definitions_dir=Path("."))
    rt = AwsRuntime(settings, store, registry, InMemoryTransport(), LogSink(), sqs, clock=clock)
    clock.advance(29.6)
    soon = timeout_event("a", "waiting", ARMED)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    records = [("m1", dump_envelope("a", soon)), ("m2", dump_envelope("a", soon)),  # delivered twice
               ("m3", dump_envelope("b", timeout_event("b", "waiting", ARMED + 100))),  # early: goes back
               ("m4", dump_envelope("c", Event(id="x", name="hi")))]  # not a timeout: dropped
    outcomes, failed = rt.fire_timers(records, sleep=sleep)
    assert outcomes == {"applied": 1, "duplicate": 1} and failed == []
    assert slept == [pytest.approx(0.4)]  # never early: it waited for a's fire_at
    a = store.load("a")
    assert a is not None and a.active_path != "waiting" and "waiting" not in a.timers
    [[entry]] = sqs.batches  # b went back to the timers queue with the delay it has left
    assert entry["DelaySeconds"] == 100 and '"b"' in entry["MessageBody"]


def test_the_timers_function_counts_a_timeout_a_suspended_execution_holds_as_held(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    """Held is done, not a failure: SQS would redeliver the hop, and the execution hold nothing new."""
    from durastate.runtime import Worker

    store = DictStore()
    waiting(store, registry, clock, "a")
    Worker(store, registry, clock).handle("a", Event(id="s", name="durastate.suspend"))
    settings = AwsSettings(timers_queue_url="https://sqs.local/123/durastate-timers", definitions_dir=Path("."))
    rt = AwsRuntime(settings, store, registry, InMemoryTransport(), LogSink(), FakeSqs(), clock=clock)
    clock.advance(30)
    outcomes, failed = rt.fire_timers([("m1", dump_envelope("a", timeout_event("a", "waiting", ARMED)))])
    assert outcomes == {"held": 1} and failed == []
    a = store.load("a")
    assert a is not None and a.status == "suspended" and [e.name for e in a.held] == [TIMEOUT]


class Reads(DictStore):
    """Records the ranges the sweeper asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[float, float | None]] = []

    def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        self.reads.append((now, since))
        return super().due_timers(now, since)


def test_a_later_run_reads_the_window_after_what_it_hopped_and_every_overdue_timer(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    """The timers already hopped are not read again (the window starts where the last run's ended), while
    the read of what is due stays open below: a timer overdue by any amount is still found."""
    store, transport, hops = Reads(), InMemoryTransport(), Hops()
    waiting(store, registry, clock, "a")
    sweeper = Sweeper(store, transport, clock, hops=hops)
    start = clock()
    assert sweeper.run_once() == 1
    store.reads.clear()
    clock.advance(20)
    assert sweeper.run_once() == 0
    assert store.reads == [(start + 20, None), (start + 20 + 900, start + 900)]
    hops.sent.clear()  # a's hop was lost: it is overdue long after, and still fired
    clock.advance(3600)
    assert sweeper.run_once() == 1
    [(target, _)] = transport.messages()
    assert target == "a"


def test_a_schedule_tick_is_hopped_and_each_fired_tick_hops_the_next(clock: ManualClock) -> None:
    """A `rate: 30s` schedule on a sweeper with hops: the sweep hops the first tick instead of waiting to
    fire it; firing a tick (as the timers function does when its hop arrives) starts its execution and
    hops the next tick; firing the same tick again starts nothing and hops nothing."""
    from durastate.engine.schedules import ScheduleSpec, schedule_record_id, tick_execution_id
    from durastate.runtime.schedules import TICK_TIMER, sync_schedules

    store, transport, hops = DictStore(), InMemoryTransport(), Hops()
    t0 = clock()
    first = (t0 // 30 + 1) * 30  # a rate's ticks fall on whole multiples of it
    sync_schedules(store, {"pulse": ScheduleSpec.model_validate({"definition": "counter", "rate": "30s"})}, t0)
    record = schedule_record_id("pulse")
    sweeper = Sweeper(store, transport, clock, hops=hops)
    assert sweeper.run_once() == 1
    assert [(t, e.data["fire_at"]) for t, e, _ in hops.sent] == [(record, first)]
    assert store.pending_outbox() == []  # hopped, not fired

    clock.advance(first - t0)
    sweeper.fire_schedule(record, TICK_TIMER, first)  # the hop arrived
    started = [e.target_id for e in store.pending_outbox()]
    assert started == [tick_execution_id("pulse", first)]
    assert [(t, e.data["fire_at"]) for t, e, _ in hops.sent[1:]] == [(record, first + 30)]
    assert [t[2] for t in store.due_timers(t0 + 3600)] == [first + 30]  # the fired tick's timer is gone

    sweeper.fire_schedule(record, TICK_TIMER, first)  # delivered twice
    assert [e.target_id for e in store.pending_outbox()] == started and len(hops.sent) == 2


def test_a_jittered_tick_is_hopped_at_its_offset_and_a_deleted_schedules_hop_starts_nothing(
        clock: ManualClock) -> None:
    """With jitter the hop carries the tick's firing time (tick + its derived offset), the run keeps the
    tick's name; after ``schedules delete`` a hop already on its way starts nothing and hops nothing."""
    from durastate.engine.schedules import ScheduleSpec, schedule_record_id, tick_execution_id
    from durastate.runtime.schedules import TICK_TIMER, delete_schedule, sync_schedules

    store, transport, hops = DictStore(), InMemoryTransport(), Hops()
    t0 = clock()
    spec = ScheduleSpec.model_validate({"definition": "counter", "rate": "10m", "jitter": "5m"})
    sync_schedules(store, {"pulse": spec}, t0)
    record = schedule_record_id("pulse")
    loaded = store.load(record)
    assert loaded is not None and loaded.secret is not None
    tick = (t0 // 600 + 1) * 600
    first = spec.fire_at(tick, loaded.secret, "pulse")
    sweeper = Sweeper(store, transport, clock, hops=hops)
    sweeper.run_once()
    assert [(t, e.data["fire_at"]) for t, e, _ in hops.sent] == [(record, first)]
    clock.set(first)
    sweeper.fire_schedule(record, TICK_TIMER, first)  # the hop arrived
    assert [e.target_id for e in store.pending_outbox()] == [tick_execution_id("pulse", tick)]
    second = hops.sent[-1][1].data["fire_at"]
    assert second == spec.fire_at(tick + 600, loaded.secret, "pulse")
    delete_schedule(store, "pulse", clock())
    clock.set(second)
    sweeper.fire_schedule(record, TICK_TIMER, second)  # the hop sent before the delete
    assert len(store.pending_outbox()) == 1 and len(hops.sent) == 2
    assert store.due_timers(second + 86400) == []
