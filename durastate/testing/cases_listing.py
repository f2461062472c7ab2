"""Checks of ``list_executions`` (``listing``): summaries, keyset paging, every filter, system records.

Definition and parent ids in the filters below are names: the check gives them its prefix, so on a
shared database they select this check's executions only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durastate.engine.ids import DEFINITION_RECORD, SCHEDULE_RECORD
from durastate.engine.model import Execution
from durastate.store.base import ExecutionSummary
from durastate.testing._kit import Ctx, case, expect, expect_eq, expect_raises
from durastate.testing.cases_commit import new_exe

Expect = Callable[[Execution], bool]


def scoped(ctx: Ctx, filters: dict[str, Any]) -> dict[str, Any]:
    """``filters`` with the check's prefix on definition and parent ids."""
    return {k: ctx.id(v) if k in ("definition_id", "parent_id") else v for k, v in filters.items()}


def populate(ctx: Ctx) -> list[Execution]:
    """Eleven executions of two definitions, four statuses, some of them children."""
    exes: list[Execution] = []
    plan = [
        ("order", "running", None), ("order", "finished", None), ("order", "failed", None),
        ("order", "running", "x-03"), ("payment", "running", None), ("payment", "cancelled", "x-00"),
        ("order", "finished", "x-00"), ("payment", "finished", None), ("order", "running", None),
        ("order", "cancelled", None), ("payment", "running", "x-04"),
    ]
    for n, (defn, status, parent) in enumerate(plan):
        eid = ctx.id(f"x-{n:02d}")
        exes.append(Execution(id=eid, definition_id=ctx.id(defn), status=status,
                              parent_id=ctx.id(parent) if parent else None, child_id=eid if parent else None,
                              active_path=f"s{n}", outcome="ok" if status == "finished" else None))
    return exes


async def save_all(ctx: Ctx) -> dict[str, Execution]:
    exes: dict[str, Execution] = {}
    for n, exe in enumerate(populate(ctx)):
        await ctx.store.save(exe)
        if n % 3 == 0:
            await ctx.store.commit(exe, [])  # a few at version 2
        exes[exe.id] = exe
    return exes


def summaries_match(got: list[ExecutionSummary], exes: dict[str, Execution]) -> None:
    for s in got:
        expect_eq(s, ExecutionSummary.of(exes[s.id]), f"the summary of {s.id!r}")


@case("listing", exclusive=True)
async def list_summaries(ctx: Ctx) -> None:
    """One unfiltered page lists every execution's summary (definition, version, status, outcome, path)."""
    exes = await save_all(ctx)
    page = await ctx.store.list_executions()
    expect_eq(page.next_cursor, None, "next_cursor of a listing that fits one page")
    expect_eq(sorted(page.items, key=lambda s: s.id), [ExecutionSummary.of(exes[k]) for k in sorted(exes)],
              "the summaries listed")


@case("listing", exclusive=True)
async def list_empty(ctx: Ctx) -> None:
    """An empty store lists nothing, with no cursor."""
    page = await ctx.store.list_executions()
    expect(page.items == [] and page.next_cursor is None, f"an empty listing, got {page!r}")


@case("listing", params={str(n): {"limit": n} for n in (1, 3, 4, 11, 12)})
async def list_paging(ctx: Ctx, limit: int) -> None:
    """Paging with ``limit`` and ``next_cursor`` lists every execution exactly once."""
    exes = await save_all(ctx)
    first = await ctx.store.list_executions(limit=limit)
    if limit < len(exes):
        expect(first.next_cursor is not None and len(first.items) == limit,
               f"a first page of limit {limit} is full and has a cursor, got {len(first.items)} items, "
               f"cursor {first.next_cursor!r}")
    ids = [s.id for s in await ctx.collect(limit)]
    expect(len(ids) == len(set(ids)), f"no execution listed twice while paging by {limit}: {ids}")
    expect_eq(set(ids), set(exes), f"the ids listed, paging by {limit}")


LIST_FILTERS: dict[str, tuple[dict[str, Any], Expect]] = {
    "definition": ({"definition_id": "payment"}, lambda e: e.definition_id.endswith("payment")),
    "one-status": ({"status": "running"}, lambda e: e.status == "running"),
    "status-list": ({"status": ["finished", "cancelled"]}, lambda e: e.status in ("finished", "cancelled")),
    "status-tuple": ({"status": ("failed",)}, lambda e: e.status == "failed"),
    "roots": ({"roots_only": True}, lambda e: e.parent_id is None),
    "combined": ({"definition_id": "order", "status": ["running"], "roots_only": True},
                 lambda e: e.definition_id.endswith("order") and e.status == "running" and e.parent_id is None),
    "no-match": ({"definition_id": "nope"}, lambda e: False),
    "empty-status-list": ({"status": []}, lambda e: False),
}


@case("listing", params={k: {"filters": f, "want": w} for k, (f, w) in LIST_FILTERS.items()})
async def list_filters_with_paging(ctx: Ctx, filters: dict[str, Any], want: Expect) -> None:
    """Definition, status (one or several) and roots-only filters, alone and combined, with paging."""
    exes = await save_all(ctx)
    wanted = sorted(k for k, e in exes.items() if want(e))
    for limit in (2, 100):
        got = await ctx.collect(limit, **scoped(ctx, filters))
        expect_eq(sorted(s.id for s in got), wanted, f"the ids listed with {filters} by pages of {limit}")
        summaries_match(got, exes)


@case("listing")
async def list_reflects_updates(ctx: Ctx) -> None:
    """A commit moves the execution between status filters and updates its summary."""
    exe = new_exe(ctx, status="running")
    await ctx.store.save(exe)
    exe.status = "finished"
    exe.outcome = "done"
    exe.active_path = "done"
    await ctx.store.commit(exe, [])
    expect_eq([s.id for s in await ctx.listed(status="running")], [],
              "the running executions after it finished")
    got = await ctx.listed(status="finished")
    expect_eq([(s.id, s.version, s.outcome, s.active_path) for s in got], [(exe.id, 2, "done", "done")],
              "the finished executions (id, version, outcome, active path)")


@case("listing")
async def list_bad_cursor(ctx: Ctx) -> None:
    """A cursor the store did not hand out raises ValueError (InvalidCursor)."""
    with expect_raises(ValueError, "list_executions with a malformed cursor"):
        await ctx.store.list_executions(cursor="%%%not-a-cursor%%%")


# -- filters by parent and update time; system records ---------------------------------------------------


async def populate_times(ctx: Ctx) -> dict[str, Execution]:
    """Twelve executions: children of p-00 and p-01, updated at 1000 + 100 n, one never stepped, and two
    system records."""
    exes: dict[str, Execution] = {}
    for n in range(12):
        parent = (ctx.id("p-00"), ctx.id("p-01"), None)[n % 3]
        eid = ctx.id(f"p-{n:02d}")
        exe = Execution(id=eid, definition_id=ctx.id("order" if n % 2 else "payment"), active_path="s",
                        status="running" if n % 4 else "finished", parent_id=parent,
                        child_id=eid if parent else None,
                        created_at=500.0 + n, updated_at=None if n == 11 else 1000.0 + 100 * n)
        await ctx.store.save(exe)
        exes[exe.id] = exe
    for sid, kind in ((system_id(ctx, DEFINITION_RECORD), DEFINITION_RECORD),
                      (system_id(ctx, SCHEDULE_RECORD), SCHEDULE_RECORD)):
        await ctx.store.save(Execution(id=sid, definition_id=kind, context={"kept": True}))
    return exes


def system_id(ctx: Ctx, kind: str) -> str:
    """The id of this check's system record of ``kind`` (an archived definition, a schedule)."""
    return f"{kind}~{ctx.prefix}order~1" if kind == DEFINITION_RECORD else f"{kind}~{ctx.prefix}nightly"


TIME_FILTERS: dict[str, tuple[dict[str, Any], Expect]] = {
    "parent": ({"parent_id": "p-00"}, lambda e: (e.parent_id or "").endswith("p-00")),
    "parent-definition": ({"parent_id": "p-01", "definition_id": "order"},
                          lambda e: (e.parent_id or "").endswith("p-01") and e.definition_id.endswith("order")),
    "parent-status": ({"parent_id": "p-00", "status": "running"},
                      lambda e: (e.parent_id or "").endswith("p-00") and e.status == "running"),
    "no-parent-match": ({"parent_id": "nobody"}, lambda e: False),
    "updated-after": ({"updated_after": 1500.0}, lambda e: e.updated_at is not None and e.updated_at >= 1500.0),
    "updated-before": ({"updated_before": 1500.0}, lambda e: e.updated_at is not None and e.updated_at < 1500.0),
    "updated-window": ({"updated_after": 1200.0, "updated_before": 1800.0},
                       lambda e: e.updated_at is not None and 1200.0 <= e.updated_at < 1800.0),
    "updated-roots": ({"updated_after": 1200.0, "roots_only": True},
                      lambda e: e.updated_at is not None and e.updated_at >= 1200.0 and e.parent_id is None),
    "none": ({}, lambda e: True),
}


@case("listing", params={k: {"filters": f, "want": w} for k, (f, w) in TIME_FILTERS.items()})
async def filters_with_paging(ctx: Ctx, filters: dict[str, Any], want: Expect) -> None:
    """Parent and update-time filters (``updated_after <= updated_at < updated_before``), with paging;
    system records are never listed."""
    exes = await populate_times(ctx)
    wanted = sorted(k for k, e in exes.items() if want(e))
    for limit in (1, 2, 5, 100):
        got = await ctx.collect(limit, **scoped(ctx, filters))
        expect_eq(sorted(s.id for s in got), wanted, f"the ids listed with {filters} by pages of {limit}")
        summaries_match(got, exes)


@case("listing")
async def summaries_carry_times(ctx: Ctx) -> None:
    """A summary carries ``created_at`` and ``updated_at`` (None for an execution never stepped)."""
    await populate_times(ctx)
    listed = await ctx.collect(100)
    [s] = [s for s in listed if s.id == ctx.id("p-03")]
    expect_eq((s.created_at, s.updated_at), (503.0, 1300.0), "(created_at, updated_at) of a summary")
    [never] = [s for s in listed if s.id == ctx.id("p-11")]
    expect_eq((never.created_at, never.updated_at), (511.0, None), "(created_at, updated_at) never stepped")


@case("listing")
async def system_records_left_out_unless_asked_for(ctx: Ctx) -> None:
    """System records (``~definition~…``, ``~schedule~…``) are listed only when asked for by their kind."""
    exes = await populate_times(ctx)
    expect_eq(sorted(s.id for s in await ctx.collect(3)), sorted(exes), "the ids listed (no system records)")
    expect_eq([s.id for s in await ctx.collect(3, status="running", roots_only=True)],
              [s.id for s in await ctx.collect(3, status="running") if s.parent_id is None],
              "running roots listed = running listed without children")
    expect(all(not s.id.startswith("~") for s in await ctx.collect(2, status="running")),
           "a status filter lists no system record")
    expect_eq([s.id for s in await ctx.listed(definition_id=DEFINITION_RECORD)],
              [system_id(ctx, DEFINITION_RECORD)], f"the listing of definition_id={DEFINITION_RECORD!r}")
    expect_eq([s.id for s in await ctx.collect(1, definition_id=SCHEDULE_RECORD)], [system_id(ctx, SCHEDULE_RECORD)],
              f"the listing of definition_id={SCHEDULE_RECORD!r}")


@case("listing")
async def updates_move_the_time_filter(ctx: Ctx) -> None:
    """A commit that moves ``updated_at`` moves the execution into a later time window."""
    exe = Execution(id=ctx.id("m-1"), definition_id=ctx.id("order"), active_path="a", created_at=10.0,
                    updated_at=10.0)
    await ctx.store.save(exe)
    expect_eq(await ctx.listed(updated_after=50.0), [],
              "the listing updated_after=50 before the update")
    exe.updated_at = 60.0
    exe.active_path = "b"
    await ctx.store.commit(exe, [])
    got = await ctx.listed(updated_after=50.0)
    expect_eq([(s.id, s.active_path, s.created_at, s.updated_at) for s in got], [(exe.id, "b", 10.0, 60.0)],
              "the listing updated_after=50 after the update")
