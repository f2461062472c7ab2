"""Checks of the commit's compare-and-swap (``commit_cas``) and of ``load`` (``load``).

A commit that loses the version compare-and-swap writes none of its side effects and raises
:class:`~durastate.errors.StoreConflict`; the in-memory version bump is undone. ``load`` round-trips an
execution exactly (durable stores: a distinct snapshot; in-memory stores: the very object).
"""

from __future__ import annotations

from typing import Any

from durastate.engine.model import ChildRef, Event, Execution
from durastate.errors import StoreConflict
from durastate.store.base import TimerOp
from durastate.testing._kit import Ctx, Expectation, SkipCase, case, expect, expect_eq, expect_raises


def new_exe(ctx: Ctx, name: str = "e1", **kw: Any) -> Execution:
    """A fresh execution of this check (id ``prefix + name``; definition ``prefix + "order"``)."""
    kw.setdefault("definition_id", ctx.id("order"))
    return Execution(id=ctx.id(name), **kw)


def rival(exe: Execution) -> Execution:
    """A second, independent object for the same execution (what another process would have loaded)."""
    return exe.model_copy(deep=True)


async def load(ctx: Ctx, name: str) -> Execution:
    """``load`` of an execution the check wrote: it must be there."""
    exe: Execution | None = await ctx.store.load(ctx.id(name))
    if exe is None:
        raise Expectation(f"load({ctx.id(name)!r}) found nothing after it was committed")
    return exe


async def stale_commit(ctx: Ctx, stale: Execution, trace: bool = True) -> None:
    """A commit carrying every kind of side effect; it must lose the CAS."""
    with expect_raises(StoreConflict, f"a commit of a stale copy of {stale.id!r} (version {stale.version})"):
        await ctx.store.commit(
            stale,
            [(stale.id, ctx.ev("lost-targeted")), (None, ctx.ev("lost-untargeted"))],
            processed_event_id="lost-event",
            timers=[TimerOp("schedule", "lost.path", 5.0)],
            spawns=[(f"{stale.id}.9", "lost.region", {"k": 1})],
            trace={"step": "lost"} if trace else None,
        )


# -- CAS: insert and update -------------------------------------------------------------------------


@case("commit_cas")
async def load_missing_is_none(ctx: Ctx) -> None:
    """``load`` of an id never written returns None."""
    expect_eq(await ctx.store.load(ctx.id("nope")), None, "load of an unknown id")


@case("commit_cas")
async def insert_then_update_bumps_version(ctx: Ctx) -> None:
    """``save`` inserts at version 1; each commit bumps the version by one, in memory and stored."""
    exe = new_exe(ctx)
    expect_eq(exe.version, 0, "a new execution's version")
    await ctx.store.save(exe)
    expect_eq(exe.version, 1, "the version after save (insert)")
    loaded = await load(ctx, "e1")
    expect_eq(loaded.version, 1, "the stored version after save")
    loaded.context["n"] = 1
    await ctx.store.commit(loaded, [])
    expect_eq(loaded.version, 2, "the version after a commit")
    again = await load(ctx, "e1")
    expect_eq((again.version, again.context), (2, {"n": 1}), "(version, context) loaded after the commit")


@case("commit_cas")
async def same_object_commits_repeatedly(ctx: Ctx) -> None:
    """One object committed again and again never conflicts with itself."""
    exe = new_exe(ctx)
    for n in range(5):
        exe.context["n"] = n
        await ctx.store.commit(exe, [])
    expect_eq(exe.version, 5, "the version after five commits of one object")
    loaded = await load(ctx, "e1")
    expect_eq((loaded.version, loaded.context), (5, {"n": 4}), "(version, context) loaded")


@case("commit_cas")
async def replacement_object_at_the_expected_version_is_no_conflict(ctx: Ctx) -> None:
    """A different object at the stored version commits (the CAS compares versions, not objects)."""
    exe = new_exe(ctx)
    await ctx.store.save(exe)
    other = rival(exe)
    other.status = "finished"
    await ctx.store.commit(other, [])
    expect_eq(other.version, 2, "the replacement's version after its commit")
    loaded = await load(ctx, "e1")
    expect_eq((loaded.status, loaded.version), ("finished", 2), "(status, version) loaded")


@case("commit_cas")
async def two_inserts_of_one_id_second_conflicts(ctx: Ctx) -> None:
    """A second insert of an existing id raises StoreConflict(expected=0) and changes nothing."""
    a = new_exe(ctx, context={"who": "a"})
    b = new_exe(ctx, context={"who": "b"})
    await ctx.store.save(a)
    with expect_raises(StoreConflict, "a second insert (version 0) of an existing id") as info:
        await ctx.store.save(b)
    expect_eq(info.value.execution_id, ctx.id("e1"), "StoreConflict.execution_id")
    expect_eq(info.value.expected, 0, "StoreConflict.expected")
    expect(info.value.found in (1, None), f"StoreConflict.found: expected 1 or None, got {info.value.found!r}")
    expect_eq(b.version, 0, "the losing object's version (its bump undone)")
    loaded = await load(ctx, "e1")
    expect_eq((loaded.context, loaded.version), ({"who": "a"}, 1), "(context, version) loaded")


@case("commit_cas")
async def two_objects_racing_one_id_loser_conflicts(ctx: Ctx) -> None:
    """Of two copies at one version, the second to commit raises StoreConflict; the first one's write stays."""
    exe = new_exe(ctx)
    await ctx.store.save(exe)
    first, second = rival(exe), rival(exe)
    first.context["winner"] = "first"
    await ctx.store.commit(first, [])
    second.context["winner"] = "second"
    with expect_raises(StoreConflict, "the commit of the second copy at the same version") as info:
        await ctx.store.commit(second, [])
    expect_eq(info.value.expected, 1, "StoreConflict.expected")
    expect(info.value.found in (2, None), f"StoreConflict.found: expected 2 or None, got {info.value.found!r}")
    loaded = await load(ctx, "e1")
    expect_eq((loaded.context, loaded.version), ({"winner": "first"}, 2), "(context, version) loaded")


@case("commit_cas")
async def stale_commit_writes_nothing_and_restores_version(ctx: Ctx) -> None:
    """A commit that loses the CAS writes no outbox entry, spawn, timer, dedupe mark or trace step."""
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [], trace={"step": "start"})
    stale = rival(exe)
    winner = rival(exe)
    await ctx.store.commit(winner, [])
    before_version = stale.version
    stale.context["lost"] = True
    await stale_commit(ctx, stale)
    expect_eq(stale.version, before_version, "the stale object's version after losing (the bump undone)")
    expect_eq(await ctx.outbox(), [], "the outbox after a lost commit")
    expect_eq(await ctx.spawns(), [], "the pending spawns after a lost commit")
    expect_eq(await ctx.due(1e12), [], "the timers after a lost commit")
    expect(not await ctx.store.is_processed(ctx.id("e1"), "lost-event"),
           "a lost commit's processed_event_id must not be marked")
    expect_eq([t.get("step") for t in await ctx.store.read_trace(ctx.id("e1"))], ["start"],
              "the trace after a lost commit")
    loaded = await load(ctx, "e1")
    expect("lost" not in loaded.context and loaded.version == 2,
           f"the stored execution is the winner's (version 2, no 'lost'), got version {loaded.version} "
           f"context {loaded.context!r}")


@case("commit_cas")
async def conflicting_insert_writes_nothing(ctx: Ctx) -> None:
    """An insert that loses (the id exists) writes none of its side effects either."""
    await ctx.store.save(new_exe(ctx))
    await stale_commit(ctx, new_exe(ctx))
    expect_eq(await ctx.outbox(), [], "the outbox after a lost insert")
    expect_eq(await ctx.spawns(), [], "the pending spawns after a lost insert")
    expect_eq(await ctx.due(1e12), [], "the timers after a lost insert")
    expect(not await ctx.store.is_processed(ctx.id("e1"), "lost-event"),
           "a lost insert's processed_event_id must not be marked")
    expect_eq(await ctx.store.read_trace(ctx.id("e1")), [], "the trace after a lost insert")


@case("commit_cas")
async def retry_after_conflict_succeeds(ctx: Ctx) -> None:
    """After a conflict, reloading and committing again lands (with its outbox entry)."""
    exe = new_exe(ctx)
    await ctx.store.save(exe)
    stale = rival(exe)
    await ctx.store.commit(rival(exe), [])
    with expect_raises(StoreConflict, "a commit of a stale copy"):
        await ctx.store.commit(stale, [(None, ctx.ev())])
    fresh = await load(ctx, "e1")
    await ctx.store.commit(fresh, [(None, ctx.ev("again"))], processed_event_id="x")
    expect_eq(fresh.version, 3, "the version after the retried commit")
    expect_eq([e.event.name for e in await ctx.outbox()], ["again"], "the outbox after the retry")


# -- load: identity vs durable, JSON round trip ----------------------------------------------------


def rich_exe(ctx: Ctx) -> Execution:
    rid = ctx.id("rich-1")
    return Execution(
        id=rid,
        definition_id=ctx.id("order"),
        definition_fqn="pkg.mod:build",
        status="running",
        outcome=None,
        error=None,
        active_path="fork",
        root_path=None,
        history={"active": "active.b"},
        context={"n": 3, "f": 0.1 + 0.2, "s": "héllo ✓ \"q\" \\", "l": [1, [2, {"x": None}]], "b": True,
                 "big": 2**53 + 1, "neg": -7.5e-12, "empty": {}},
        parent_id=None,
        child_id=None,
        children={f"{rid}.1": ChildRef(path="fork.r1"), f"{rid}.2": ChildRef(path="fork.r2", kind="invoke",
                                                                          status="finished", outcome="ok")},
        invoke_seq=2,
        timers={"active": 1_700_000_000.123456, "~send:s-1": 1_700_000_002.0},
        sends={"~send:s-1": Event(id=f"{rid}:1:1", name="later", data={"n": 1}, send_id="s-1", origin=rid)},
        created_at=1_700_000_000.5,
        updated_at=1_700_000_001.25,
    )


@case("load")
async def load_round_trips_exactly(ctx: Ctx) -> None:
    """Every field survives save and load: floats, big ints, unicode, nesting, children, timers."""
    exe = rich_exe(ctx)
    await ctx.store.save(exe)
    loaded = await load(ctx, "rich-1")
    if ctx.caps.durable:
        expect(loaded is not exe, "a durable store's load returns a distinct object (capability durable=True)")
    else:
        expect(loaded is exe, "an in-memory store's load returns the very object saved (durable=False)")
    expect_eq(loaded, exe, "the execution loaded")
    expect_eq(loaded.model_dump(), exe.model_dump(), "the execution loaded, field by field")
    expect_eq(Execution.model_validate_json(loaded.model_dump_json()), loaded, "the loaded execution's JSON")


LARGE_CONTEXT_BYTES = 1_000_000
"""The context size of :func:`large_context_round_trips`: past DynamoDB's 400 KB item limit (its store
keeps such an execution in S3, a claim check), held in the row by the SQL stores."""


@case("load")
async def large_context_round_trips(ctx: Ctx) -> None:
    """A 1 MB context is stored, loaded whole, edited (a plain write and a commit with side effects), and a
    stale copy of it still loses the compare-and-swap. (DynamoDB: open the store with a context bucket.)"""
    exe = new_exe(ctx, context={"doc": "a" * LARGE_CONTEXT_BYTES, "n": 1})
    await ctx.store.save(exe)
    loaded = await load(ctx, "e1")
    expect_eq(loaded.context, exe.context, "a 1 MB context loaded")
    stale = rival(loaded)
    exe.context = {"doc": "b" * LARGE_CONTEXT_BYTES, "n": 2}
    await ctx.store.commit(exe, [(None, ctx.ev("large-out"))], processed_event_id="large-in",
                           timers=[TimerOp("schedule", "large.wait", 50.0)])
    edited = await load(ctx, "e1")
    expect_eq((edited.version, edited.context), (2, exe.context), "the edited 1 MB context, at version 2")
    with expect_raises(StoreConflict, "a commit of a stale copy of a large execution"):
        await ctx.store.save(stale)
    exe.context = {"n": 3}
    await ctx.store.save(exe)
    expect_eq((await load(ctx, "e1")).context, {"n": 3}, "the context after shrinking back to a few bytes")


@case("load")
async def a_context_left_alone_stays_whole(ctx: Ctx) -> None:
    """``context_unchanged=True`` (stores that declare ``commit_keeps_context``): a commit that says its context
    is the one stored keeps that context whole, a commit that does not say so writes its change, and a stale
    copy still loses the compare-and-swap."""
    if not getattr(ctx.store, "commit_keeps_context", False):
        raise SkipCase("this store's commit takes no context_unchanged (commit_keeps_context is not set)")
    large = {f"k{i:04d}": {"n": i, "s": "x" * 60} for i in range(1000)}
    exe = new_exe(ctx, context=large)
    await ctx.store.save(exe)
    loaded = await load(ctx, "e1")
    stale = rival(loaded)
    loaded.active_path = "b"
    await ctx.store.commit(loaded, [(None, ctx.ev("kept-out"))], processed_event_id="kept-1",
                           timers=[TimerOp("schedule", "kept.wait", 50.0)], context_unchanged=True)
    kept = await load(ctx, "e1")
    expect_eq((kept.version, kept.active_path, kept.context), (2, "b", large),
              "(version, active_path, context) after a commit that left the context alone")
    kept.context = {**kept.context, "k0000": "changed", "added": [1]}
    await ctx.store.commit(kept, [], processed_event_id="kept-2")
    await ctx.store.commit(kept, [], processed_event_id="kept-3", context_unchanged=True)
    expect_eq((await load(ctx, "e1")).context, kept.context, "the context after a change, then a commit without one")
    with expect_raises(StoreConflict, "a commit of a stale copy that says its context is unchanged"):
        await ctx.store.commit(stale, [], processed_event_id="kept-stale", context_unchanged=True)


@case("load")
async def durable_load_is_a_distinct_snapshot(ctx: Ctx) -> None:
    """A durable store's load is a snapshot: changes not committed do not show in the next load."""
    exe = new_exe(ctx, context={"n": 1})
    await ctx.store.save(exe)
    first = await load(ctx, "e1")
    exe.context["n"] = 99  # not committed
    second = await load(ctx, "e1")
    if ctx.caps.durable:
        expect(first is not second, "two loads of a durable store return distinct objects")
        expect_eq(second.context, {"n": 1}, "the context loaded (a change not committed must not show)")
    else:
        expect(first is exe and second is exe, "an in-memory store's load returns the very object saved")
