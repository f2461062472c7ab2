"""Schedules at run time: each tick starts one execution across restarts and crashes; catch-up, overlap,
pause/resume/trigger, sync; the sweeper path on every store."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import SCHEDULE_RECORD, START, run_witness, start_event_id
from durastate.engine.model import Execution
from durastate.engine.schedules import ScheduleSpec
from durastate.errors import BackfillRefused, DurastateError, UnknownSchedule
from durastate.runtime import LocalRuntime, ManualClock, Sweeper
from durastate.runtime.schedules import (
    backfill_schedule,
    delete_schedule,
    fire_schedule_timer,
    get_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    sync_schedules,
    trigger_schedule,
)
from durastate.store import DictStore, SqliteStore
from durastate.store.base import ExecutionStore
from durastate.transport import InMemoryTransport
from durastate.transport.sqlite import SqliteTransport

from .conftest import COUNTER, ev

REPORT = {"id": "report", "initial": "done", "context": {"kind": None},
          "states": {"done": {"type": "final", "outcome": "ok"}}}
START_AT = "2026-01-01T00:00"


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo("UTC")).timestamp()


@pytest.fixture
def reg() -> DefinitionRegistry:
    return DefinitionRegistry([load_definition(REPORT), load_definition(COUNTER)])


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(at(START_AT))


class Embedded:
    """A LocalRuntime on a SQLite file with its durable inbox; ``restart`` closes it and opens a new one."""

    def __init__(self, path: Path, reg: DefinitionRegistry, clock: ManualClock) -> None:
        self.path, self.reg, self.clock = path, reg, clock
        self.rt = self._open()

    def _open(self) -> LocalRuntime:
        store = SqliteStore(self.path)
        return LocalRuntime(store, self.reg, SqliteTransport(store, clock=self.clock), self.clock)

    def close(self) -> None:
        self.rt.transport.close()  # type: ignore[attr-defined]
        self.rt.store.close()

    def restart(self) -> LocalRuntime:
        self.close()
        self.rt = self._open()
        return self.rt

    def executions(self, definition_id: str = "report") -> dict[str, str]:
        page = self.rt.store.list_executions(definition_id=definition_id, limit=1000)
        return {s.id: s.status for s in page.items}


@pytest.fixture
def embedded(tmp_path: Path, reg: DefinitionRegistry, clock: ManualClock) -> Iterator[Embedded]:
    e = Embedded(tmp_path / "schedules.db", reg, clock)
    yield e
    e.close()


def pulse(**options: object) -> dict[str, ScheduleSpec]:
    return {"pulse": ScheduleSpec.model_validate({"definition": "report", "rate": "15m",
                                                  "context": {"kind": "pulse"}, **options})}


def test_each_tick_starts_exactly_once_across_a_restart(embedded: Embedded, clock: ManualClock) -> None:
    rt = embedded.rt
    assert rt.sync_schedules(pulse()).created == ["pulse"]
    rt.run_until_idle()
    assert embedded.executions() == {}  # nothing before the first tick
    for _ in range(2):
        clock.advance(15 * 60)
        rt.run_until_idle()
        rt.run_until_idle()  # sweeping again at the same time starts nothing more
    rt = embedded.restart()
    assert rt.sync_schedules(pulse()).unchanged == ["pulse"]  # an unchanged spec is not rewritten
    for _ in range(2):
        clock.advance(15 * 60)
        rt.run_until_idle()
    assert embedded.executions() == {
        "pulse~20260101T001500Z": "finished", "pulse~20260101T003000Z": "finished",
        "pulse~20260101T004500Z": "finished", "pulse~20260101T010000Z": "finished",
    }
    exe = rt.get("pulse~20260101T003000Z")
    assert exe is not None and exe.context == {"kind": "pulse"}
    state = get_schedule(rt.store, "pulse")
    assert state.last_tick == at("2026-01-01T01:00") and state.next_tick == at("2026-01-01T01:15")
    assert state.last_execution_id == "pulse~20260101T010000Z"


def test_a_tick_committed_just_before_a_stop_is_started_after_the_restart(
        embedded: Embedded, clock: ManualClock) -> None:
    embedded.rt.sync_schedules(pulse())
    clock.advance(15 * 60)
    assert embedded.rt.sweeper.run_once() == 1  # the tick's start is in the outbox; then the process stops
    rt = embedded.restart()
    rt.sync_schedules(pulse())
    rt.run_until_idle()
    rt.run_until_idle()
    assert embedded.executions() == {"pulse~20260101T001500Z": "finished"}


class CrashingStore(DictStore):
    """Fails ``delete_timer`` once: the sweeper committed the tick but died before removing the due timer."""

    crash = 0

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        if self.crash:
            self.crash -= 1
            raise RuntimeError("simulated crash after the commit")
        super().delete_timer(execution_id, path, fire_at)


def test_a_sweep_that_crashed_after_committing_a_tick_starts_nothing_twice(
        reg: DefinitionRegistry, clock: ManualClock) -> None:
    store = CrashingStore()
    rt = LocalRuntime(store, reg, clock=clock)
    rt.sync_schedules(pulse())
    clock.advance(15 * 60)
    store.crash = 1
    with pytest.raises(RuntimeError, match="simulated crash"):
        rt.sweeper.run_once()
    rt.sweeper.run_once()  # a second sweeper, or the same one again: the record moved on already
    rt.run_until_idle()
    assert [s.id for s in store.list_executions(definition_id="report").items] == ["pulse~20260101T001500Z"]
    assert store.due_timers(clock() + 15 * 60) == [("~schedule~pulse", "tick", at("2026-01-01T00:30"))]


def test_a_tick_relayed_twice_is_deduplicated(reg: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    rt = LocalRuntime(store, reg, clock=clock)
    rt.sync_schedules(pulse())
    clock.advance(15 * 60)
    rt.sweeper.run_once()
    (entry,) = store.pending_outbox()
    assert entry.target_id == "pulse~20260101T001500Z" and entry.event.name == START
    assert entry.event.id == start_event_id("pulse~20260101T001500Z")
    rt.send(entry.target_id, entry.event)  # the same start, delivered twice
    stats = rt.run_until_idle()
    assert (stats.applied, stats.duplicates) == (1, 1)


@pytest.mark.parametrize(("policy", "after_downtime"), [
    ("skip", {}),
    ("once", {"nightly~20260104T020000Z": "finished"}),
])
def test_ticks_missed_while_stopped_follow_the_catch_up_policy(
        embedded: Embedded, clock: ManualClock, policy: str, after_downtime: dict[str, str]) -> None:
    specs = {"nightly": ScheduleSpec(definition="report", cron="0 2 * * *", catch_up=policy)}  # type: ignore[arg-type]
    embedded.rt.sync_schedules(specs)
    embedded.rt.run_until_idle()
    embedded.close()
    clock.set(at("2026-01-04T14:00"))  # down over three nightly ticks
    embedded.rt = embedded._open()
    embedded.rt.sync_schedules(specs)
    embedded.rt.run_until_idle()
    assert embedded.executions() == after_downtime
    clock.set(at("2026-01-05T02:00:30"))  # the next tick, on time, runs under either policy
    embedded.rt.run_until_idle()
    assert embedded.executions() == {**after_downtime, "nightly~20260105T020000Z": "finished"}


def test_overlap_skip_waits_for_the_previous_execution(reg: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    rt = LocalRuntime(store, reg, clock=clock)
    rt.sync_schedules({"count": ScheduleSpec(definition="counter", rate="1h", overlap="skip"),
                       "count-all": ScheduleSpec(definition="counter", rate="1h")})
    for _ in range(2):
        clock.advance(3600)
        rt.run_until_idle()
    running = {s.id for s in store.list_executions(definition_id="counter").items}
    assert running == {"count~20260101T010000Z", "count-all~20260101T010000Z", "count-all~20260101T020000Z"}
    rt.send("count~20260101T010000Z", ev("stop", "stop-1"))
    clock.advance(3600)
    rt.run_until_idle()
    assert rt.get("count~20260101T030000Z") is not None


def test_pause_resume_and_trigger(reg: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    rt = LocalRuntime(store, reg, clock=clock)
    rt.sync_schedules({"skipper": ScheduleSpec(definition="report", rate="1h"),
                       "catcher": ScheduleSpec(definition="report", rate="1h", catch_up="once")})
    for name in ("skipper", "catcher"):
        state = pause_schedule(store, name, clock())
        assert state.paused and state.next_tick is None
    assert store.due_timers(clock() + 86400) == []
    clock.advance(3 * 3600 + 60)
    manual = trigger_schedule(store, "skipper", clock())  # works while paused
    assert manual == "skipper~manual-20260101T030100Z"
    rt.run_until_idle()
    assert {s.id for s in store.list_executions(definition_id="report").items} == {manual}
    assert resume_schedule(store, "skipper", clock()).next_tick == at("2026-01-01T04:00")  # missed: dropped
    resume_schedule(store, "catcher", clock())  # missed: one execution for them
    rt.run_until_idle()
    clock.advance(3600)
    rt.run_until_idle()
    assert {s.id for s in store.list_executions(definition_id="report").items} == {
        manual, "catcher~20260101T030000Z", "catcher~20260101T040000Z", "skipper~20260101T040000Z"}
    assert get_schedule(store, "skipper").last_execution_id == "skipper~20260101T040000Z"
    with pytest.raises(UnknownSchedule, match=r"unknown schedule 'nope' \(known: catcher, skipper\)"):
        pause_schedule(store, "nope", clock())


def test_sync_updates_changed_specs_keeps_pause_and_marks_removed_ones(
        reg: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    now = clock()
    sync_schedules(store, {**pulse(), "other": ScheduleSpec(definition="report", rate="1h")}, now)
    pause_schedule(store, "pulse", now)
    report = sync_schedules(store, pulse(context={"kind": "new"}), now)
    assert (report.updated, report.removed) == (["pulse"], ["other"])
    state = get_schedule(store, "pulse")
    assert state.paused and state.spec is not None and state.spec.context == {"kind": "new"}
    assert [s.name for s in list_schedules(store)] == ["pulse"]
    assert [s.name for s in list_schedules(store, include_removed=True)] == ["other", "pulse"]
    with pytest.raises(UnknownSchedule):
        get_schedule(store, "other")
    assert store.due_timers(now + 86400) == []  # paused and removed: no timer armed
    revived = sync_schedules(store, {"other": ScheduleSpec(definition="report", rate="1h")}, now)
    assert revived.updated == ["other"] and get_schedule(store, "other").next_tick == at("2026-01-01T01:00")
    assert store.list_executions().items == []  # the records are no executions in a listing


def test_the_sweeper_fires_schedules_on_every_store(every_store: ExecutionStore, clock: ManualClock) -> None:
    store = every_store
    sync_schedules(store, pulse(), clock())
    transport = InMemoryTransport()
    sweeper = Sweeper(store, transport, clock)
    assert sweeper.run_once() == 0
    clock.advance(15 * 60 + 5)
    assert sweeper.run_once() == 1
    assert sweeper.run_once() == 0  # the tick moved on in the same commit that started it
    (entry,) = store.pending_outbox()
    assert entry.target_id == "pulse~20260101T001500Z"
    witness = entry.event.data.pop("witness")  # the record's MAC of the run id: no producer can start it
    assert entry.event.data == {"definition_id": "report", "context": {"kind": "pulse"}}
    assert transport.messages() == []  # a schedule's tick is no timeout: its start goes through the outbox
    assert store.due_timers(clock() + 15 * 60) == [("~schedule~pulse", "tick", at("2026-01-01T00:30"))]
    record = store.load("~schedule~pulse")
    assert record is not None and record.definition_id == SCHEDULE_RECORD
    assert record.context["last_tick"] == at("2026-01-01T00:15")
    assert record.secret is not None and witness == run_witness(record.secret, entry.target_id)
    assert [s.name for s in list_schedules(store)] == ["pulse"]


class FailingRecordCommits(DictStore):
    """Every commit of a schedule record fails (a store that refuses them, e.g. a missing permission)."""

    def commit(self, exe: Execution, *args: Any, **kwargs: Any) -> None:
        if exe.id.startswith("~schedule~") and exe.version > 0:
            raise RuntimeError("refused")
        super().commit(exe, *args, **kwargs)


def test_a_failing_schedule_neither_blocks_timeouts_nor_spins_the_runtime(
        reg: DefinitionRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    store = FailingRecordCommits()
    rt = LocalRuntime(store, reg, clock=clock)
    rt.sync_schedules(pulse())
    rt.start("counter", execution_id="c1")
    rt.send("c1", ev("wait", "w1"))
    rt.run_until_idle()
    clock.advance(15 * 60)
    stats = rt.run_until_idle()
    assert stats.idle and stats.rounds < 10
    exe = rt.get("c1")
    assert exe is not None and exe.active_path == "idle"  # its 30 s timeout fired
    assert "schedule timer of ~schedule~pulse failed" in caplog.text
    assert store.due_timers(clock()) == [("~schedule~pulse", "tick", at("2026-01-01T00:15"))]  # still armed


# -- window, jitter, delete, backfill on every store --------------------------------------------------------
def sweep(store: ExecutionStore, clock: ManualClock, seconds: float) -> list[str]:
    """Move time, sweep; return the executions whose starts are in the outbox (then mark them delivered)."""
    clock.advance(seconds)
    Sweeper(store, InMemoryTransport(), clock).run_once()
    entries = store.pending_outbox()
    for entry in entries:
        store.ack_outbox(entry.seq)
    return [e.target_id for e in entries]


def test_a_window_bounds_the_ticks_on_every_store(every_store: ExecutionStore, clock: ManualClock) -> None:
    store = every_store
    sync_schedules(store, pulse(rate="1h", start_at="2026-01-01T02:00", end_at="2026-01-01T03:00"), clock())
    assert get_schedule(store, "pulse").next_tick == at("2026-01-01T02:00")  # nothing before start_at
    started = [eid for _ in range(5) for eid in sweep(store, clock, 3600)]
    assert started == ["pulse~20260101T020000Z", "pulse~20260101T030000Z"]
    state = get_schedule(store, "pulse")
    assert state.next_tick is None and store.due_timers(clock() + 86400 * 365) == []  # after end_at: no timer


def test_jitter_delays_each_tick_by_its_derived_offset_on_every_store(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    store = every_store
    sync_schedules(store, pulse(rate="1h", jitter="30m"), clock())
    record = store.load("~schedule~pulse")
    assert record is not None and record.secret is not None  # the offsets need it: given on creation
    spec = ScheduleSpec(definition="report", rate="1h", jitter="30m")
    fire = spec.fire_at(at("2026-01-01T01:00"), record.secret, "pulse")
    assert at("2026-01-01T01:00") <= fire <= at("2026-01-01T01:30")
    assert get_schedule(store, "pulse").next_tick == fire
    if fire > at("2026-01-01T01:00"):
        assert sweep(store, clock, fire - clock() - 1) == []  # the tick passed, its offset not yet
    assert sweep(store, clock, fire - clock()) == ["pulse~20260101T010000Z"]  # named by its tick, not its firing
    nxt = get_schedule(store, "pulse").next_tick
    assert nxt == spec.fire_at(at("2026-01-01T02:00"), record.secret, "pulse")  # the same offset every time


def test_delete_cancels_the_timer_and_refuses_unknown_names_on_every_store(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    store = every_store
    sync_schedules(store, pulse(), clock())
    state = delete_schedule(store, "pulse", clock())
    assert state.removed and state.deleted and state.next_tick is None
    assert store.due_timers(clock() + 86400) == []
    assert sweep(store, clock, 3600) == []
    assert fire_schedule_timer(store, "~schedule~pulse", clock()).started is None  # a hop already on its way
    assert list_schedules(store) == [] and [s.name for s in list_schedules(store, include_removed=True)] == ["pulse"]
    before = store.load("~schedule~pulse")
    for name in ("pulse", "nope"):  # deleted already, never stored: refused, nothing changed
        with pytest.raises(UnknownSchedule, match=f"unknown schedule '{name}'"):
            delete_schedule(store, name, clock())
    assert store.load("~schedule~pulse") == before
    assert sync_schedules(store, pulse(), clock()).updated == ["pulse"]  # still in the file: stored again
    assert not get_schedule(store, "pulse").deleted


def test_backfill_starts_each_missed_tick_once_on_every_store(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    store = every_store
    sync_schedules(store, pulse(rate="1h"), clock())
    assert sweep(store, clock, 3600) == ["pulse~20260101T010000Z"]
    pause_schedule(store, "pulse", clock())
    clock.advance(4 * 3600)  # 02:00 to 05:00 missed
    store.commit(Execution(id="pulse~20260101T010000Z", definition_id="report", status="finished",
                           created_at=clock(), updated_at=clock()), [])  # the tick that ran is stored
    done = backfill_schedule(store, "pulse", at("2026-01-01T01:00"), at("2026-01-01T04:00"), clock())
    assert done.existing == ["pulse~20260101T010000Z"]
    assert done.started == ["pulse~20260101T020000Z", "pulse~20260101T030000Z", "pulse~20260101T040000Z"]
    entries = store.pending_outbox()
    record = store.load("~schedule~pulse")
    assert record is not None and record.secret is not None
    assert [e.target_id for e in entries] == done.started
    for e in entries:
        assert e.event.id == start_event_id(e.target_id)  # the tick's own start: the worker dedupes it
        assert e.event.data["witness"] == run_witness(record.secret, e.target_id)
    again = backfill_schedule(store, "pulse", at("2026-01-01T01:00"), at("2026-01-01T04:00"), clock())
    assert again.started == done.started  # not yet applied: sent again, and applied once (same event id)
    assert get_schedule(store, "pulse").paused and get_schedule(store, "pulse").next_tick is None


@pytest.mark.parametrize(("window", "problem"), [
    (("2026-01-01T04:00", "2026-01-01T01:00"), "--from 2026-01-01T04:00:00Z is after --to 2026-01-01T01:00:00Z"),
    (("2026-01-01T01:00", "2026-01-02T00:00"), "--to 2026-01-02T00:00:00Z is in the future"),
    (("2025-01-01T00:00", "2026-01-01T05:00"), "holds more than 1000 ticks"),
])
def test_a_bad_backfill_is_refused_and_changes_nothing(
        every_store: ExecutionStore, clock: ManualClock, window: tuple[str, str], problem: str) -> None:
    store = every_store
    sync_schedules(store, pulse(rate="1h"), clock())
    clock.set(at("2026-01-01T06:00"))
    before = store.load("~schedule~pulse")
    with pytest.raises(BackfillRefused, match=re.escape(problem)):
        backfill_schedule(store, "pulse", at(window[0]), at(window[1]), clock())
    with pytest.raises(UnknownSchedule):
        backfill_schedule(store, "nope", at("2026-01-01T01:00"), at("2026-01-01T02:00"), clock())
    assert store.load("~schedule~pulse") == before and store.pending_outbox() == []


def test_backfilled_runs_start_and_finish(reg: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    rt = LocalRuntime(store, reg, clock=clock)
    rt.sync_schedules(pulse(rate="1h"))
    pause_schedule(store, "pulse", clock())
    clock.advance(3 * 3600)
    backfill_schedule(store, "pulse", at("2026-01-01T00:00"), clock(), clock())
    rt.run_until_idle()
    backfill_schedule(store, "pulse", at("2026-01-01T00:00"), clock(), clock())  # twice: nothing more
    rt.run_until_idle()
    assert {s.id: s.status for s in store.list_executions(definition_id="report").items} == {
        "pulse~20260101T000000Z": "finished", "pulse~20260101T010000Z": "finished",
        "pulse~20260101T020000Z": "finished", "pulse~20260101T030000Z": "finished"}


def test_the_client_pauses_triggers_backfills_and_deletes_schedules_on_every_store(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    from durastate.client import DurastateClient

    store = every_store
    client = DurastateClient(InMemoryTransport(), store, clock=clock)
    sync_schedules(store, pulse(rate="1h"), clock())
    assert [s.name for s in client.schedules()] == ["pulse"]
    assert client.pause_schedule("pulse").paused
    clock.advance(3 * 3600)  # 01:00 to 03:00 missed while paused
    done = client.backfill_schedule("pulse", datetime(2026, 1, 1, 1, tzinfo=ZoneInfo("UTC")), at("2026-01-01T02:00"))
    assert done.started == ["pulse~20260101T010000Z", "pulse~20260101T020000Z"] and done.existing == []
    manual = client.trigger_schedule("pulse")
    assert [e.target_id for e in store.pending_outbox()] == [*done.started, manual]  # the worker applies them
    assert client.schedule("pulse").last_execution_id == manual
    assert client.resume_schedule("pulse").next_tick is not None
    state = client.delete_schedule("pulse")
    assert state.deleted and state.next_tick is None and store.due_timers(clock() + 86400) == []
    with pytest.raises(UnknownSchedule, match="unknown schedule 'pulse'"):
        client.delete_schedule("pulse")
    with pytest.raises(DurastateError, match="has no time zone"):
        client.backfill_schedule("pulse", datetime(2026, 1, 1, 1), at("2026-01-01T02:00"))


def test_a_client_without_a_store_says_it_needs_one_for_schedules() -> None:
    from durastate.client import DurastateClient

    with pytest.raises(DurastateError, match=r"has no store: build it with a store .* to delete a schedule"):
        DurastateClient(InMemoryTransport()).delete_schedule("pulse")
