"""What the runtime derives cannot be forged or claimed first (``durastate.engine.ids`` has the rule), on
every store, through the entries a user hits: ``LocalRuntime.send``/``start``, the client, the wire, and
the queue itself (a message put there directly, as a producer or a replayed dead letter does)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import (
    child_execution_id,
    definition_record_id,
    finished_event_id,
    redrive_event_id,
    timeout_event_id,
)
from durastate.engine.model import Event
from durastate.engine.schedules import ScheduleSpec, schedule_record_id, tick_execution_id
from durastate.errors import InvalidValue, MalformedEvent, ReservedId
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.schedules import get_schedule
from durastate.store.base import ExecutionStore
from durastate.transport import parse_envelope

from .conftest import COUNTER
from .test_control import Provider, order

T0 = 1_700_000_000.0
INVOKER = {
    "id": "invoker",
    "initial": "calling",
    "states": {
        "calling": {"invoke": {"definition": "counter", "context": {}}, "on_done": "ok", "on_error": "bad"},
        "ok": {"type": "final", "outcome": "ok"},
        "bad": {"type": "final", "outcome": "child-failed"},
    },
}


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def rt(every_store: ExecutionStore, provider: Provider, clock: ManualClock) -> LocalRuntime:
    reg = DefinitionRegistry()
    for doc in (COUNTER, INVOKER, order(provider)):
        reg.register(load_definition(doc))
    return LocalRuntime(every_store, reg, clock=clock)


def on_the_queue(rt: LocalRuntime, target_id: str, event: dict[str, Any]) -> None:
    """A message put on the queue directly (past the producer entries), parsed at the wire as the worker
    parses it, then applied."""
    env = parse_envelope(json.dumps({"target_id": target_id, "event": event}))
    rt.transport.send([(env.target_id, env.event)])
    rt.run_until_idle()


def last_letter(rt: LocalRuntime) -> tuple[str, str, str]:
    letter = rt.dead_letters[-1]
    return letter.event.id, letter.error, letter.reason


# -- 1. system records --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["durastate.terminate", "durastate.suspend", "durastate.cancel", "inc"])
def test_no_event_reaches_a_schedule_record_and_the_schedule_keeps_ticking(
        rt: LocalRuntime, clock: ManualClock, name: str) -> None:
    rt.sync_schedules({"hb": ScheduleSpec(definition="counter", rate="15m")})
    record = schedule_record_id("hb")
    with pytest.raises(ReservedId, match="system record"):
        rt.send(record, Event(id="x", name=name))
    with pytest.raises(ReservedId, match="system record"):
        DurastateClient(rt.transport).send(record, name)
    with pytest.raises(ReservedId, match="system record"):
        parse_envelope({"target_id": record, "event": {"id": "x", "name": name}})
    # Past the wire anyway (a message replayed from a dead-letter queue, an old worker's): dead-lettered.
    rt.transport.send([(record, Event(id="x", name=name))])
    rt.run_until_idle()
    assert last_letter(rt)[:2] == ("x", "ReservedId") and "accepts no events" in last_letter(rt)[2]
    schedule = get_schedule(rt.store, "hb")
    assert schedule.next_tick is not None
    clock.set(schedule.next_tick + 1)
    rt.run_until_idle()
    run = rt.get(tick_execution_id("hb", schedule.next_tick))
    assert run is not None and run.definition_id == "counter"
    assert get_schedule(rt.store, "hb").next_tick == schedule.next_tick + 15 * 60


def test_no_event_reaches_an_archived_definition_version(rt: LocalRuntime) -> None:
    archive = definition_record_id("counter", "v1")
    with pytest.raises(ReservedId):
        rt.send(archive, Event(id="x", name="durastate.terminate"))
    rt.transport.send([(archive, Event(id="x", name="durastate.start", data={"definition_id": "counter"}))])
    rt.run_until_idle()
    assert last_letter(rt)[1] == "ReservedId" and rt.get(archive) is None


# -- 2. an early timeout ------------------------------------------------------------------------------


def test_a_forged_timeout_with_the_true_id_does_not_fire_the_timer_early(rt: LocalRuntime,
                                                                        clock: ManualClock) -> None:
    rt.start("counter", execution_id="c1")
    rt.send("c1", Event(id="w", name="wait"))
    rt.run_until_idle()
    exe = rt.get("c1")
    assert exe is not None
    fire_at = exe.timers["waiting"]
    true_id = timeout_event_id("c1", "waiting", fire_at)
    forged = {"id": true_id, "name": "durastate.timeout", "data": {"path": "waiting", "fire_at": fire_at}}
    with pytest.raises(ReservedId):
        rt.send("c1", Event(**forged))
    on_the_queue(rt, "c1", forged)
    assert last_letter(rt)[:2] == (true_id, "TimerNotDue") and "not due" in last_letter(rt)[2]
    exe = rt.get("c1")
    assert exe is not None and exe.active_path == "waiting" and exe.timers["waiting"] == fire_at
    assert not rt.store.is_processed("c1", true_id)
    clock.advance(fire_at - clock() + 0.5)
    rt.run_until_idle()
    exe = rt.get("c1")
    assert exe is not None and exe.active_path == "idle", "the true timeout did not fire"


# -- 3. a redrive -------------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before the redrive", "after the redrive"])
def test_a_redrive_cannot_be_pre_empted(rt: LocalRuntime, provider: Provider, when: str) -> None:
    rt.start("order", execution_id="o1")
    rt.send("o1", Event(id="sub", name="submit"))
    rt.run_until_idle()
    exe = rt.get("o1")
    assert exe is not None and exe.status == "failed"
    redrive_id = redrive_event_id("sub", 1)
    with pytest.raises(ReservedId):
        rt.send("o1", Event(id=redrive_id, name="ship"))
    forged = {"id": redrive_id, "name": "ship", "data": {}}
    if when == "before the redrive":
        on_the_queue(rt, "o1", forged)
    provider.up = True
    redriven = rt.redrive("o1")
    assert redriven.event.id == redrive_id
    if when == "after the redrive":  # ahead of the relay: the stored event applies, not the message's
        env = parse_envelope({"target_id": "o1", "event": forged})
        rt.worker.handle(env.target_id, env.event)
    rt.run_until_idle()
    exe = rt.get("o1")
    assert exe is not None and (exe.status, exe.active_path, exe.retry) == ("running", "paying", None)
    rt.send("o1", Event(id="ship", name="ship"))
    rt.run_until_idle()
    exe = rt.get("o1")
    assert exe is not None and (exe.status, exe.outcome) == ("finished", "shipped")


# -- 4. a schedule's run ------------------------------------------------------------------------------


def test_a_schedules_next_run_cannot_be_started_first(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.sync_schedules({"hb": ScheduleSpec(definition="counter", rate="15m", context={"count": 5})})
    tick = get_schedule(rt.store, "hb").next_tick
    assert tick is not None
    run_id = tick_execution_id("hb", tick)
    with pytest.raises(InvalidValue, match="reserves"):
        rt.start("invoker", execution_id=run_id)
    with pytest.raises(InvalidValue, match="reserves"):
        DurastateClient(rt.transport).start("invoker", execution_id=run_id)
    for data in ({"definition_id": "invoker"}, {"definition_id": "invoker", "witness": "0123456789abcdef"}):
        on_the_queue(rt, run_id, {"id": f"{run_id}:start", "name": "durastate.start", "data": data})
        assert rt.get(run_id) is None and last_letter(rt)[1] in ("InvalidValue", "ReservedId")
    clock.set(tick + 1)
    rt.run_until_idle()
    run = rt.get(run_id)
    assert run is not None and run.definition_id == "counter" and run.context["count"] == 5


# -- 5. a derived id sent first -----------------------------------------------------------------------


def test_a_finished_notice_sent_first_with_the_true_id_does_not_suppress_the_true_one(rt: LocalRuntime) -> None:
    rt.start("invoker", execution_id="i1")
    rt.run_until_idle()
    child = child_execution_id("i1", 1)
    forged = {"id": finished_event_id(child), "name": "durastate.finished",
              "data": {"child_id": child, "status": "finished", "outcome": "ok", "output": {"count": 0}}}
    on_the_queue(rt, "i1", forged)  # the child has not ended: not applied, and not recorded
    assert not rt.store.is_processed("i1", forged["id"])
    rt.send(child, Event(id="stop", name="stop"))
    rt.run_until_idle()
    parent = rt.get("i1")
    assert parent is not None and (parent.status, parent.outcome) == ("finished", "ok")


def test_a_timeout_sent_before_its_timer_is_armed_does_not_suppress_it(rt: LocalRuntime,
                                                                       clock: ManualClock) -> None:
    rt.start("counter", execution_id="c1")
    rt.run_until_idle()
    fire_at = clock() + 30  # what `wait` will arm now: a producer can compute it
    on_the_queue(rt, "c1", {"id": timeout_event_id("c1", "waiting", fire_at), "name": "durastate.timeout",
                            "data": {"path": "waiting", "fire_at": fire_at}})
    rt.send("c1", Event(id="w", name="wait"))
    rt.run_until_idle()
    clock.advance(31)
    rt.run_until_idle()
    exe = rt.get("c1")
    assert exe is not None and exe.active_path == "idle", "the true timeout was taken for a duplicate"


@pytest.mark.parametrize("event_id", ["~timeout:x", "~finished:x", "~redrive:sub:1", "~cancel:c1", "~anything"])
def test_a_producer_may_not_send_an_id_in_the_runtimes_namespace(rt: LocalRuntime, event_id: str) -> None:
    with pytest.raises(ReservedId, match="namespace"):
        rt.send("c1", Event.model_construct(id=event_id, name="inc", data={}))  # past the model's own check
    with pytest.raises(MalformedEvent, match="namespace"):
        DurastateClient(rt.transport).send("c1", "inc", event_id=event_id)
    with pytest.raises(ReservedId, match="only durastate itself sends"):
        DurastateClient(rt.transport).send_many([("c1", Event(id="t", name="durastate.timeout"))])
    assert rt.transport.pending() == 0  # type: ignore[attr-defined]


# -- 9. ids with NUL ----------------------------------------------------------------------------------


def test_a_lookup_by_an_id_with_nul_finds_nothing(every_store: ExecutionStore) -> None:
    """PostgreSQL's TEXT cannot hold NUL; a lookup by such an id answers as on every other store."""
    store = every_store
    bad = "a\x00b"
    assert store.load(bad) is None
    assert store.is_processed(bad, bad) is False
    assert store.read_trace(bad) == []
    assert store.list_executions(parent_id=bad).items == []
    assert store.load_for_event(bad, bad) == (None, False)
