"""Checks of retention (``purge``): old ended executions become tombstones that still dedupe.

A purge never touches a running (or suspended) execution, a system record or one that ended after the
cutoff; it honours the status and definition filters and its batch limit; a purged execution still
recognises its applied events while its trace is gone; a purge loses cleanly to a commit that got there
first, and a stale commit loses to the purge; expired tombstones go with their dedupe marks (capability
``expires_tombstones``; DynamoDB leaves that to its TTL). On a shared store every purge is narrowed to the
check's own definition id.
"""

from __future__ import annotations

from typing import Any

from durastate.engine.ids import SCHEDULE_RECORD
from durastate.engine.model import Execution
from durastate.errors import StoreConflict
from durastate.store.retention import PurgeResult
from durastate.testing._kit import Ctx, Expectation, case, expect, expect_eq, expect_raises
from durastate.testing.cases_commit import load
from durastate.testing.cases_listing import system_id

CUTOFF = 1_000.0
NOW = 5_000.0
TTL = 100.0


async def ended(ctx: Ctx, name: str, status: str = "finished", at: float = 500.0, *,
                definition: str = "order", event_id: str | None = None, trace: bool = True, **kw: Any) -> Execution:
    """An execution that ended (``status``) at ``at``, committed with a dedupe mark and a trace step."""
    eid = ctx.id(name)
    exe = Execution(id=eid, definition_id=ctx.id(definition), status=status, outcome="ok", active_path="done",
                    context={"big": "x" * 50}, created_at=at - 10, updated_at=at, **kw)
    await ctx.store.commit(exe, [], processed_event_id=event_id or f"{eid}:start",
                           trace={"event": "durastate.start"} if trace else None)
    return exe


async def running(ctx: Ctx, name: str, status: str = "running", at: float = 100.0) -> Execution:
    eid = ctx.id(name)
    exe = Execution(id=eid, definition_id=ctx.id("order"), status=status, active_path="busy", updated_at=at)
    await ctx.store.commit(exe, [], processed_event_id=f"{eid}:start", trace={"event": "durastate.start"})
    return exe


async def purge(ctx: Ctx, ended_before: float = CUTOFF, **kw: Any) -> PurgeResult:
    """``store.purge``; narrowed to the check's ``order`` definition when the store is shared."""
    if ctx.caps.shared and "definition_id" not in kw:
        kw["definition_id"] = ctx.id("order")
    result: PurgeResult = await ctx.store.purge(ended_before, **kw)
    return result


async def status_of(ctx: Ctx, name: str) -> str | None:
    exe = await ctx.store.load(ctx.id(name))
    return None if exe is None else exe.status


async def purge_all(ctx: Ctx, **kw: Any) -> list[str]:
    """Every purge batch until the store says there is no more; the ids purged."""
    ids: list[str] = []
    for _ in range(1000):
        result = await purge(ctx, now=NOW, tombstone_ttl=TTL, **kw)
        ids += result.ids
        if not result.more:
            return ids
    raise Expectation("purge never ran out of work (more stayed True)")


def names(ctx: Ctx, ids: tuple[str, ...] | list[str]) -> list[str]:
    return sorted(i.removeprefix(ctx.prefix) for i in ids)


@case("purge")
async def purge_takes_old_ended_executions_only(ctx: Ctx) -> None:
    """Every ended status before the cutoff becomes a tombstone; running, suspended, young and system
    records stay; a tombstone keeps identity, outcome and times, drops context and trace."""
    for status in ("finished", "failed", "cancelled", "terminated"):
        await ended(ctx, f"old-{status}", status)
    await ended(ctx, "young", at=CUTOFF + 1)
    await running(ctx, "busy")
    await running(ctx, "paused", status="suspended")
    system = Execution(id=system_id(ctx, SCHEDULE_RECORD), definition_id=SCHEDULE_RECORD, status="running",
                       updated_at=1.0)
    await ctx.store.save(system)

    result = await purge(ctx, now=NOW, tombstone_ttl=TTL)

    expect_eq(names(ctx, result.ids), ["old-cancelled", "old-failed", "old-finished", "old-terminated"],
              "the executions purged")
    expect(result.purged == 4 and not result.more, f"purge result: expected purged=4, more=False, got {result}")
    for eid in result.ids:
        tomb = await ctx.store.load(eid)
        if tomb is None or tomb.status != "purged":
            raise Expectation(f"{eid!r} is a tombstone (status 'purged'), got {tomb!r}")
        expect_eq((tomb.outcome, tomb.definition_id), ("ok", ctx.id("order")), f"{eid!r}'s outcome and definition")
        expect_eq((tomb.context, tomb.active_path, tomb.history), ({}, None, {}),
                  f"{eid!r}'s context, active path and history")
        expect_eq((tomb.ended_at, tomb.expires_at, tomb.created_at), (500.0, NOW + TTL, 490.0),
                  f"{eid!r}'s ended_at, expires_at, created_at")
        expect_eq(tomb.version, 2, f"{eid!r}'s version (one commit, then the purge's compare-and-swap)")
        expect_eq(await ctx.store.read_trace(eid), [], f"{eid!r}'s trace")
    expect_eq(await status_of(ctx, "young"), "finished", "the status of an execution that ended after the cutoff")
    expect(await ctx.store.read_trace(ctx.id("young")) != [], "an execution not purged keeps its trace")
    expect_eq(await status_of(ctx, "busy"), "running", "a running execution's status")
    expect_eq(await status_of(ctx, "paused"), "suspended", "a suspended execution's status")
    expect_eq((await ctx.store.load(system.id)).status, "running", "a system record's status")
    expect_eq((await purge(ctx, now=NOW, tombstone_ttl=TTL)).purged, 0, "a second purge (tombstones stay)")


@case("purge")
async def purge_removes_the_history(ctx: Ctx) -> None:
    """A store that keeps whole histories deletes an execution's history when it purges the execution."""
    kept = ctx.store.history
    ctx.store.history = True
    try:
        exe = await ended(ctx, "old")
        for n in range(30):  # more than one batch of deletes on DynamoDB (25 a request)
            await ctx.store.append_trace(exe.id, {"n": n})
        young = await ended(ctx, "young", at=CUTOFF + 1)
        expect_eq(len(await ctx.store.read_history(exe.id)), 31, "the history before the purge")
        result = await purge(ctx, now=NOW, tombstone_ttl=TTL)
        expect_eq(names(ctx, result.ids), ["old"], "the executions purged")
        expect_eq(await ctx.store.read_history(exe.id), [], "a purged execution's history")
        expect_eq(len(await ctx.store.read_history(young.id)), 1, "an execution not purged keeps its history")
    finally:
        ctx.store.history = kept


@case("purge")
async def purge_filters_by_status_and_definition(ctx: Ctx) -> None:
    """``statuses`` and ``definition_id`` narrow a purge; a non-ended status or a zero limit is a ValueError."""
    await ended(ctx, "f1")
    await ended(ctx, "c1", "cancelled")
    await ended(ctx, "f2", definition="invoice")

    expect_eq((await purge(ctx, statuses=["cancelled"], now=NOW)).ids, (ctx.id("c1"),),
              "purge(statuses=['cancelled'])")
    expect_eq((await purge(ctx, definition_id=ctx.id("invoice"), now=NOW)).ids, (ctx.id("f2"),),
              "purge(definition_id=invoice)")
    expect_eq(await status_of(ctx, "f1"), "finished", "the status of an execution no filter took")
    with expect_raises(ValueError, "purge(statuses=['running'])", match="only ended executions"):
        await purge(ctx, statuses=["running"], now=NOW)
    with expect_raises(ValueError, "purge(limit=0)", match="limit"):
        await purge(ctx, limit=0, now=NOW)


@case("purge")
async def a_tombstone_still_recognises_its_events(ctx: Ctx) -> None:
    """A purged execution still answers ``load_for_event``/``is_processed`` for the events it applied."""
    e1 = ctx.id("e1")
    await ended(ctx, "e1", event_id="e1:start")
    await purge(ctx, now=NOW, tombstone_ttl=TTL)

    tomb, seen = await ctx.store.load_for_event(e1, "e1:start")
    expect(tomb is not None and tomb.status == "purged" and seen,
           f"load_for_event of a tombstone's applied event: expected (tombstone, True), got ({tomb!r}, {seen})")
    expect(await ctx.store.is_processed(e1, "e1:start"), "a tombstone keeps its dedupe marks")
    expect(not await ctx.store.is_processed(e1, "a-new-event"), "a new event is not processed on a tombstone")


@case("purge")
async def a_late_event_on_a_tombstone_keeps_it_a_tombstone(ctx: Ctx) -> None:
    """What the worker does with an event for a purged execution: commit it as ignored (mark + trace)."""
    e1 = ctx.id("e1")
    await ended(ctx, "e1")
    await purge(ctx, now=NOW, tombstone_ttl=TTL)
    tomb = await load(ctx, "e1")
    await ctx.store.commit(tomb, [], processed_event_id="late", trace={"event": "late", "ignored": True})

    again = await load(ctx, "e1")
    expect_eq((again.status, again.expires_at), ("purged", NOW + TTL), "a tombstone after a late event")
    expect(await ctx.store.is_processed(e1, "late"), "the late event is marked on the tombstone")
    expect_eq((await purge(ctx, now=NOW, tombstone_ttl=TTL)).purged, 0, "a purge after the late event")


@case("purge", exclusive=True)
async def expired_tombstones_go_with_their_marks(ctx: Ctx) -> None:
    """A purge after a tombstone's expiry deletes it with its marks and trace (``expires_tombstones``);
    otherwise the tombstone carries its expiry for the database to act on."""
    e1 = ctx.id("e1")
    await ended(ctx, "e1")
    await ended(ctx, "e2", at=CUTOFF + 1)
    await purge(ctx, now=NOW, tombstone_ttl=TTL)

    expect_eq((await purge(ctx, now=NOW + TTL - 1, tombstone_ttl=TTL)).expired, 0, "expired just before the expiry")
    result = await purge(ctx, now=NOW + TTL, tombstone_ttl=TTL)

    if ctx.caps.expires_tombstones:
        expect_eq(result.expired, 1, "expired at the expiry")
        expect_eq(await ctx.store.load(e1), None, "load of an expired tombstone")
        expect(not await ctx.store.is_processed(e1, f"{e1}:start"), "an expired tombstone's marks are gone")
        expect_eq(await ctx.store.read_trace(e1), [], "an expired tombstone's trace")
    else:  # e.g. DynamoDB: the tombstone item carries the TTL attribute, and the database deletes it
        expect_eq(result.expired, 0, "expired (expires_tombstones=False: the database expires them)")
        tomb = await load(ctx, "e1")
        expect_eq(tomb.expires_at, NOW + TTL, "the tombstone's expires_at")
    expect_eq(await status_of(ctx, "e2"), "finished", "an execution that ended after the cutoff")
    expect(await ctx.store.is_processed(ctx.id("e2"), f"{ctx.id('e2')}:start"), "its marks are kept")


@case("purge")
async def purge_works_in_bounded_batches(ctx: Ctx) -> None:
    """At most ``limit`` executions a call, with ``more`` until the work is done."""
    for n in range(5):
        await ended(ctx, f"e{n}", at=100.0 + n)
    first = await purge(ctx, limit=2, now=NOW)
    expect(first.purged == 2 and first.more, f"a first batch of limit 2: expected purged=2, more=True, got {first}")
    rest = await purge_all(ctx, limit=2)
    expect_eq(names(ctx, first.ids + tuple(rest)), [f"e{n}" for n in range(5)], "the executions purged in batches")
    for n in range(5):
        expect_eq(await status_of(ctx, f"e{n}"), "purged", f"e{n}'s status")


@case("purge")
async def dry_run_changes_nothing(ctx: Ctx) -> None:
    """``dry_run=True`` reports what would go and changes nothing."""
    await ended(ctx, "e1")
    await ended(ctx, "e2")
    result = await purge(ctx, now=NOW, dry_run=True)
    expect(names(ctx, result.ids) == ["e1", "e2"] and result.purged == 2,
           f"a dry run reports e1 and e2, got {result}")
    expect_eq(await status_of(ctx, "e1"), "finished", "the status after a dry run")
    expect(await ctx.store.read_trace(ctx.id("e1")) != [], "a dry run keeps the trace")


@case("purge")
async def a_commit_that_lands_first_wins_over_the_purge(ctx: Ctx) -> None:
    """A failed execution redriven (running again) before the purge's CAS is not purged."""
    await ended(ctx, "e1", "failed")
    exe = await load(ctx, "e1")
    expect_eq(exe.ended_at, 500.0, "ended_at of an execution that failed at 500")
    exe.status, exe.updated_at = "running", 600.0  # the redrive
    await ctx.store.commit(exe, [])

    expect_eq((await purge(ctx, now=NOW)).purged, 0, "a purge after the redrive")
    again = await load(ctx, "e1")
    expect_eq((again.status, again.ended_at), ("running", None), "(status, ended_at) of the redriven execution")


@case("purge")
async def a_stale_commit_loses_to_the_purge(ctx: Ctx) -> None:
    """A commit computed from a copy read before the purge raises StoreConflict and writes nothing."""
    await ended(ctx, "e1", "failed")
    stale = await load(ctx, "e1")
    if not ctx.caps.durable:  # the in-memory store hands out its own object: take another one
        stale = stale.model_copy(deep=True)
    await purge(ctx, now=NOW)

    stale.status = "running"  # a redrive computed from the copy read before the purge
    with expect_raises(StoreConflict, "a commit of a copy read before the purge"):
        await ctx.store.commit(stale, [], processed_event_id="redrive-1")
    expect_eq(await status_of(ctx, "e1"), "purged", "the status after the stale commit")
    expect(not await ctx.store.is_processed(ctx.id("e1"), "redrive-1"), "the stale commit's event is not marked")


@case("purge")
async def the_end_time_is_kept_by_later_commits_and_cleared_by_a_redrive(ctx: Ctx) -> None:
    """A later commit of an ended execution (an ignored late event) keeps its end time."""
    await ended(ctx, "e1", "failed", at=500.0)
    exe = await load(ctx, "e1")
    expect_eq(exe.ended_at, 500.0, "ended_at")
    exe.updated_at = 2_000.0  # an ignored late event does not move the end time
    await ctx.store.commit(exe, [], processed_event_id="late")
    expect_eq((await purge(ctx, now=NOW, dry_run=True)).ids, (ctx.id("e1"),), "a dry run after the late event")
