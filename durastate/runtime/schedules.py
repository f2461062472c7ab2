"""Schedules at run time: stored as system records, fired by the sweeper, changed by CAS commits.

Each schedule lives in the executions table as the system record ``~schedule~<name>`` (definition id
``~schedule``, status ``running``) whose context holds the spec, ``paused``, ``removed``, ``last_tick`` and
``last_execution_id``, and it has ONE armed timer, ``tick``, at its next tick, in the ordinary timers
table. So every backend's existing sweeper finds it — no new table, queue or AWS resource.

When that timer is due the sweeper calls :func:`fire_schedule_timer` instead of sending a timeout: it
decides what is due (:func:`~durastate.engine.schedules.plan_ticks`: catch-up, then overlap) and commits,
in one compare-and-swap commit of the record, the ``durastate.start`` of the tick's execution (through the
outbox, which the relay delivers), the new ``last_tick`` and the timer of the next tick. The execution id
is derived from the tick (``<name>-<tick in UTC>``) and so is its start event's id, so whatever happens —
a crash before the commit (the timer is still armed: the next sweep does it again), a crash after it (the
record moved on: the next sweep finds nothing due), two sweepers at once (one wins the CAS, the other
reloads and finds nothing due), a start relayed twice (the worker dedupes it) — each tick starts at most
one execution, and a tick is never lost while the record's timer is armed.

With ``jitter`` the timer is armed at the tick plus its offset (:func:`~durastate.engine.schedules.jitter_offset`,
an HMAC under the record's secret, which the record gets when it is created), so every sweeper and every
hop computes the same time. :func:`backfill_schedule` starts past ticks that have no execution with the
very start the tick would have committed (same id, same start event id, same witness), so a backfill never
starts a tick twice; :func:`delete_schedule` marks the record removed and cancels its timer in one commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from durastate.engine.ids import SCHEDULE_RECORD, START, run_witness, start_event_id
from durastate.engine.model import Emit, Event, Execution, TimerOp
from durastate.engine.registry import definition_files
from durastate.engine.schedules import (
    DEFAULT_GRACE,
    ScheduleSpec,
    is_schedule_file,
    load_schedules,
    manual_execution_id,
    parse_schedules,
    plan_ticks,
    schedule_name,
    schedule_record_id,
    tick_execution_id,
)
from durastate.errors import BackfillRefused, DurastateError, ScheduleError, StoreConflict, UnknownSchedule
from durastate.runtime.keys import give_secret
from durastate.store.base import ExecutionStore

__all__ = [
    "MAX_BACKFILL",
    "TICK_TIMER",
    "Backfill",
    "FiredTick",
    "ScheduleState",
    "SyncReport",
    "backfill_schedule",
    "delete_schedule",
    "fire_schedule_timer",
    "get_schedule",
    "list_schedules",
    "pause_schedule",
    "resume_schedule",
    "schedules_from",
    "sync_schedules",
    "trigger_schedule",
]

log = logging.getLogger("durastate.runtime.schedules")

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


@dataclass
class SyncReport:
    """What :func:`sync_schedules` changed, by schedule name."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


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


def schedules_from(folder: Path | None, given: str | None, known_definitions: Collection[str]
                   ) -> dict[str, ScheduleSpec] | None:
    """The schedules of a deployment: the ``schedules:`` files of the definitions ``folder`` plus ``given``,
    the JSON the AWS construct passes (``DURASTATE_SCHEDULES``: ``{name: spec}`` or ``{"schedules": …}``).

    None when neither holds any schedules file or JSON (then nothing is synced, not even removals: keep an
    empty ``schedules: {}`` file to remove every schedule). A name in both, or any invalid spec, is a
    :class:`~durastate.errors.ScheduleError` listing every issue.
    """
    files = [p for p in definition_files(folder) if is_schedule_file(p)] if folder is not None and folder.is_dir() \
        else []
    if not files and not given:
        return None
    specs = load_schedules(files, known_definitions)
    if given:
        try:
            data = json.loads(given)
        except ValueError as exc:
            raise ScheduleError([f"(document): not JSON: {exc}"], "DURASTATE_SCHEDULES") from None
        doc = data if isinstance(data, Mapping) and set(data) == {"schedules"} else {"schedules": data}
        extra = parse_schedules(doc, "DURASTATE_SCHEDULES", known_definitions)
        clashes = sorted(set(extra) & set(specs))
        if clashes:
            raise ScheduleError([f"schedules.{name}: defined both in the definitions folder and in the "
                                 "construct's schedules; keep one" for name in clashes], "DURASTATE_SCHEDULES")
        specs.update(extra)
    return specs


# -- writing --------------------------------------------------------------------------------------------
Change = Callable[[Execution], tuple[list[Emit], list[TimerOp]] | None]


def _update(store: ExecutionStore, name: str, change: Change, now: float) -> Execution:
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


def _arm(exe: Execution, at: float | None) -> list[TimerOp]:
    if at is None:
        exe.timers.pop(TICK_TIMER, None)
        return [TimerOp("cancel", TICK_TIMER)]
    exe.timers[TICK_TIMER] = at
    return [TimerOp("schedule", TICK_TIMER, at)]


def _fires(record: Execution, spec: ScheduleSpec) -> Callable[[float], float]:
    """When each tick of the record's schedule fires: the tick plus its jitter, derived from the record's
    secret (given to it here if it has none yet: it is committed with the timer it arms)."""
    if spec.jitter_seconds:
        give_secret(record)
    name = schedule_name(record.id) or record.id
    return lambda tick: spec.fire_at(tick, record.secret, name)


def _next_fire(record: Execution, spec: ScheduleSpec, after: float) -> float | None:
    """When the first tick after ``after`` fires (None: the schedule has no further tick)."""
    tick = spec.next_tick(after)
    return None if tick is None else _fires(record, spec)(tick)


def _start(record: Execution, execution_id: str, spec: ScheduleSpec) -> Emit:
    """The start of run ``execution_id``, with the witness the worker asks of it (a MAC of the id under
    the record's secret, given to the record here if it has none yet: it is committed with this start)."""
    give_secret(record)
    assert record.secret is not None
    return (execution_id, Event(id=start_event_id(execution_id), name=START,
                                data={"definition_id": spec.definition, "context": dict(spec.context),
                                      "witness": run_witness(record.secret, execution_id)}))


def _spec(exe: Execution) -> ScheduleSpec:
    spec = ScheduleState.of(exe).spec
    if spec is None:
        raise UnknownSchedule(schedule_name(exe.id) or exe.id)
    return spec


def sync_schedules(store: ExecutionStore, specs: Mapping[str, ScheduleSpec], now: float) -> SyncReport:
    """Make the stored schedules match ``specs`` (a definitions folder's, or the construct's).

    A new name gets a record, its ``last_tick`` set to ``now`` (ticks before it never run) and its timer
    armed. A changed spec replaces the stored one (kept: ``paused`` and the last run; ticks are counted
    from ``now`` or the last tick, whichever is later) and re-arms the timer. A stored schedule that is
    no longer in ``specs`` is marked removed and its timer cancelled — kept, not deleted, so its history
    stays readable and adding it back resumes it. An unchanged one costs one read and no write.
    """
    report = SyncReport()
    for name, spec in specs.items():
        digest = spec.spec_hash()
        exe = store.load(schedule_record_id(name))
        if exe is None:
            record = Execution(id=schedule_record_id(name), definition_id=SCHEDULE_RECORD, status="running",
                               context={"spec": spec.to_dict(), "spec_hash": digest, "paused": False,
                                        "removed": False, "last_tick": now, "last_execution_id": None,
                                        "last_started_at": None},
                               created_at=now, updated_at=now)
            timers = _arm(record, _next_fire(record, spec, now))
            try:
                store.commit(record, [], None, timers)
                report.created.append(name)
                continue
            except StoreConflict:
                pass  # another sync created it meanwhile: update it like any stored one
        elif exe.context.get("spec_hash") == digest and not exe.context.get("removed"):
            report.unchanged.append(name)
            continue

        def change(exe: Execution, spec: ScheduleSpec = spec, digest: str = digest
                   ) -> tuple[list[Emit], list[TimerOp]] | None:
            ctx = exe.context
            if ctx.get("spec_hash") == digest and not ctx.get("removed"):
                return None
            ctx.update(spec=spec.to_dict(), spec_hash=digest, removed=False, deleted=False)
            ctx["last_tick"] = max(float(ctx.get("last_tick") or now), now)
            return [], _arm(exe, None if ctx.get("paused") else _next_fire(exe, spec, ctx["last_tick"]))

        _update(store, name, change, now)
        report.updated.append(name)
    for state in list_schedules(store):
        if state.name in specs:
            continue

        def remove(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
            if exe.context.get("removed"):
                return None
            exe.context["removed"] = True
            return [], _arm(exe, None)

        _update(store, state.name, remove, now)
        report.removed.append(state.name)
    return report


@dataclass(frozen=True, slots=True)
class FiredTick:
    """What firing a schedule record's timer did (:func:`fire_schedule_timer`)."""

    started: str | None
    """The execution it started, if it started one."""
    next_tick: float | None
    """When the record's timer is armed next (``None``: not armed — paused, removed, no tick left). A
    caller that can deliver a timer ahead of time (the timer hop on AWS) hands this one over at once."""
    moved: bool
    """Whether this call committed the record (a tick handled, the timer re-armed); ``False`` for a tick
    some earlier call handled already, whose next timer that call armed (and hopped)."""


def fire_schedule_timer(store: ExecutionStore, record_id: str, now: float) -> FiredTick:
    """The timer of schedule record ``record_id`` was found due at ``now`` (by a sweep, or delivered by
    the timer hop): start what is due and arm the next tick, in one commit of the record.

    A timer of a paused or removed schedule (or a stale one: the tick was fired already) only ends up
    cancelled or re-armed, so firing one twice starts nothing twice. See the module docstring for why a
    tick starts once.
    """
    name = schedule_name(record_id)
    if name is None:
        log.warning("timer of system record %s is not a schedule's; dropping it", record_id)
        return FiredTick(None, None, False)
    started: list[str] = []

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        started.clear()
        ctx = exe.context
        spec = ScheduleState.of(exe).spec
        if spec is None or ctx.get("paused") or ctx.get("removed"):
            if spec is None:
                log.error("schedule %s: its stored spec does not validate; its timer is cancelled until a "
                          "sync stores a valid one", name)
            return ([], _arm(exe, None)) if TICK_TIMER in exe.timers else None
        last_tick = float(ctx.get("last_tick") or now)
        plan = plan_ticks(spec, last_tick, now, _fires(exe, spec))
        if plan.latest is None:  # nothing due (a stale timer, another sweeper was first): arm the next tick
            return None if exe.timers.get(TICK_TIMER) == plan.next_tick else ([], _arm(exe, plan.next_tick))
        emits: list[Emit] = []
        run = plan.run
        if plan.missed or run is None:
            log.info("schedule %s: tick(s) up to %s were missed (catch_up: %s): %s", name,
                     tick_execution_id(name, plan.latest), spec.catch_up,
                     "starting one execution for them" if run is not None else "dropping them")
        if run is not None and spec.overlap == "skip" and _still_running(store, ctx, now):
            log.info("schedule %s: skipping the tick of %s, its previous execution %s still runs (overlap: "
                     "skip)", name, tick_execution_id(name, run), ctx.get("last_execution_id"))
            run = None
        if run is not None:
            execution_id = tick_execution_id(name, run)
            emits.append(_start(exe, execution_id, spec))
            ctx.update(last_execution_id=execution_id, last_started_at=now)
            started.append(execution_id)
        ctx["last_tick"] = plan.latest
        return emits, _arm(exe, plan.next_tick)

    moved = [False]

    def tracked(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        result = change(exe)
        moved[0] = result is not None  # the last attempt's (a lost CAS calls it again on a fresh load)
        return result

    try:
        record = _update(store, name, tracked, now)
    except UnknownSchedule:
        log.warning("timer of schedule %s, whose record is gone; dropping it", name)
        return FiredTick(None, None, False)
    return FiredTick(started[0] if started else None, record.timers.get(TICK_TIMER), moved[0])


def _still_running(store: ExecutionStore, ctx: Mapping[str, Any], now: float) -> bool:
    """Whether the schedule's previous execution still runs. One not stored yet counts as running while its
    start may still be on its way (for an hour): after that it is taken as lost (e.g. dead-lettered)."""
    last_id = ctx.get("last_execution_id")
    if not last_id:
        return False
    exe = store.load(last_id)
    if exe is None:
        started = ctx.get("last_started_at")
        return started is not None and now - float(started) < DEFAULT_GRACE
    return exe.status in ("running", "suspended")


def pause_schedule(store: ExecutionStore, name: str, now: float) -> ScheduleState:
    """Stop starting executions (the timer is cancelled); the ticks until :func:`resume_schedule` are missed."""

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        _spec(exe)
        if exe.context.get("removed"):
            raise UnknownSchedule(name)
        if exe.context.get("paused"):
            return None
        exe.context["paused"] = True
        return [], _arm(exe, None)

    return ScheduleState.of(_update(store, name, change, now))


def resume_schedule(store: ExecutionStore, name: str, now: float) -> ScheduleState:
    """Start executions again. ``catch_up: skip`` drops the ticks missed while paused (the timer is armed for
    the next tick after ``now``); ``once`` runs one execution for them at the next sweep."""

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        spec = _spec(exe)
        ctx = exe.context
        if ctx.get("removed"):
            raise UnknownSchedule(name)
        if not ctx.get("paused"):
            return None
        ctx["paused"] = False
        last_tick = float(ctx.get("last_tick") or now)
        if spec.catch_up == "skip":
            ctx["last_tick"] = max(last_tick, now)
            return [], _arm(exe, _next_fire(exe, spec, ctx["last_tick"]))
        return [], _arm(exe, _next_fire(exe, spec, last_tick))  # in the past if ticks were missed: due at once

    return ScheduleState.of(_update(store, name, change, now))


def trigger_schedule(store: ExecutionStore, name: str, now: float) -> str:
    """Start one execution of the schedule now, besides its ticks: ``<name>-manual-<now in UTC>``. It counts
    as the schedule's last execution (for ``overlap: skip``) and changes no tick. Works while paused."""
    execution_id = manual_execution_id(name, now)

    def change(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        spec = _spec(exe)
        if exe.context.get("removed"):
            raise UnknownSchedule(name)
        if exe.context.get("last_execution_id") == execution_id:
            return None  # triggered twice in the same second: one execution
        exe.context.update(last_execution_id=execution_id, last_started_at=now)
        return [_start(exe, execution_id, spec)], []

    _update(store, name, change, now)
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
        return [], _arm(exe, None)

    get_schedule(store, name)
    return ScheduleState.of(_update(store, name, change, now))


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
            spec = _spec(exe)
            return [_start(exe, eid, spec) for eid in batch], []

        _update(store, name, change, now)
    return Backfill(todo, existing)


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
