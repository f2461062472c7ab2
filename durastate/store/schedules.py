"""Schedule records in a store: read them, and change them with compare-and-swap commits.

Each schedule lives in the executions table as the system record ``~schedule~<name>`` (definition id
``~schedule``, status ``running``) whose context holds the spec, ``paused``, ``removed``, ``last_tick`` and
``last_execution_id``, and it has ONE armed timer, ``tick``, at its next tick, in the ordinary timers
table. So every backend's existing sweeper finds it — no new table, queue or AWS resource.

These operations need nothing but a store, so they live at the store seam, where the CLI, the runtime,
the producer-side :class:`~durastate.client.DurastateClient` and the console all call the same code; the
runtime adds what a deployment does with the records (:mod:`durastate.runtime.schedules`: syncing a
definitions folder's schedules, firing a record's timer from a sweep).

:func:`backfill_schedule` starts past ticks that have no execution with the very start the tick would have
committed (same id, same start event id, same witness), so a backfill never starts a tick twice;
:func:`delete_schedule` marks the record removed and cancels its timer in one commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from durastate.engine.ids import SCHEDULE_RECORD, START, run_witness, start_event_id
from durastate.engine.model import Emit, Event, Execution, TimerOp
from durastate.engine.schedules import (
    ScheduleSpec,
    manual_execution_id,
    schedule_name,
    schedule_record_id,
    tick_execution_id,
)
from durastate.errors import BackfillRefused, DurastateError, StoreConflict, UnknownSchedule
from durastate.store.base import ExecutionStore
from durastate.store.keys import give_secret

__all__ = [
    "CAS_ATTEMPTS",
    "MAX_BACKFILL",
    "TICK_TIMER",
    "Backfill",
    "Change",
    "ScheduleState",
    "arm_tick",
    "backfill_schedule",
    "delete_schedule",
    "get_schedule",
    "list_schedules",
    "next_fire",
    "pause_schedule",
    "resume_schedule",
    "stored_spec",
    "tick_fires",
    "tick_start",
    "trigger_schedule",
    "update_record",
]

TICK_TIMER = "tick"
"""The key of a schedule record's one timer."""
CAS_ATTEMPTS = 8
MAX_BACKFILL = 1000
"""The most ticks one backfill starts (a wider window is refused: split it)."""
BACKFILL_BATCH = 25
"""Starts per commit of the record in a backfill (each is an outbox entry: DynamoDB caps a commit at 100
items)."""


@dataclass(frozen=True)
class ScheduleState:
    """A stored schedule as a user sees it (``durastate schedules list``)."""

    name: str
    spec: ScheduleSpec | None
    """None if the stored spec no longer validates (written by another version of durastate)."""
    paused: bool
    removed: bool
    deleted: bool
    """Removed by ``durastate schedules delete`` (not by a sync): a sync that lists it stores it again."""
    last_tick: float | None
    last_execution_id: str | None
    last_started_at: float | None
    next_tick: float | None
    """When the armed timer fires (None: paused, removed, or no further tick)."""
    record: Execution = field(repr=False)

    @classmethod
    def of(cls, exe: Execution) -> ScheduleState:
        ctx = exe.context
        try:
            spec: ScheduleSpec | None = ScheduleSpec.model_validate(ctx.get("spec") or {})
        except (ValueError, DurastateError):
            spec = None
        return cls(schedule_name(exe.id) or exe.id, spec, bool(ctx.get("paused")), bool(ctx.get("removed")),
                   bool(ctx.get("deleted")), ctx.get("last_tick"), ctx.get("last_execution_id"),
                   ctx.get("last_started_at"),
                   exe.timers.get(TICK_TIMER), exe)




# -- reading --------------------------------------------------------------------------------------------
def list_schedules(store: ExecutionStore, include_removed: bool = False) -> list[ScheduleState]:
    """Every stored schedule, by name (removed ones only if asked)."""
    out: list[ScheduleState] = []
    cursor: str | None = None
    while True:
        # Records are always "running": on DynamoDB that reads one status partition, not every execution.
        page = store.list_executions(definition_id=SCHEDULE_RECORD, status="running", limit=500, cursor=cursor)
        for summary in page.items:
            exe = store.load(summary.id)
            if exe is not None:
                state = ScheduleState.of(exe)
                if include_removed or not state.removed:
                    out.append(state)
        if page.next_cursor is None:
            return sorted(out, key=lambda s: s.name)
        cursor = page.next_cursor


def get_schedule(store: ExecutionStore, name: str) -> ScheduleState:
    """The stored schedule ``name``; :class:`~durastate.errors.UnknownSchedule` if there is none (or it was
    removed from the definitions)."""
    exe = store.load(schedule_record_id(name))
    if exe is None or exe.context.get("removed"):
        raise UnknownSchedule(name, [s.name for s in list_schedules(store)])
    return ScheduleState.of(exe)


# -- writing --------------------------------------------------------------------------------------------
Change = Callable[[Execution], tuple[list[Emit], list[TimerOp]] | None]


def update_record(store: ExecutionStore, name: str, change: Change, now: float) -> Execution:
    """Load the record, apply ``change`` to a copy, commit with a CAS; again from a fresh load when another
    writer won. ``change`` returns the emits and timer ops to commit, or None for "nothing to do"."""
    record_id = schedule_record_id(name)
    for _ in range(CAS_ATTEMPTS):
        stored = store.load(record_id)
        if stored is None:
            raise UnknownSchedule(name, [s.name for s in list_schedules(store)])
        exe = stored.model_copy(deep=True)  # never change the object a store may hand out live
        result = change(exe)
        if result is None:
            return stored
        emits, timers = result
        exe.updated_at = now
        try:
            store.commit(exe, emits, None, timers)
        except StoreConflict:
            continue
        return exe
    raise StoreConflict(record_id, None, None)


def arm_tick(exe: Execution, at: float | None) -> list[TimerOp]:
    if at is None:
        exe.timers.pop(TICK_TIMER, None)
        return [TimerOp("cancel", TICK_TIMER)]
    exe.timers[TICK_TIMER] = at
    return [TimerOp("schedule", TICK_TIMER, at)]


def tick_fires(record: Execution, spec: ScheduleSpec) -> Callable[[float], float]:
    """When each tick of the record's schedule fires: the tick plus its jitter, derived from the record's
    secret (given to it here if it has none yet: it is committed with the timer it arms)."""
    if spec.jitter_seconds:
        give_secret(record)
    name = schedule_name(record.id) or record.id
    return lambda tick: spec.fire_at(tick, record.secret, name)


def next_fire(record: Execution, spec: ScheduleSpec, after: float) -> float | None:
    """When the first tick after ``after`` fires (None: the schedule has no further tick)."""
    tick = spec.next_tick(after)
    return None if tick is None else tick_fires(record, spec)(tick)


def tick_start(record: Execution, execution_id: str, spec: ScheduleSpec) -> Emit:
    """The start of run ``execution_id``, with the witness the worker asks of it (a MAC of the id under
    the record's secret, given to the record here if it has none yet: it is committed with this start)."""
    give_secret(record)
    assert record.secret is not None
    return (execution_id, Event(id=start_event_id(execution_id), name=START,
                                data={"definition_id": spec.definition, "context": dict(spec.context),
                                      "witness": run_witness(record.secret, execution_id)}))


def stored_spec(exe: Execution) -> ScheduleSpec:
    spec = ScheduleState.of(exe).spec
    if spec is None:
        raise UnknownSchedule(schedule_name(exe.id) or exe.id)
    return spec


def pause_schedule(store: ExecutionStore, name: str, now: float) -> ScheduleState:
    """Stop starting executions (the timer is cancelled); the ticks until :func:`resume_schedule` are missed."""

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        stored_spec(exe)
        if exe.context.get("removed"):
            raise UnknownSchedule(name)
        if exe.context.get("paused"):
            return None
        exe.context["paused"] = True
        return [], arm_tick(exe, None)

    return ScheduleState.of(update_record(store, name, change, now))


def resume_schedule(store: ExecutionStore, name: str, now: float) -> ScheduleState:
    """Start executions again. ``catch_up: skip`` drops the ticks missed while paused (the timer is armed for
    the next tick after ``now``); ``once`` runs one execution for them at the next sweep."""

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        spec = stored_spec(exe)
        ctx = exe.context
        if ctx.get("removed"):
            raise UnknownSchedule(name)
        if not ctx.get("paused"):
            return None
        ctx["paused"] = False
        last_tick = float(ctx.get("last_tick") or now)
        if spec.catch_up == "skip":
            ctx["last_tick"] = max(last_tick, now)
            return [], arm_tick(exe, next_fire(exe, spec, ctx["last_tick"]))
        return [], arm_tick(exe, next_fire(exe, spec, last_tick))  # in the past if ticks were missed: due at once

    return ScheduleState.of(update_record(store, name, change, now))


def trigger_schedule(store: ExecutionStore, name: str, now: float) -> str:
    """Start one execution of the schedule now, besides its ticks: ``<name>-manual-<now in UTC>``. It counts
    as the schedule's last execution (for ``overlap: skip``) and changes no tick. Works while paused."""
    execution_id = manual_execution_id(name, now)

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        spec = stored_spec(exe)
        if exe.context.get("removed"):
            raise UnknownSchedule(name)
        if exe.context.get("last_execution_id") == execution_id:
            return None  # triggered twice in the same second: one execution
        exe.context.update(last_execution_id=execution_id, last_started_at=now)
        return [tick_start(exe, execution_id, spec)], []

    update_record(store, name, change, now)
    return execution_id


def delete_schedule(store: ExecutionStore, name: str, now: float) -> ScheduleState:
    """Stop schedule ``name`` for good: its record is marked removed (and deleted) and its timer cancelled
    in one commit, so no tick fires again — a sweep finds no timer, and a timer hop already on its way
    (AWS) finds the record removed and starts nothing. The record stays, so its history stays readable
    (``schedules list --all``); the executions it started are untouched. A sync whose schedules still
    list it stores it again: delete it from the ``schedules:`` file too. Unknown (or already removed):
    :class:`~durastate.errors.UnknownSchedule`, nothing changed."""

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        if exe.context.get("removed"):
            raise UnknownSchedule(name, [s.name for s in list_schedules(store)])
        exe.context.update(removed=True, deleted=True, deleted_at=now)
        return [], arm_tick(exe, None)

    get_schedule(store, name)
    return ScheduleState.of(update_record(store, name, change, now))


@dataclass(frozen=True)
class Backfill:
    """What :func:`backfill_schedule` did."""

    started: list[str]
    """The executions it started, one per tick that had none."""
    existing: list[str]
    """The ticks' executions already stored (run by the schedule, or by an earlier backfill): not started."""


def backfill_schedule(store: ExecutionStore, name: str, start: float, end: float, now: float) -> Backfill:
    """Start the ticks of schedule ``name`` in ``[start, end]`` that have no execution yet, each as the
    very execution the tick would have started (``<name>~<tick>``, with its witness and its deduplicated
    start event). So a tick is never started twice: one that ran (or that an earlier backfill started)
    is stored and skipped, and a start still on its way when a second backfill sends it again is applied
    once by the worker. The window, ``overlap`` and ``catch_up`` do not apply to a backfill (it is asked
    for), ``start_at``/``end_at`` do (no tick exists outside them); it works while paused and changes
    neither ``last_tick`` nor the timer.

    :class:`~durastate.errors.BackfillRefused` when ``start`` is after ``end``, ``end`` is in the future
    (those ticks start on their own) or the window holds more than :data:`MAX_BACKFILL` ticks;
    :class:`~durastate.errors.UnknownSchedule` for an unknown name. Nothing is started then.
    """
    if start > end:
        raise BackfillRefused(f"--from {_utc(start)} is after --to {_utc(end)}; give the earlier time as --from")
    if end > now:
        raise BackfillRefused(f"--to {_utc(end)} is in the future (now {_utc(now)}); the ticks after now start "
                              "on their own: backfill only past ones")
    state = get_schedule(store, name)
    if state.spec is None:
        raise UnknownSchedule(name)
    ticks = state.spec.ticks(start - 1e-6, end, MAX_BACKFILL + 1)
    if len(ticks) > MAX_BACKFILL:
        raise BackfillRefused(f"{_utc(start)} to {_utc(end)} holds more than {MAX_BACKFILL} ticks of {name}; "
                              "backfill a shorter window at a time")
    wanted = [tick_execution_id(name, t) for t in ticks]
    existing = [eid for eid in wanted if store.load(eid) is not None]
    todo = [eid for eid in wanted if eid not in set(existing)]
    for i in range(0, len(todo), BACKFILL_BATCH):
        batch = todo[i:i + BACKFILL_BATCH]

        def change(exe: Execution, batch: list[str] = batch) -> tuple[list[Emit], list[TimerOp]] | None:
            if exe.context.get("removed"):
                raise UnknownSchedule(name)
            spec = stored_spec(exe)
            return [tick_start(exe, eid, spec) for eid in batch], []

        update_record(store, name, change, now)
    return Backfill(todo, existing)


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
