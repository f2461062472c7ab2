"""A timer's arm and its timeout on DynamoDB: single-item writes, and no timer left behind either way it fired."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durastate.engine import DefinitionRegistry, Event, load_definition, timeout_event_id
from durastate.engine.model import TIMEOUT
from durastate.runtime.sweeper import Sweeper
from durastate.runtime.worker import Worker

from .conftest import Recorder, make_store

COSTS = Path(__file__).resolve().parents[3] / "bench" / "defs" / "costs.yaml"


class Sent:
    """A transport that keeps what it is given."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Event]] = []

    def send(self, messages: Any) -> None:
        self.messages += list(messages)


class Clock:
    now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def setup(rec: Recorder) -> tuple[Any, Worker, Clock]:
    store = make_store(rec)
    reg = DefinitionRegistry()
    reg.register(load_definition(COSTS))
    clock = Clock()
    worker = Worker(store, reg, clock=clock, trace=False)
    worker.handle("x", Event(id="x:start", name="durastate.start", data={"definition_id": "costs"}))
    return store, worker, clock


def test_arm_then_sweep_then_timeout_writes_single_items(rec: Recorder) -> None:
    store, worker, clock = setup(rec)
    rec.reset()
    worker.handle("x", Event(id="arm-1", name="arm"))
    assert rec.ops() == ["get_item", "put_item", "put_item"]  # the timer ahead, then the execution
    clock.now += 61
    transport = Sent()
    assert Sweeper(store, transport, clock=clock).run_once() == 1  # sends the timeout, deletes the timer
    [(target, timeout)] = transport.messages
    rec.reset()
    worker.handle(target, timeout)
    # the commit is one PutItem, and nothing else: the sweeper deleted the timer (the timeout says so),
    # so no conditional delete of a missing item (still a write unit) follows it
    assert timeout.data.get("swept") is True
    assert rec.ops() == ["get_item", "put_item"]
    loaded = store.load("x")
    assert loaded is not None and loaded.active_path == "idle" and loaded.timers == {}
    assert store.due_timers(clock.now + 3600) == []


def test_a_timeout_that_arrives_before_its_sweep_deletes_the_timer_itself(rec: Recorder) -> None:
    """A timeout delivered ahead of time (the timer hop) finds its timer still armed: it is deleted after
    the commit, so the sweeper never fires it again."""
    store, worker, clock = setup(rec)
    worker.handle("x", Event(id="arm-1", name="arm"))
    [(eid, path, fire_at)] = store.due_timers(clock.now + 3600)
    clock.now = fire_at
    timeout = Event(id=timeout_event_id(eid, path, fire_at), name=TIMEOUT, data={"path": path, "fire_at": fire_at})
    worker.handle("x", timeout)
    assert store.due_timers(clock.now + 3600) == []
    loaded = store.load("x")
    assert loaded is not None and loaded.active_path == "idle"


def test_a_swept_timeout_whose_sweeper_crashed_before_deleting_is_deleted_by_the_next_sweep(rec: Recorder) -> None:
    """The worker trusts ``swept``: if the sweeper died between its send and its delete, the timer is still
    armed, the next sweep sends the same timeout again (a duplicate: ignored) and deletes it then."""
    store, worker, clock = setup(rec)
    worker.handle("x", Event(id="arm-1", name="arm"))
    [(eid, path, fire_at)] = store.due_timers(clock.now + 3600)
    clock.now = fire_at + 1
    timeout = Event(id=timeout_event_id(eid, path, fire_at), name=TIMEOUT,
                    data={"path": path, "fire_at": fire_at, "swept": True})
    worker.handle("x", timeout)
    assert store.due_timers(clock.now) == [(eid, path, fire_at)]  # left to its sweeper
    transport = Sent()
    assert Sweeper(store, transport, clock=clock).run_once() == 1
    [(_, again)] = transport.messages
    assert again.id == timeout.id
    worker.handle("x", again)  # a duplicate
    assert store.due_timers(clock.now + 3600) == []
    loaded = store.load("x")
    assert loaded is not None and loaded.active_path == "idle" and loaded.version == 3


def test_due_timers_since_reads_only_the_window(rec: Recorder) -> None:
    """``since`` is a BETWEEN on the ``due`` index: the Queries name both bounds, and the answer is the window."""
    store, worker, clock = setup(rec)
    worker.handle("x", Event(id="arm-1", name="arm"))
    [(eid, path, fire_at)] = store.due_timers(clock.now + 3600)
    rec.reset()
    assert store.due_timers(fire_at + 10, since=fire_at + 1) == []
    assert store.due_timers(fire_at + 10, since=fire_at) == [(eid, path, fire_at)]
    assert store.due_timers(fire_at - 1, since=fire_at + 1) == []  # an empty window reads nothing
    queries = [c for c in rec.calls if c[0] == "query"]
    assert queries and all("BETWEEN" in c[1]["KeyConditionExpression"] for c in queries)


class Hops:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Event]] = []

    def send(self, timeouts: Any, now: float) -> int:
        self.sent += list(timeouts)
        return len(timeouts)


def test_a_hopping_sweep_scans_once_and_reads_a_window(rec: Recorder) -> None:
    """Idle, a hopping sweep is one request (its second read reuses the first's empty Scan); with a timer
    armed, the second read Queries the window after what the last run hopped, without a Scan of its own."""
    store, worker, clock = setup(rec)
    hops = Hops()
    sweeper = Sweeper(store, Sent(), clock=clock, hops=hops)
    rec.reset()
    sweeper.run_once()
    assert rec.ops() == ["scan"]
    worker.handle("x", Event(id="arm-1", name="arm"))
    rec.reset()
    clock.now += 1
    sweeper.run_once()
    ops = rec.ops()
    assert ops.count("scan") == 1 and ops.count("query") == 8, ops
    windowed = [c[1] for c in rec.calls if c[0] == "query" and "BETWEEN" in c[1]["KeyConditionExpression"]]
    assert len(windowed) == 4
    assert hops.sent == []  # armed within the last run's horizon: its worker hops it, not the sweeper
