"""Checks of what a commit writes besides the execution: the outbox (``outbox_order``), the dedupe marks
(``dedupe``), the timers (``timers``) and the child-spawn intents (``spawns``)."""

from __future__ import annotations

from durastate.engine.model import ChildRef
from durastate.errors import EventAlreadyProcessed, StoreConflict
from durastate.store.base import TimerOp
from durastate.testing._kit import Ctx, SkipCase, case, expect, expect_eq, expect_raises
from durastate.testing.cases_commit import load, new_exe, rival

# -- outbox ----------------------------------------------------------------------------------------


@case("outbox_order")
async def outbox_order_and_ack(ctx: Ctx) -> None:
    """Emitted events are pending in commit order, with increasing seqs never reused; acking is idempotent.
    An event keeps what it says of where it came from (its send id and origin)."""
    exe = new_exe(ctx)
    e1, e3 = ctx.ev("a", n=1), ctx.ev("c", n=3)
    e2 = ctx.ev("b", n=2).model_copy(update={"send_id": "s-2", "origin": exe.id})
    await ctx.store.commit(exe, [("t1", e1), ("t2", e2)])
    await ctx.store.commit(exe, [("t1", e3)])
    pending = await ctx.outbox()
    expect_eq([(p.target_id, p.event) for p in pending], [("t1", e1), ("t2", e2), ("t1", e3)],
              "the pending outbox (target, event) in commit order")
    seqs = [p.seq for p in pending]
    expect(seqs == sorted(seqs) and len(set(seqs)) == 3, f"outbox seqs increase and are distinct, got {seqs}")
    await ctx.store.ack_outbox(pending[1].seq)
    expect_eq([p.event.name for p in await ctx.outbox()], ["a", "c"], "the outbox after acking the middle entry")
    await ctx.store.ack_outbox(pending[1].seq)  # acking twice is harmless
    await ctx.store.ack_outbox(pending[0].seq)
    await ctx.store.ack_outbox(pending[2].seq)
    expect_eq(await ctx.outbox(), [], "the outbox after acking everything")
    await ctx.store.commit(exe, [("t3", ctx.ev("d"))])
    later = await ctx.outbox()
    expect_eq([p.event.name for p in later], ["d"], "the outbox after a later commit")
    expect(later[0].seq > max(seqs), f"seqs are never reused: {later[0].seq} after {max(seqs)}")


@case("outbox_order", exclusive=True)
async def pending_reads_take_the_oldest_first_up_to_a_limit(ctx: Ctx) -> None:
    """``pending_outbox(n)``/``pending_spawns(n)`` return the n oldest entries, in order."""
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [(f"t{n}", ctx.ev(f"e{n}", n=n)) for n in range(5)],
                           spawns=[(f"{exe.id}.{n}", "r", {"n": n}) for n in range(4)])
    expect_eq([p.event.name for p in await ctx.store.pending_outbox(2)], ["e0", "e1"], "pending_outbox(2)")
    expect_eq([p.event.name for p in await ctx.store.pending_outbox(limit=10)], [f"e{n}" for n in range(5)],
              "pending_outbox(limit=10)")
    expect_eq(await ctx.store.pending_outbox(0), [], "pending_outbox(0)")
    expect_eq([s.context["n"] for s in await ctx.store.pending_spawns(3)], [0, 1, 2], "pending_spawns(3)")
    expect_eq(len(await ctx.store.pending_spawns()), 4, "the number of pending spawns")


@case("outbox_order")
async def untargeted_emits(ctx: Ctx) -> None:
    """An emit without a target (a notification) is kept with ``target_id`` None, its data intact."""
    exe = new_exe(ctx)
    note = ctx.ev("order.shipped", eid="n-1", order={"id": 7, "items": ["x", "y"]}, ok=True)
    await ctx.store.commit(exe, [(None, note), ("other", ctx.ev("poke"))])
    pending = await ctx.outbox()
    expect_eq((pending[0].target_id, pending[0].event), (None, note), "the untargeted entry")
    expect_eq(pending[1].target_id, "other", "the targeted entry's target")


@case("outbox_order")
async def outbox_event_round_trips(ctx: Ctx) -> None:
    """An outbox event comes back equal, with its id."""
    e = ctx.ev("data", eid="evt-42", nested={"a": [1, 2.5, None, "ü"]}, flag=False)
    await ctx.store.commit(new_exe(ctx), [("x", e)])
    got = (await ctx.outbox())[0].event
    expect_eq(got, e, "the outbox event")
    expect_eq(got.id, ctx.id("evt-42"), "the outbox event's id")


# -- dedupe ----------------------------------------------------------------------------------------


@case("dedupe")
async def dedupe_marks(ctx: Ctx) -> None:
    """``processed_event_id`` marks the event for that execution only; marking twice is harmless."""
    exe = new_exe(ctx)
    e1 = ctx.id("e1")
    expect(not await ctx.store.is_processed(e1, "ev-1"), "no event is processed before any commit")
    await ctx.store.commit(exe, [], processed_event_id="ev-1")
    expect(await ctx.store.is_processed(e1, "ev-1"), "a committed processed_event_id is processed")
    expect(not await ctx.store.is_processed(e1, "ev-2"), "another event is not processed")
    expect(not await ctx.store.is_processed(ctx.id("other"), "ev-1"), "marks are per execution")
    await ctx.store.commit(exe, [])  # no processed id: nothing marked
    expect(not await ctx.store.is_processed(e1, "ev-2"), "a commit without processed_event_id marks nothing")
    await ctx.store.commit(exe, [], processed_event_id="ev-1")  # marking twice is harmless
    expect(await ctx.store.is_processed(e1, "ev-1") and exe.version == 3,
           f"marking an event twice commits normally (version 3), got version {exe.version}")


@case("dedupe", params={"fast": {"path": "fast"}, "multi": {"path": "multi"}})
async def a_checked_commit_refuses_an_event_already_applied_and_writes_nothing(ctx: Ctx, path: str) -> None:
    """``check_event=True`` (stores that declare ``commit_checks_event``): the commit is the dedupe check."""
    if not getattr(ctx.store, "commit_checks_event", False):
        raise SkipCase("this store's commit does not check events (commit_checks_event is not set)")
    checking = ctx.store
    e1 = ctx.id("e1")
    exe = new_exe(ctx, context={"n": 1})
    await checking.commit(exe, [], processed_event_id="ev-1", check_event=True)  # a new event: committed
    expect(await ctx.store.is_processed(e1, "ev-1") and exe.version == 1,
           "a checked commit of a new event is committed and marks it")
    emits = [(e1, ctx.ev("out"))] if path == "multi" else []
    exe.context["n"] = 2
    with expect_raises(EventAlreadyProcessed, "a checked commit of an event already marked") as info:
        await checking.commit(exe, emits, processed_event_id="ev-1", check_event=True,
                              timers=[TimerOp("schedule", "p", 9.0)] if path == "multi" else ())
    expect(isinstance(info.value, StoreConflict), "EventAlreadyProcessed is a StoreConflict")
    expect_eq(info.value.event_id, "ev-1", "EventAlreadyProcessed.event_id")
    expect_eq(exe.version, 1, "the version after the refused commit (the bump undone)")
    stored = await load(ctx, "e1")
    expect_eq((stored.version, stored.context), (1, {"n": 1}), "(version, context) stored after the refusal")
    expect_eq(await ctx.outbox(), [], "the outbox after the refused commit")
    expect_eq(await ctx.due(100.0), [], "the timers after the refused commit")
    await checking.commit(exe, emits, processed_event_id="ev-2", check_event=True)  # the next one lands
    stored = await load(ctx, "e1")
    expect_eq((stored.version, stored.context), (2, {"n": 2}), "(version, context) after the next event")
    stale = rival(stored)
    stored.context["n"] = 3
    await ctx.store.commit(stored, [], processed_event_id="ev-3")
    with expect_raises(StoreConflict, "a checked commit of a stale copy with a new event") as lost:
        await checking.commit(stale, [], processed_event_id="ev-4", check_event=True)
    expect(not isinstance(lost.value, EventAlreadyProcessed),
           "a stale copy with a new event is a plain lost CAS, not EventAlreadyProcessed")
    expect(not await ctx.store.is_processed(e1, "ev-4"), "the stale commit's event must not be marked")


@case("dedupe")
async def load_for_event(ctx: Ctx) -> None:
    """``load_for_event`` returns the execution and whether the event was applied to it, in one read."""
    e1 = ctx.id("e1")
    expect_eq(await ctx.store.load_for_event(e1, "ev-1"), (None, False), "load_for_event of an unknown id")
    exe = new_exe(ctx, context={"k": "v"})
    await ctx.store.commit(exe, [], processed_event_id="ev-0")
    loaded, done = await ctx.store.load_for_event(e1, "ev-1")
    expect_eq((loaded, done), (exe, False), "load_for_event of an event not applied")
    if not ctx.caps.durable:
        expect(loaded is exe, "an in-memory store's load_for_event returns the very object committed")
    await ctx.store.commit(exe, [], processed_event_id="ev-1")
    loaded, done = await ctx.store.load_for_event(e1, "ev-1")
    expect(done is True and loaded is not None and loaded.version == 2,
           f"load_for_event after the event was applied: expected (version 2, True), got ({loaded!r}, {done!r})")
    expect_eq((await ctx.store.load_for_event(e1, "ev-0"))[1], True, "an earlier event is still applied")
    expect_eq(await ctx.store.load_for_event(ctx.id("nope"), "ev-1"), (None, False),
              "load_for_event of an unknown id")


# -- timers ----------------------------------------------------------------------------------------


@case("timers")
async def timer_upsert_and_due(ctx: Ctx) -> None:
    """Re-arming a timer replaces it; a timer is due when ``fire_at <= now``."""
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [], timers=[TimerOp("schedule", "active", 100.0)])
    await ctx.store.commit(exe, [], timers=[TimerOp("schedule", "active", 200.0)])  # re-arm replaces
    expect_eq(await ctx.due(150.0), [], "due_timers(150) after re-arming at 200")
    expect_eq(await ctx.due(200.0), [(ctx.id("e1"), "active", 200.0)], "due_timers(200)")


@case("timers")
async def timers_oldest_first(ctx: Ctx) -> None:
    """``due_timers`` lists the due timers oldest first, across executions."""
    exes = {name: new_exe(ctx, name) for name in "abc"}
    for name, path, at in [("a", "p", 30.5), ("b", "p", 10.25), ("a", "q", 20.0), ("c", "p", 99.0)]:
        await ctx.store.commit(exes[name], [], timers=[TimerOp("schedule", path, at)])
    expect_eq(await ctx.due(50.0), [(ctx.id("b"), "p", 10.25), (ctx.id("a"), "q", 20.0), (ctx.id("a"), "p", 30.5)],
              "due_timers(50)")


@case("timers")
async def timers_in_a_window(ctx: Ctx) -> None:
    """``due_timers(now, since)`` lists the timers with ``since <= fire_at <= now`` (both bounds included),
    oldest first; without ``since`` the range is open below (an overdue timer is never left out)."""
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [], timers=[TimerOp("schedule", p, at) for p, at in
                                           [("a", 1.0), ("b", 20.0), ("c", 30.5), ("d", 90.0)]])
    e = ctx.id("e1")
    expect_eq(await ctx.due(30.5, 20.0), [(e, "b", 20.0), (e, "c", 30.5)], "due_timers(30.5, since=20)")
    expect_eq(await ctx.due(89.0, 30.75), [], "due_timers(89, since=30.75)")
    expect_eq(await ctx.due(10.0, 50.0), [], "due_timers with since after now")
    expect_eq(await ctx.due(30.5), [(e, "a", 1.0), (e, "b", 20.0), (e, "c", 30.5)], "due_timers(30.5)")


@case("timers")
async def timer_fire_at_round_trips_exactly(ctx: Ctx) -> None:
    """A timer's ``fire_at`` comes back exactly (no rounding), and deleting it by that value works."""
    at = 1_700_000_000.123456789
    await ctx.store.commit(new_exe(ctx), [], timers=[TimerOp("schedule", "s.t", at)])
    due = await ctx.due(at)
    expect_eq(due, [(ctx.id("e1"), "s.t", at)], "due_timers(fire_at)")
    await ctx.store.delete_timer(*due[0])
    expect_eq(await ctx.due(at + 1), [], "due_timers after delete_timer")


@case("timers")
async def timer_cancel(ctx: Ctx) -> None:
    """A cancel removes the timer; cancelling a timer never armed is harmless."""
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [], timers=[TimerOp("schedule", "a", 1.0), TimerOp("schedule", "b", 2.0)])
    await ctx.store.commit(exe, [], timers=[TimerOp("cancel", "a"), TimerOp("cancel", "never-armed")])
    expect_eq(await ctx.due(10.0), [(ctx.id("e1"), "b", 2.0)], "due_timers after cancelling 'a'")


@case("timers")
async def schedule_then_cancel_in_one_commit(ctx: Ctx) -> None:
    """Timer ops of one commit apply in order: cancel then schedule leaves the new timer."""
    exe = new_exe(ctx)
    await ctx.store.commit(exe, [], timers=[TimerOp("schedule", "a", 1.0)])
    await ctx.store.commit(exe, [], timers=[TimerOp("cancel", "a"), TimerOp("schedule", "a", 5.0)])
    expect_eq(await ctx.due(10.0), [(ctx.id("e1"), "a", 5.0)], "due_timers after cancel + schedule")


@case("timers")
async def delete_timer_is_guarded_by_fire_at(ctx: Ctx) -> None:
    """``delete_timer`` deletes only the timer armed at that ``fire_at``: one re-armed since survives."""
    exe = new_exe(ctx)
    e1 = ctx.id("e1")
    await ctx.store.commit(exe, [], timers=[TimerOp("schedule", "a", 1.0)])
    [due] = await ctx.due(5.0)
    await ctx.store.commit(exe, [], timers=[TimerOp("schedule", "a", 3.0)])  # re-armed after the sweep read it
    await ctx.store.delete_timer(*due)  # stale: a no-op
    expect_eq(await ctx.due(5.0), [(e1, "a", 3.0)], "due_timers after a stale delete_timer")
    await ctx.store.delete_timer(e1, "a", 3.0)
    expect_eq(await ctx.due(5.0), [], "due_timers after delete_timer")
    await ctx.store.delete_timer(e1, "a", 3.0)  # already gone: harmless


@case("timers")
async def timers_are_per_execution(ctx: Ctx) -> None:
    """Timers with the same path on two executions are separate."""
    await ctx.store.commit(new_exe(ctx, "x"), [], timers=[TimerOp("schedule", "p", 1.0)])
    await ctx.store.commit(new_exe(ctx, "y"), [], timers=[TimerOp("schedule", "p", 2.0)])
    await ctx.store.delete_timer(ctx.id("x"), "p", 1.0)
    expect_eq(await ctx.due(5.0), [(ctx.id("y"), "p", 2.0)], "due_timers after deleting x's timer")


# -- spawns ----------------------------------------------------------------------------------------


@case("spawns")
async def spawns_in_order_with_snapshotted_context(ctx: Ctx) -> None:
    """Spawn intents are pending in order, each with a snapshot of its context; acking is idempotent."""
    p, q = ctx.id("p"), ctx.id("q")
    exe = new_exe(ctx, "p")
    context = {"amount": 10, "items": ["a"]}
    await ctx.store.commit(exe, [], spawns=[(f"{p}.1", "fork.r1", context), (f"{p}.2", "fork.r2", {"z": None})])
    context["amount"] = 999  # a later mutation of the parent's dict must not reach the intent
    await ctx.store.commit(new_exe(ctx, "q"), [], spawns=[(f"{q}.1", "fork.r1", {})])
    pending = await ctx.spawns()
    expect_eq([(s.parent_id, s.child_id, s.root_path, s.context) for s in pending], [
        (p, f"{p}.1", "fork.r1", {"amount": 10, "items": ["a"]}),
        (p, f"{p}.2", "fork.r2", {"z": None}),
        (q, f"{q}.1", "fork.r1", {}),
    ], "the pending spawns (parent, child, root path, context)")
    seqs = [s.seq for s in pending]
    expect(seqs == sorted(seqs) and len(set(seqs)) == 3, f"spawn seqs increase and are distinct, got {seqs}")
    await ctx.store.ack_spawn(seqs[0])
    await ctx.store.ack_spawn(seqs[0])
    expect_eq([s.child_id for s in await ctx.spawns()], [f"{p}.2", f"{q}.1"], "the spawns after acking the first")
    await ctx.store.ack_spawn(seqs[1])
    await ctx.store.ack_spawn(seqs[2])
    expect_eq(await ctx.spawns(), [], "the spawns after acking everything")


@case("spawns")
async def spawn_commit_carries_join_expectations(ctx: Ctx) -> None:
    """The commit that spawns children stores the parent's child refs with the intents."""
    p = ctx.id("p")
    exe = new_exe(ctx, "p", active_path="fork")
    exe.children[f"{p}.1"] = ChildRef(path="fork.r1")
    exe.invoke_seq = 1
    await ctx.store.commit(exe, [], spawns=[(f"{p}.1", "fork.r1", {})])
    loaded = await load(ctx, "p")
    expect_eq(loaded.children, {f"{p}.1": ChildRef(path="fork.r1")}, "the parent's children loaded")
    expect_eq(len(await ctx.spawns()), 1, "the number of pending spawns")
