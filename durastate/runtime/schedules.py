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
Those record operations (reading, pause, resume, trigger, backfill, delete) need only a store and live in
:mod:`durastate.store.schedules`, so the client and the console call them too; they are re-exported here.
"""


from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durastate.engine.ids import SCHEDULE_RECORD
from durastate.engine.model import Emit, Execution, TimerOp
from durastate.engine.registry import definition_files
from durastate.engine.schedules import (
    DEFAULT_GRACE,
    ScheduleSpec,
    is_schedule_file,
    load_schedules,
    parse_schedules,
    plan_ticks,
    schedule_name,
    schedule_record_id,
    tick_execution_id,
)
from durastate.errors import ScheduleError, StoreConflict, UnknownSchedule
from durastate.store.base import ExecutionStore
from durastate.store.schedules import (
    MAX_BACKFILL,
    TICK_TIMER,
    Backfill,
    ScheduleState,
    arm_tick,
    backfill_schedule,
    delete_schedule,
    get_schedule,
    list_schedules,
    next_fire,
    pause_schedule,
    resume_schedule,
    tick_fires,
    tick_start,
    trigger_schedule,
    update_record,
)

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


@dataclass
class SyncReport:
    """What :func:`sync_schedules` changed, by schedule name."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)



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
            timers = arm_tick(record, next_fire(record, spec, now))
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
            return [], arm_tick(exe, None if ctx.get("paused") else next_fire(exe, spec, ctx["last_tick"]))

        update_record(store, name, change, now)
        report.updated.append(name)
    for state in list_schedules(store):
        if state.name in specs:
            continue

        def remove(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
            if exe.context.get("removed"):
                return None
            exe.context["removed"] = True
            return [], arm_tick(exe, None)

        update_record(store, state.name, remove, now)
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
            return ([], arm_tick(exe, None)) if TICK_TIMER in exe.timers else None
        last_tick = float(ctx.get("last_tick") or now)
        plan = plan_ticks(spec, last_tick, now, tick_fires(exe, spec))
        if plan.latest is None:  # nothing due (a stale timer, another sweeper was first): arm the next tick
            return None if exe.timers.get(TICK_TIMER) == plan.next_tick else ([], arm_tick(exe, plan.next_tick))
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
            emits.append(tick_start(exe, execution_id, spec))
            ctx.update(last_execution_id=execution_id, last_started_at=now)
            started.append(execution_id)
        ctx["last_tick"] = plan.latest
        return emits, arm_tick(exe, plan.next_tick)

    moved = [False]

    def tracked(exe: Execution) -> tuple[list[Emit], list[TimerOp]] | None:
        result = change(exe)
        moved[0] = result is not None  # the last attempt's (a lost CAS calls it again on a fresh load)
        return result

    try:
        record = update_record(store, name, tracked, now)
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

