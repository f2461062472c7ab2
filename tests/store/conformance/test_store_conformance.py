"""The store conformance suite: one behavioural contract, run unchanged against every backend.

Written against the synchronous protocol; async stores run through the test adapter (see
``backends.py``). Only behaviour the protocol promises is asserted here — e.g. listing order is not
(DynamoDB lists by Scan), seq values are compared by order, never by value.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine.model import ChildRef, Event, Execution
from durastate.errors import EventAlreadyProcessed, StoreConflict
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    ExecutionStore,
    ExecutionSummary,
    TimerOp,
)

from .backends import Backend
from .conftest import MakeStore


def new_exe(eid: str = "e1", **kw: Any) -> Execution:
    kw.setdefault("definition_id", "order")
    return Execution(id=eid, **kw)


def ev(name: str = "ping", eid: str | None = None, **data: Any) -> Event:
    return Event(id=eid, name=name, data=data) if eid else Event(name=name, data=data)


def rival(exe: Execution) -> Execution:
    """A second, independent object for the same execution (what another process would have loaded)."""
    return exe.model_copy(deep=True)


def stale_commit(store: ExecutionStore, stale: Execution, trace: bool = True) -> None:
    """A commit carrying every kind of side effect; the caller expects it to lose the CAS."""
    with pytest.raises(StoreConflict):
        store.commit(
            stale,
            [(stale.id, ev("lost-targeted")), (None, ev("lost-untargeted"))],
            processed_event_id="lost-event",
            timers=[TimerOp("schedule", "lost.path", 5.0)],
            spawns=[(f"{stale.id}.9", "lost.region", {"k": 1})],
            trace={"step": "lost"} if trace else None,
        )


# -- CAS: insert and update -------------------------------------------------------------------------


def test_load_missing_is_none(store: ExecutionStore) -> None:
    assert store.load("nope") is None


def test_insert_then_update_bumps_version(store: ExecutionStore) -> None:
    exe = new_exe()
    assert exe.version == 0
    store.save(exe)
    assert exe.version == 1
    loaded = store.load("e1")
    assert loaded is not None and loaded.version == 1
    loaded.context["n"] = 1
    store.commit(loaded, [])
    assert loaded.version == 2
    again = store.load("e1")
    assert again is not None and again.version == 2 and again.context == {"n": 1}


def test_same_object_commits_repeatedly(store: ExecutionStore) -> None:
    exe = new_exe()
    for n in range(5):
        exe.context["n"] = n
        store.commit(exe, [])
    assert exe.version == 5
    loaded = store.load("e1")
    assert loaded is not None and loaded.version == 5 and loaded.context == {"n": 4}


def test_replacement_object_at_the_expected_version_is_no_conflict(store: ExecutionStore) -> None:
    exe = new_exe()
    store.save(exe)
    other = rival(exe)
    other.status = "finished"
    store.commit(other, [])
    assert other.version == 2
    loaded = store.load("e1")
    assert loaded is not None and loaded.status == "finished" and loaded.version == 2


def test_two_inserts_of_one_id_second_conflicts(store: ExecutionStore) -> None:
    a = new_exe(context={"who": "a"})
    b = new_exe(context={"who": "b"})
    store.save(a)
    with pytest.raises(StoreConflict) as info:
        store.save(b)
    assert info.value.execution_id == "e1"
    assert info.value.expected == 0
    assert info.value.found in (1, None)
    assert b.version == 0
    loaded = store.load("e1")
    assert loaded is not None and loaded.context == {"who": "a"} and loaded.version == 1


def test_two_objects_racing_one_id_loser_conflicts(store: ExecutionStore) -> None:
    exe = new_exe()
    store.save(exe)
    first, second = rival(exe), rival(exe)
    first.context["winner"] = "first"
    store.commit(first, [])
    second.context["winner"] = "second"
    with pytest.raises(StoreConflict) as info:
        store.commit(second, [])
    assert info.value.expected == 1
    assert info.value.found in (2, None)
    loaded = store.load("e1")
    assert loaded is not None and loaded.context == {"winner": "first"} and loaded.version == 2


def test_stale_commit_writes_nothing_and_restores_version(store: ExecutionStore) -> None:
    exe = new_exe()
    store.commit(exe, [], trace={"step": "start"})
    stale = rival(exe)
    winner = rival(exe)
    store.commit(winner, [])
    before_version = stale.version
    stale.context["lost"] = True
    stale_commit(store, stale)
    assert stale.version == before_version  # the in-memory bump was undone
    assert store.pending_outbox() == []
    assert store.pending_spawns() == []
    assert store.due_timers(1e12) == []
    assert not store.is_processed("e1", "lost-event")
    assert [t.get("step") for t in store.read_trace("e1")] == ["start"]
    loaded = store.load("e1")
    assert loaded is not None and "lost" not in loaded.context and loaded.version == 2


def test_conflicting_insert_writes_nothing(store: ExecutionStore) -> None:
    store.save(new_exe())
    stale_commit(store, new_exe())
    assert store.pending_outbox() == [] and store.pending_spawns() == []
    assert store.due_timers(1e12) == []
    assert not store.is_processed("e1", "lost-event")
    assert store.read_trace("e1") == []


def test_retry_after_conflict_succeeds(store: ExecutionStore) -> None:
    exe = new_exe()
    store.save(exe)
    stale = rival(exe)
    store.commit(rival(exe), [])
    with pytest.raises(StoreConflict):
        store.commit(stale, [(None, ev())])
    fresh = store.load("e1")
    assert fresh is not None
    store.commit(fresh, [(None, ev("again"))], processed_event_id="x")
    assert fresh.version == 3
    assert [e.event.name for e in store.pending_outbox()] == ["again"]


# -- load: identity vs durable, JSON round trip ----------------------------------------------------


def rich_exe() -> Execution:
    return Execution(
        id="rich-1",
        definition_id="order",
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
        children={"rich-1.1": ChildRef(path="fork.r1"), "rich-1.2": ChildRef(path="fork.r2", kind="invoke",
                                                                          status="finished", outcome="ok")},
        invoke_seq=2,
        timers={"active": 1_700_000_000.123456},
        created_at=1_700_000_000.5,
        updated_at=1_700_000_001.25,
    )


def test_load_round_trips_exactly(store: ExecutionStore, backend: Backend) -> None:
    exe = rich_exe()
    store.save(exe)
    loaded = store.load(exe.id)
    assert loaded is not None
    if backend.durable:
        assert loaded is not exe
    else:
        assert loaded is exe
    assert loaded == exe
    assert loaded.model_dump() == exe.model_dump()
    assert Execution.model_validate_json(loaded.model_dump_json()) == loaded


def test_durable_load_is_a_distinct_snapshot(store: ExecutionStore, backend: Backend) -> None:
    exe = new_exe(context={"n": 1})
    store.save(exe)
    first = store.load("e1")
    exe.context["n"] = 99  # not committed
    second = store.load("e1")
    assert first is not None and second is not None
    if backend.durable:
        assert first is not second
        assert second.context == {"n": 1}
    else:
        assert first is exe and second is exe


# -- outbox ----------------------------------------------------------------------------------------


def test_outbox_order_and_ack(store: ExecutionStore) -> None:
    exe = new_exe()
    e1, e2, e3 = ev("a", n=1), ev("b", n=2), ev("c", n=3)
    store.commit(exe, [("t1", e1), ("t2", e2)])
    store.commit(exe, [("t1", e3)])
    pending = store.pending_outbox()
    assert [(p.target_id, p.event) for p in pending] == [("t1", e1), ("t2", e2), ("t1", e3)]
    seqs = [p.seq for p in pending]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    store.ack_outbox(pending[1].seq)
    assert [p.event.name for p in store.pending_outbox()] == ["a", "c"]
    store.ack_outbox(pending[1].seq)  # acking twice is harmless
    store.ack_outbox(pending[0].seq)
    store.ack_outbox(pending[2].seq)
    assert store.pending_outbox() == []
    store.commit(exe, [("t3", ev("d"))])
    later = store.pending_outbox()
    assert [p.event.name for p in later] == ["d"]
    assert later[0].seq > max(seqs)  # seqs are never reused


def test_pending_reads_take_the_oldest_first_up_to_a_limit(store: ExecutionStore) -> None:
    """A relay pass reads only its budget: the oldest entries, in order."""
    exe = new_exe()
    store.commit(exe, [(f"t{n}", ev(f"e{n}", n=n)) for n in range(5)],
                 spawns=[(f"{exe.id}.{n}", "r", {"n": n}) for n in range(4)])
    assert [p.event.name for p in store.pending_outbox(2)] == ["e0", "e1"]
    assert [p.event.name for p in store.pending_outbox(limit=10)] == [f"e{n}" for n in range(5)]
    assert store.pending_outbox(0) == []
    assert [s.context["n"] for s in store.pending_spawns(3)] == [0, 1, 2]
    assert len(store.pending_spawns()) == 4


def test_untargeted_emits(store: ExecutionStore) -> None:
    exe = new_exe()
    note = ev("order.shipped", eid="n-1", order={"id": 7, "items": ["x", "y"]}, ok=True)
    store.commit(exe, [(None, note), ("other", ev("poke"))])
    pending = store.pending_outbox()
    assert pending[0].target_id is None and pending[0].event == note
    assert pending[1].target_id == "other"


def test_outbox_event_round_trips(store: ExecutionStore) -> None:
    e = ev("data", eid="evt-42", nested={"a": [1, 2.5, None, "ü"]}, flag=False)
    store.commit(new_exe(), [("x", e)])
    got = store.pending_outbox()[0].event
    assert got == e and got.id == "evt-42"


# -- dedupe ----------------------------------------------------------------------------------------


def test_dedupe_marks(store: ExecutionStore) -> None:
    exe = new_exe()
    assert not store.is_processed("e1", "ev-1")
    store.commit(exe, [], processed_event_id="ev-1")
    assert store.is_processed("e1", "ev-1")
    assert not store.is_processed("e1", "ev-2")
    assert not store.is_processed("other", "ev-1")  # marks are per execution
    store.commit(exe, [])  # no processed id: nothing marked
    assert not store.is_processed("e1", "ev-2")
    store.commit(exe, [], processed_event_id="ev-1")  # marking twice is harmless
    assert store.is_processed("e1", "ev-1") and exe.version == 3


@pytest.mark.parametrize("path", ["fast", "multi"])
def test_a_checked_commit_refuses_an_event_already_applied_and_writes_nothing(
    store: ExecutionStore, path: str
) -> None:
    """``check_event=True`` (stores that declare ``commit_checks_event``): the commit is the dedupe check."""
    if not getattr(store, "commit_checks_event", False):
        pytest.skip("this store's commit does not check events (the worker always reads first)")
    checking: Any = store
    exe = new_exe(context={"n": 1})
    checking.commit(exe, [], processed_event_id="ev-1", check_event=True)  # a new event: committed
    assert store.is_processed("e1", "ev-1") and exe.version == 1
    emits = [("e1", ev("out"))] if path == "multi" else []
    exe.context["n"] = 2
    with pytest.raises(EventAlreadyProcessed) as info:
        checking.commit(exe, emits, processed_event_id="ev-1", check_event=True,
                        timers=[TimerOp("schedule", "p", 9.0)] if path == "multi" else ())
    assert isinstance(info.value, StoreConflict) and info.value.event_id == "ev-1"
    assert exe.version == 1  # the in-memory bump was undone
    stored = store.load("e1")
    assert stored is not None and stored.version == 1 and stored.context == {"n": 1}
    assert store.pending_outbox() == [] and store.due_timers(100.0) == []
    checking.commit(exe, emits, processed_event_id="ev-2", check_event=True)  # the next one lands
    stored = store.load("e1")
    assert stored is not None and stored.version == 2 and stored.context == {"n": 2}
    stale = rival(stored)
    stored.context["n"] = 3
    store.commit(stored, [], processed_event_id="ev-3")
    with pytest.raises(StoreConflict) as lost:  # a stale copy with a new event: a plain lost CAS
        checking.commit(stale, [], processed_event_id="ev-4", check_event=True)
    assert not isinstance(lost.value, EventAlreadyProcessed)
    assert not store.is_processed("e1", "ev-4")


def test_load_for_event(store: ExecutionStore, backend: Backend) -> None:
    assert store.load_for_event("e1", "ev-1") == (None, False)
    exe = new_exe(context={"k": "v"})
    store.commit(exe, [], processed_event_id="ev-0")
    loaded, done = store.load_for_event("e1", "ev-1")
    assert loaded == exe and done is False
    if not backend.durable:
        assert loaded is exe
    store.commit(exe, [], processed_event_id="ev-1")
    loaded, done = store.load_for_event("e1", "ev-1")
    assert done is True and loaded is not None and loaded.version == 2
    assert store.load_for_event("e1", "ev-0")[1] is True
    assert store.load_for_event("nope", "ev-1") == (None, False)


# -- timers ----------------------------------------------------------------------------------------


def test_timer_upsert_and_due(store: ExecutionStore) -> None:
    exe = new_exe()
    store.commit(exe, [], timers=[TimerOp("schedule", "active", 100.0)])
    store.commit(exe, [], timers=[TimerOp("schedule", "active", 200.0)])  # re-arm replaces
    assert store.due_timers(150.0) == []
    assert store.due_timers(200.0) == [("e1", "active", 200.0)]  # due means fire_at <= now


def test_timers_oldest_first(store: ExecutionStore) -> None:
    exes = {eid: new_exe(eid) for eid in "abc"}
    for eid, path, at in [("a", "p", 30.5), ("b", "p", 10.25), ("a", "q", 20.0), ("c", "p", 99.0)]:
        store.commit(exes[eid], [], timers=[TimerOp("schedule", path, at)])
    assert store.due_timers(50.0) == [("b", "p", 10.25), ("a", "q", 20.0), ("a", "p", 30.5)]


def test_timer_fire_at_round_trips_exactly(store: ExecutionStore) -> None:
    at = 1_700_000_000.123456789
    store.commit(new_exe(), [], timers=[TimerOp("schedule", "s.t", at)])
    [(eid, path, fire_at)] = store.due_timers(at)
    assert (eid, path) == ("e1", "s.t") and fire_at == at
    store.delete_timer(eid, path, fire_at)
    assert store.due_timers(at + 1) == []


def test_timer_cancel(store: ExecutionStore) -> None:
    exe = new_exe()
    store.commit(exe, [], timers=[TimerOp("schedule", "a", 1.0), TimerOp("schedule", "b", 2.0)])
    store.commit(exe, [], timers=[TimerOp("cancel", "a"), TimerOp("cancel", "never-armed")])
    assert store.due_timers(10.0) == [("e1", "b", 2.0)]


def test_schedule_then_cancel_in_one_commit(store: ExecutionStore) -> None:
    exe = new_exe()
    store.commit(exe, [], timers=[TimerOp("schedule", "a", 1.0)])
    store.commit(exe, [], timers=[TimerOp("cancel", "a"), TimerOp("schedule", "a", 5.0)])
    assert store.due_timers(10.0) == [("e1", "a", 5.0)]


def test_delete_timer_is_guarded_by_fire_at(store: ExecutionStore) -> None:
    exe = new_exe()
    store.commit(exe, [], timers=[TimerOp("schedule", "a", 1.0)])
    [due] = store.due_timers(5.0)
    store.commit(exe, [], timers=[TimerOp("schedule", "a", 3.0)])  # re-armed after the sweep read it
    store.delete_timer(*due)  # stale: a no-op
    assert store.due_timers(5.0) == [("e1", "a", 3.0)]
    store.delete_timer("e1", "a", 3.0)
    assert store.due_timers(5.0) == []
    store.delete_timer("e1", "a", 3.0)  # already gone: harmless


def test_timers_are_per_execution(store: ExecutionStore) -> None:
    store.commit(new_exe("x"), [], timers=[TimerOp("schedule", "p", 1.0)])
    store.commit(new_exe("y"), [], timers=[TimerOp("schedule", "p", 2.0)])
    store.delete_timer("x", "p", 1.0)
    assert store.due_timers(5.0) == [("y", "p", 2.0)]


# -- spawns ----------------------------------------------------------------------------------------


def test_spawns_in_order_with_snapshotted_context(store: ExecutionStore) -> None:
    exe = new_exe("p")
    ctx = {"amount": 10, "items": ["a"]}
    store.commit(exe, [], spawns=[("p.1", "fork.r1", ctx), ("p.2", "fork.r2", {"z": None})])
    ctx["amount"] = 999  # a later mutation of the parent's dict must not reach the intent
    store.commit(new_exe("q"), [], spawns=[("q.1", "fork.r1", {})])
    pending = store.pending_spawns()
    assert [(s.parent_id, s.child_id, s.root_path, s.context) for s in pending] == [
        ("p", "p.1", "fork.r1", {"amount": 10, "items": ["a"]}),
        ("p", "p.2", "fork.r2", {"z": None}),
        ("q", "q.1", "fork.r1", {}),
    ]
    seqs = [s.seq for s in pending]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    store.ack_spawn(seqs[0])
    store.ack_spawn(seqs[0])
    assert [s.child_id for s in store.pending_spawns()] == ["p.2", "q.1"]
    store.ack_spawn(seqs[1])
    store.ack_spawn(seqs[2])
    assert store.pending_spawns() == []


def test_spawn_commit_carries_join_expectations(store: ExecutionStore) -> None:
    exe = new_exe("p", active_path="fork")
    exe.children["p.1"] = ChildRef(path="fork.r1")
    exe.invoke_seq = 1
    store.commit(exe, [], spawns=[("p.1", "fork.r1", {})])
    loaded = store.load("p")
    assert loaded is not None and loaded.children == {"p.1": ChildRef(path="fork.r1")}
    assert len(store.pending_spawns()) == 1


# -- trace ring ------------------------------------------------------------------------------------


def test_trace_via_commit_and_append(store: ExecutionStore) -> None:
    assert store.read_trace("e1") == []
    exe = new_exe()
    store.commit(exe, [], trace={"event": "durastate.start", "to": "idle", "ctx": {"a": [1, None]}})
    store.append_trace("e1", {"event": "note"})
    steps = store.read_trace("e1")
    assert steps == [
        {"event": "durastate.start", "to": "idle", "ctx": {"a": [1, None]}, "index": 0},
        {"event": "note", "index": 1},
    ]
    assert store.read_trace("other") == []


def test_trace_index_is_monotonic_and_ring_trims(make_store: MakeStore) -> None:
    store = make_store(trace_max=3)
    exe = new_exe()
    for n in range(7):
        store.commit(exe, [], trace={"n": n})
    steps = store.read_trace("e1")
    assert [s["index"] for s in steps] == [4, 5, 6]
    assert [s["n"] for s in steps] == [4, 5, 6]
    store.append_trace("e1", {"n": 7})
    assert [s["index"] for s in store.read_trace("e1")] == [5, 6, 7]
    loaded = store.load("e1")
    assert loaded is not None and loaded.version == 7  # the trace never touches the execution


def test_trace_rings_are_per_execution(make_store: MakeStore) -> None:
    store = make_store(trace_max=2)
    for n in range(3):
        store.append_trace("a", {"n": n})
    store.append_trace("b", {"n": 0})
    assert [s["index"] for s in store.read_trace("a")] == [1, 2]
    assert store.read_trace("b") == [{"n": 0, "index": 0}]


@pytest.mark.parametrize("trace_max", [0, None])
def test_trace_unbounded(make_store: MakeStore, trace_max: int | None) -> None:
    # 0/None disable trimming. Few steps suffice: trimming itself is proven with a small ring above,
    # and hundreds of commits would make this suite slow on the remote backends.
    store = make_store(trace_max=trace_max)
    assert not store.trace_max
    for n in range(12):
        store.append_trace("e1", {"n": n})
    assert [s["index"] for s in store.read_trace("e1")] == list(range(12))


def test_trace_default_ring_is_200(store: ExecutionStore) -> None:
    assert store.trace_max == DEFAULT_TRACE_MAX == 200


def test_trace_explicit_index_is_honoured(store: ExecutionStore) -> None:
    store.append_trace("e1", {"n": 0})
    store.append_trace("e1", {"n": 1, "index": 42})
    store.append_trace("e1", {"n": 2})
    assert [s["index"] for s in store.read_trace("e1")] == [0, 42, 2]


def test_cancelled_commit_leaves_no_gap_in_trace(store: ExecutionStore, backend: Backend) -> None:
    exe = new_exe()
    store.commit(exe, [], trace={"n": 0})
    stale = rival(exe)
    store.commit(exe, [], trace={"n": 1})
    stale_commit(store, stale)
    store.commit(exe, [], trace={"n": 2})
    steps = store.read_trace("e1")
    assert [s["n"] for s in steps] == [0, 1, 2]
    if backend.trace_gapless:
        assert [s["index"] for s in steps] == [0, 1, 2]


# -- listing ---------------------------------------------------------------------------------------


def collect(store: ExecutionStore, limit: int, **filters: Any) -> list[ExecutionSummary]:
    items: list[ExecutionSummary] = []
    cursor: str | None = None
    for _ in range(1000):
        page = store.list_executions(limit=limit, cursor=cursor, **filters)
        assert len(page.items) <= limit
        if page.next_cursor is not None:
            assert len(page.items) == limit  # only the last page may be short
        items.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return items
    raise AssertionError("paging did not terminate")


def populate(store: ExecutionStore) -> dict[str, Execution]:
    exes: dict[str, Execution] = {}
    plan = [
        ("order", "running", None), ("order", "finished", None), ("order", "failed", None),
        ("order", "running", "x-03"), ("payment", "running", None), ("payment", "cancelled", "x-00"),
        ("order", "finished", "x-00"), ("payment", "finished", None), ("order", "running", None),
        ("order", "cancelled", None), ("payment", "running", "x-04"),
    ]
    for n, (defn, status, parent) in enumerate(plan):
        exe = Execution(id=f"x-{n:02d}", definition_id=defn, status=status, parent_id=parent,
                        child_id=f"x-{n:02d}" if parent else None, active_path=f"s{n}",
                        outcome="ok" if status == "finished" else None)
        store.save(exe)
        if n % 3 == 0:
            store.commit(exe, [])  # a few at version 2
        exes[exe.id] = exe
    return exes


def test_list_summaries(store: ExecutionStore) -> None:
    exes = populate(store)
    page = store.list_executions()
    assert page.next_cursor is None
    assert sorted(page.items, key=lambda s: s.id) == [ExecutionSummary.of(exes[k]) for k in sorted(exes)]


def test_list_empty(store: ExecutionStore) -> None:
    page = store.list_executions()
    assert page.items == [] and page.next_cursor is None


@pytest.mark.parametrize("limit", [1, 3, 4, 11, 12])
def test_list_paging(store: ExecutionStore, limit: int) -> None:
    exes = populate(store)
    first = store.list_executions(limit=limit)
    if limit < len(exes):
        assert first.next_cursor is not None and len(first.items) == limit
    got = collect(store, limit)
    ids = [s.id for s in got]
    assert len(ids) == len(set(ids)) and set(ids) == set(exes)


@pytest.mark.parametrize(
    ("filters", "expect"),
    [
        ({"definition_id": "payment"}, lambda e: e.definition_id == "payment"),
        ({"status": "running"}, lambda e: e.status == "running"),
        ({"status": ["finished", "cancelled"]}, lambda e: e.status in ("finished", "cancelled")),
        ({"status": ("failed",)}, lambda e: e.status == "failed"),
        ({"roots_only": True}, lambda e: e.parent_id is None),
        ({"definition_id": "order", "status": ["running"], "roots_only": True},
         lambda e: e.definition_id == "order" and e.status == "running" and e.parent_id is None),
        ({"definition_id": "nope"}, lambda e: False),
        ({"status": []}, lambda e: False),
    ],
    ids=["definition", "one-status", "status-list", "status-tuple", "roots", "combined", "no-match",
         "empty-status-list"],
)
def test_list_filters_with_paging(store: ExecutionStore, filters: dict[str, Any], expect: Any) -> None:
    exes = populate(store)
    want = {k for k, e in exes.items() if expect(e)}
    for limit in (2, 100):
        got = collect(store, limit, **filters)
        assert sorted(s.id for s in got) == sorted(want)
        for s in got:
            assert s == ExecutionSummary.of(exes[s.id])


def test_list_reflects_updates(store: ExecutionStore) -> None:
    exe = new_exe(status="running")
    store.save(exe)
    exe.status = "finished"
    exe.outcome = "done"
    exe.active_path = "done"
    store.commit(exe, [])
    assert [s.id for s in store.list_executions(status="running").items] == []
    [s] = store.list_executions(status="finished").items
    assert (s.version, s.outcome, s.active_path) == (2, "done", "done")


def test_list_bad_cursor(store: ExecutionStore) -> None:
    with pytest.raises(ValueError):
        store.list_executions(cursor="%%%not-a-cursor%%%")
