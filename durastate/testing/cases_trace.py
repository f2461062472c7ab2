"""Checks of the trace ring (``trace_ring``): steps recorded by a commit or appended, indexed, trimmed —
and, with ``history`` on, kept whole (``read_history``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from durastate.store.base import DEFAULT_TRACE_MAX
from durastate.testing._kit import Ctx, case, expect, expect_eq
from durastate.testing.cases_commit import load, new_exe, rival, stale_commit


@asynccontextmanager
async def ring(ctx: Ctx, trace_max: int | None, history: bool | None = None) -> AsyncIterator[None]:
    """Run with the store's ``trace_max`` (and ``history``, when given) set (restored afterwards)."""
    before, kept = ctx.store.trace_max, ctx.store.history
    ctx.store.trace_max = trace_max
    if history is not None:
        ctx.store.history = history
    try:
        yield
    finally:
        ctx.store.trace_max, ctx.store.history = before, kept


@case("trace_ring")
async def trace_via_commit_and_append(ctx: Ctx) -> None:
    """A commit's ``trace`` and ``append_trace`` add steps, each with its ``index`` from 0."""
    e1 = ctx.id("e1")
    expect_eq(await ctx.store.read_trace(e1), [], "the trace of an execution never traced")
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [], trace={"event": "durastate.start", "to": "idle", "ctx": {"a": [1, None]}})
    await ctx.store.append_trace(e1, {"event": "note"})
    expect_eq(await ctx.store.read_trace(e1), [
        {"event": "durastate.start", "to": "idle", "ctx": {"a": [1, None]}, "index": 0},
        {"event": "note", "index": 1},
    ], "the trace")
    expect_eq(await ctx.store.read_trace(ctx.id("other")), [], "another execution's trace")


@case("trace_ring")
async def trace_index_is_monotonic_and_ring_trims(ctx: Ctx) -> None:
    """With ``trace_max=3`` only the last three steps are kept; the index keeps climbing."""
    e1 = ctx.id("e1")
    async with ring(ctx, 3):
        exe = new_exe(ctx)
        for n in range(7):
            await ctx.store.commit(exe, [], trace={"n": n})
        steps = await ctx.store.read_trace(e1)
        expect_eq([s["index"] for s in steps], [4, 5, 6], "the trace indexes kept (trace_max=3)")
        expect_eq([s["n"] for s in steps], [4, 5, 6], "the trace steps kept (trace_max=3)")
        await ctx.store.append_trace(e1, {"n": 7})
        expect_eq([s["index"] for s in await ctx.store.read_trace(e1)], [5, 6, 7], "the indexes after an append")
        loaded = await load(ctx, "e1")
        expect_eq(loaded.version, 7, "the execution's version (the trace never touches the execution)")


@case("trace_ring")
async def trace_rings_are_per_execution(ctx: Ctx) -> None:
    """Each execution has its own ring and its own index."""
    a, b = ctx.id("a"), ctx.id("b")
    async with ring(ctx, 2):
        for n in range(3):
            await ctx.store.append_trace(a, {"n": n})
        await ctx.store.append_trace(b, {"n": 0})
        expect_eq([s["index"] for s in await ctx.store.read_trace(a)], [1, 2], "a's trace indexes")
        expect_eq(await ctx.store.read_trace(b), [{"n": 0, "index": 0}], "b's trace")


@case("trace_ring", params={"0": {"trace_max": 0}, "None": {"trace_max": None}})
async def trace_unbounded(ctx: Ctx, trace_max: int | None) -> None:
    """``trace_max`` 0 or None keeps every step."""
    e1 = ctx.id("e1")
    async with ring(ctx, trace_max):
        expect(not ctx.store.trace_max, f"trace_max set to {trace_max!r} reads back falsy")
        for n in range(12):
            await ctx.store.append_trace(e1, {"n": n})
        expect_eq([s["index"] for s in await ctx.store.read_trace(e1)], list(range(12)),
                  f"the trace indexes with trace_max={trace_max!r}")


@case("trace_ring")
async def trace_default_ring_is_200(ctx: Ctx) -> None:
    """A store made with its defaults keeps the last 200 steps."""
    expect_eq(ctx.store.trace_max, DEFAULT_TRACE_MAX, "the default trace_max")
    expect_eq(DEFAULT_TRACE_MAX, 200, "DEFAULT_TRACE_MAX")


@case("trace_ring")
async def trace_explicit_index_is_honoured(ctx: Ctx) -> None:
    """A step that carries its own ``index`` keeps it."""
    e1 = ctx.id("e1")
    await ctx.store.append_trace(e1, {"n": 0})
    await ctx.store.append_trace(e1, {"n": 1, "index": 42})
    await ctx.store.append_trace(e1, {"n": 2})
    expect_eq([s["index"] for s in await ctx.store.read_trace(e1)], [0, 42, 2], "the trace indexes")


@case("trace_ring")
async def cancelled_commit_leaves_no_gap_in_trace(ctx: Ctx) -> None:
    """A commit that lost its CAS records no step (and, ``trace_gapless``, takes no index)."""
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [], trace={"n": 0})
    stale = rival(exe)
    await ctx.store.commit(exe, [], trace={"n": 1})
    await stale_commit(ctx, stale)
    await ctx.store.commit(exe, [], trace={"n": 2})
    steps = await ctx.store.read_trace(ctx.id("e1"))
    expect_eq([s["n"] for s in steps], [0, 1, 2], "the trace steps around a lost commit")
    if ctx.caps.trace_gapless:
        expect_eq([s["index"] for s in steps], [0, 1, 2], "the trace indexes around a lost commit (trace_gapless)")


@case("trace_ring")
async def history_keeps_every_step(ctx: Ctx) -> None:
    """With ``history`` on, ``read_history`` has every step, oldest first, while ``read_trace`` still
    answers the newest ``trace_max``; both indexes are the same."""
    e1 = ctx.id("e1")
    async with ring(ctx, 3, history=True):
        exe = new_exe(ctx)
        for n in range(40):
            await ctx.store.commit(exe, [], trace={"n": n})
        await ctx.store.append_trace(e1, {"n": 40})
        history = await ctx.store.read_history(e1)
        expect_eq([s["n"] for s in history], list(range(41)), "the history's steps (history=True, trace_max=3)")
        expect_eq([s["index"] for s in history], list(range(41)), "the history's indexes")
        expect_eq([s["n"] for s in await ctx.store.read_trace(e1)], [38, 39, 40],
                  "the trace with history kept (the newest trace_max steps)")
        expect_eq(await ctx.store.read_history(ctx.id("other")), [], "the history of an execution never traced")


@case("trace_ring")
async def history_without_keeping_is_the_ring(ctx: Ctx) -> None:
    """With ``history`` off (the default), ``read_history`` answers what the ring kept, oldest first."""
    e1 = ctx.id("e1")
    expect_eq(ctx.store.history, False, "the default history")
    async with ring(ctx, 3):
        exe = new_exe(ctx)
        for n in range(20):
            await ctx.store.commit(exe, [], trace={"n": n})
        history = [s["n"] for s in await ctx.store.read_history(e1)]
        expect(history[-3:] == [17, 18, 19] and 0 not in history,
               f"the history with history off: the ring's steps (newest 17, 18, 19), got {history}")


@case("trace_ring")
async def history_has_no_step_of_a_lost_commit(ctx: Ctx) -> None:
    """A commit that lost its CAS archives nothing: the history is the steps of the commits that landed."""
    async with ring(ctx, 2, history=True):
        exe = new_exe(ctx)
        await ctx.store.commit(exe, [], trace={"n": 0})
        stale = rival(exe)
        await ctx.store.commit(exe, [], trace={"n": 1})
        await stale_commit(ctx, stale)
        for n in (2, 3, 4):
            await ctx.store.commit(exe, [], trace={"n": n})
        expect_eq([s["n"] for s in await ctx.store.read_history(ctx.id("e1"))], [0, 1, 2, 3, 4],
                  "the history around a lost commit")
