"""Checks of ``list_executions(where=…)`` (``listing``): the search index a commit writes with the execution.

A step fills ``Execution.search`` from its definition's ``search:`` fields; the store indexes those values
in the same commit and answers ``where`` filters (every condition must hold, see
:func:`durastate.engine.search.values_match`) with the listing's other filters and keyset paging.
"""

from __future__ import annotations

from typing import Any

from durastate.engine.model import Execution
from durastate.engine.search import Condition, values_match
from durastate.errors import InvalidSearch
from durastate.testing._kit import Ctx, case, expect, expect_eq, expect_raises
from durastate.testing.cases_listing import scoped

SearchValues = dict[str, str | float | bool | None]


async def populate_search(ctx: Ctx) -> dict[str, Execution]:
    """Twelve executions of two definitions with search values (customer, total, rush), some without one,
    a few committed again (version 2), one child."""
    exes: dict[str, Execution] = {}
    for n in range(12):
        values: SearchValues = {
            "customer": f"c-{n % 3}",
            "total": float(n * 25),
            "rush": n % 4 == 0,
        }
        if n == 5:
            values["total"] = None  # no value: matched by no filter on it
        if n == 7:
            values = {}  # a definition without search fields
        eid = ctx.id(f"s-{n:02d}")
        parent = ctx.id("s-00") if n == 9 else None
        exe = Execution(id=eid, definition_id=ctx.id("order" if n % 2 else "refund"), active_path="a",
                        status="finished" if n % 5 == 0 else "running", search=values, parent_id=parent,
                        child_id=eid if parent else None)
        await ctx.store.save(exe)
        if n % 3 == 0:
            await ctx.store.commit(exe, [])
        exes[eid] = exe
    return exes


WHERE: dict[str, tuple[list[Condition], dict[str, Any]]] = {
    "equal": ([Condition("customer", "=", "c-1")], {}),
    "not-equal": ([Condition("customer", "!=", "c-1")], {}),
    "greater": ([Condition("total", ">", 100.0)], {}),
    "at-least": ([Condition("total", ">=", 100.0)], {}),
    "less": ([Condition("total", "<", 100.0)], {}),
    "at-most": ([Condition("total", "<=", 100.0)], {}),
    "bool": ([Condition("rush", "=", True)], {}),
    "and": ([Condition("customer", "=", "c-2"), Condition("total", ">", 100.0)], {}),
    "range": ([Condition("total", ">", 50.0), Condition("total", "<", 200.0)], {}),
    "range-inclusive": ([Condition("total", ">=", 50.0), Condition("total", "<=", 200.0)], {}),
    "range-tightest": ([Condition("total", ">", 25.0), Condition("total", ">=", 50.0),
                        Condition("total", "<", 250.0), Condition("total", "<=", 200.0)], {}),
    "range-and-other": ([Condition("total", "<", 200.0), Condition("customer", "!=", "c-1"),
                         Condition("rush", "=", False)], {}),
    "range-definition": ([Condition("total", ">=", 25.0)], {"definition_id": "order"}),
    "range-empty": ([Condition("total", ">", 100.0), Condition("total", "<", 100.0)], {}),
    "definition": ([Condition("customer", "=", "c-0")], {"definition_id": "order"}),
    "status": ([Condition("total", ">=", 0.0)], {"status": "finished"}),
    "roots": ([Condition("customer", "=", "c-0")], {"roots_only": True}),
    "wrong-type": ([Condition("customer", "=", 1.0)], {}),
    "no-match": ([Condition("customer", "=", "c-9")], {}),
}


def _wanted(exes: dict[str, Execution], where: list[Condition], filters: dict[str, Any], ctx: Ctx) -> list[str]:
    out = []
    for k, e in exes.items():
        if not values_match(e.search, where):
            continue
        if "definition_id" in filters and e.definition_id != ctx.id(filters["definition_id"]):
            continue
        if "status" in filters and e.status != filters["status"]:
            continue
        if filters.get("roots_only") and e.parent_id is not None:
            continue
        out.append(k)
    return sorted(out)


@case("listing", params={k: {"where": w, "filters": f} for k, (w, f) in WHERE.items()})
async def search_filters_with_paging(ctx: Ctx, where: list[Condition], filters: dict[str, Any]) -> None:
    """``where`` conditions (``= != > >= < <=``, ANDed) select the executions whose search values meet them,
    alone and with the other filters, by pages; a value that is absent or of another type matches nothing."""
    exes = await populate_search(ctx)
    wanted = _wanted(exes, where, filters, ctx)
    for limit in (1, 2, 100):
        got = await ctx.collect(limit, where=where, **scoped(ctx, filters))
        expect_eq(sorted(s.id for s in got), wanted,
                  f"the ids listed where {[str(c) for c in where]} with {filters} by pages of {limit}")


@case("listing")
async def search_ranges_page_through_ties(ctx: Ctx) -> None:
    """A listing with number ranges only pages through executions that share a value without skipping or
    repeating one, whatever the page size, and a value moved out of the range by a commit leaves it."""
    totals = [10.0, 10.0, 10.0, 20.0, 20.0, 30.0, 5.0, 10.0, 20.0]
    exes = []
    for n, total in enumerate(totals):
        exe = Execution(id=ctx.id(f"rt-{n}"), definition_id=ctx.id("order"), active_path="a",
                        search={"total": total})
        await ctx.store.save(exe)
        exes.append(exe)
    for where in ([Condition("total", ">=", 10.0), Condition("total", "<", 30.0)],
                  [Condition("total", ">", 5.0)], [Condition("total", "<=", 20.0)]):
        wanted = sorted(e.id for e in exes if values_match(e.search, where))
        for limit in (1, 2, 3, 4, 100):
            got = [s.id for s in await ctx.collect(limit, where=where, definition_id=ctx.id("order"))]
            expect_eq(sorted(got), wanted, f"the ids listed where {[str(c) for c in where]} by pages of {limit}")
            expect_eq(len(got), len(set(got)), f"no id listed twice where {[str(c) for c in where]}")
    exes[0].search = {"total": 99.0}
    await ctx.store.commit(exes[0], [])
    got = [s.id for s in await ctx.collect(2, where=[Condition("total", "<", 30.0)], definition_id=ctx.id("order"))]
    expect(exes[0].id not in got, f"{exes[0].id} (now total=99) listed where total<30: {got}")


@case("listing")
async def search_follows_commits(ctx: Ctx) -> None:
    """A commit that changes a search value moves the execution in the index: the old value no longer finds
    it, the new one does; a value that goes away finds it no more."""
    exe = Execution(id=ctx.id("sc-1"), definition_id=ctx.id("order"), active_path="a",
                    search={"customer": "c-1", "total": 10.0})
    await ctx.store.save(exe)
    exe.search = {"customer": "c-2", "total": 10.0}
    await ctx.store.commit(exe, [])
    expect_eq([s.id for s in await ctx.listed(where=[Condition("customer", "=", "c-1")])], [],
              "the listing where customer=c-1 after it changed to c-2")
    expect_eq([s.id for s in await ctx.listed(where=[Condition("customer", "=", "c-2")])], [exe.id],
              "the listing where customer=c-2 after the change")
    exe.search = {"customer": None, "total": 10.0}
    await ctx.store.commit(exe, [])
    expect_eq([s.id for s in await ctx.listed(where=[Condition("customer", "=", "c-2")])], [],
              "the listing where customer=c-2 once the value is gone")
    expect_eq([s.id for s in await ctx.listed(where=[Condition("total", "=", 10.0)])], [exe.id],
              "the listing where total=10 (unchanged)")


@case("listing")
async def search_refuses_bad_conditions(ctx: Ctx) -> None:
    """A condition with an unknown operator, a malformed name or an ordered comparison of a string is
    refused with InvalidSearch (a ValueError), before anything is read."""
    for bad in ([Condition("total", "~", 1.0)], [Condition("no such", "=", "x")],
                [Condition("customer", ">", "c-1")], [Condition("total", "=", float("nan"))]):
        with expect_raises(InvalidSearch, f"list_executions(where={bad!r})"):
            await ctx.store.list_executions(where=bad)
