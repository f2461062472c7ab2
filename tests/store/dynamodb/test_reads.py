"""Reads that page, and reads whose cost follows the items they return (not the table)."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine.model import Event, Execution
from durastate.store.base import TimerOp
from durastate.store.dynamodb.sharding import QUEUE_SHARDS, TIMER_SHARDS, execution_shard, queue_shard
from durastate.store.dynamodb.sync import DynamoDBStore

from .conftest import Recorder


def scanned(rec: Recorder, op: str) -> int:
    return sum(int(r.get("ScannedCount", 0)) for name, r in rec.responses if name == op)


def queried(rec: Recorder, table: str) -> list[dict[str, Any]]:
    """The responses of the Queries of one table, in order."""
    return [
        r
        for (op, kw), (_, r) in zip(rec.calls, rec.responses, strict=True)
        if op == "query" and kw["TableName"] == table
    ]


def emit(store: DynamoDBStore, n: int, **data: Any) -> None:
    exe = Execution(id=f"e{n}", definition_id="order")
    store.commit(exe, [(f"t{n}", Event(id=f"ev{n}", name="x", data=data))])


def test_relay_read_follows_pages(store: DynamoDBStore, rec: Recorder) -> None:
    """A shard bigger than one 1 MB Query page comes back whole, and the backlog in seq order."""
    for n in range(12):  # 3 entries of 350 KB per shard: more than a page
        emit(store, n, blob="y" * 350_000)
    rec.reset()
    entries = store.pending_outbox()
    assert [e.event.id for e in entries] == [f"ev{n}" for n in range(12)]
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    pages = queried(rec, store.table("outbox"))
    assert len(pages) > QUEUE_SHARDS and any("LastEvaluatedKey" in r for r in pages)
    assert rec.ops().count("scan") == 1  # only the probe of one item (is anything pending?)


def test_a_relay_pass_reads_about_its_budget_not_the_backlog(store: DynamoDBStore, rec: Recorder) -> None:
    for n in range(300):
        emit(store, n)
    rec.reset()
    entries = store.pending_outbox(20)
    assert [e.event.id for e in entries] == [f"ev{n}" for n in range(20)]
    read = sum(int(r["ScannedCount"]) for r in queried(rec, store.table("outbox")))
    assert read <= 2 * 20 + QUEUE_SHARDS  # about the budget (shards fill unevenly), not 300
    assert rec.ops()[0] == "scan" and set(rec.ops()[1:]) == {"query"} and len(rec.ops()) <= 2 * QUEUE_SHARDS + 1


def test_uneven_shards_still_give_the_oldest_in_order(store: DynamoDBStore, rec: Recorder) -> None:
    """Acks out of order (a failed delivery kept, the rest acked) leave shards uneven: the merge reads
    further pages of the shards that bound it, and still returns exactly the oldest entries."""
    for n in range(120):
        emit(store, n)
    everything = store.pending_outbox()
    keep_shard = queue_shard(everything[0].seq)
    acked = [e.seq for e in everything[:80] if queue_shard(e.seq) != keep_shard]
    for seq in acked:
        store.ack_outbox(seq)
    left = [e.seq for e in store.pending_outbox()]
    assert left == sorted(left) and left == [e.seq for e in everything if e.seq not in acked]
    assert len(acked) > 30  # the other shards really were drained ahead of this one
    rec.reset()
    assert [e.seq for e in store.pending_outbox(25)] == left[:25]
    assert len(queried(rec, store.table("outbox"))) > QUEUE_SHARDS  # the kept shard was read on
    for limit in (1, 3, 7, 30, len(left) - 1, len(left), len(left) + 1, 1000):
        assert [e.seq for e in store.pending_outbox(limit)] == left[:limit], limit
    assert store.pending_outbox(0) == []


def test_an_executions_entries_share_one_shard_in_order(store: DynamoDBStore) -> None:
    for eid in ("x", "y", "z", "w"):
        exe = Execution(id=eid, definition_id="order")
        for n in range(3):  # commits of one and of several emits
            store.commit(exe, [("t", Event(id=f"{eid}{n}-{k}", name="x")) for k in range(n + 1)])
    entries = store.pending_outbox()
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    for eid in ("x", "y", "z", "w"):
        mine = [e for e in entries if e.event.id.startswith(eid)]
        assert len(mine) == 6
        assert {queue_shard(e.seq) for e in mine} == {str(execution_shard(eid))}
        assert [e.event.id for e in mine] == [f"{eid}{n}-{k}" for n in range(3) for k in range(n + 1)]
    assert {str(execution_shard(e)) for e in ("x", "y", "z", "w")} != {"0"}  # they do spread


def test_a_commit_landing_between_a_passs_queries_is_never_delivered_out_of_order(
    store: DynamoDBStore, rec: Recorder
) -> None:
    """An execution commits while a pass reads the shards one after another — before, between and after
    the query of its own shard: the pass delivers its entries all or in order, never a later one alone."""
    exe = Execution(id="x", definition_id="order")
    home = str(execution_shard("x"))
    for shard in range(QUEUE_SHARDS):
        for e in store.pending_outbox():
            store.ack_outbox(e.seq)
        fired = False

        def commit_during_read(real: Any, kwargs: dict[str, Any], shard: int = shard) -> Any:
            nonlocal fired
            response = real(**kwargs)
            if not fired and kwargs["ExpressionAttributeValues"][":sh"] == {"S": str(shard)}:
                fired = True  # after the query of `shard`: two commits, two emits each
                two = [("t", Event(id=f"a{shard}", name="x")), ("t", Event(id=f"b{shard}", name="x"))]
                store.commit(exe, two)
                store.commit(exe, [("t", Event(id=f"c{shard}", name="x"))])
            return response

        rec.after["query"] = commit_during_read
        seen = [e.event.id for e in store.pending_outbox(shards=range(QUEUE_SHARDS))]  # as a stream trigger
        del rec.after["query"]
        assert seen in ([], [f"a{shard}", f"b{shard}", f"c{shard}"]), (shard, home, seen)
        assert seen == ([] if shard >= int(home) else [f"a{shard}", f"b{shard}", f"c{shard}"])
        assert [e.event.id for e in store.pending_outbox()] == [f"a{shard}", f"b{shard}", f"c{shard}"]


def test_cursor_paging_over_several_pages(store: DynamoDBStore) -> None:
    for n in range(25):
        store.save(
            Execution(id=f"x-{n:02d}", definition_id="order", status="running" if n % 2 else "finished")
        )
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = store.list_executions(limit=10, cursor=cursor)
        pages += 1
        seen += [s.id for s in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
        assert len(page.items) == 10
    assert pages == 3 and seen == [f"x-{n:02d}" for n in range(25)]  # id order across statuses
    with pytest.raises(ValueError, match="invalid cursor"):
        store.list_executions(cursor="eyJub3QiOiAiYSBjdXJzb3IifQ==")  # valid base64 JSON, wrong shape


def test_sweep_reads_only_the_due_timers(store: DynamoDBStore, rec: Recorder) -> None:
    for n in range(3):
        exe = Execution(id=f"e{n}", definition_id="order")
        far = [TimerOp("schedule", f"later{i}", 10_000.0 + i) for i in range(90)]
        store.commit(exe, [], timers=[*far, TimerOp("schedule", "soon", 10.0 + n)])
    rec.reset()
    assert store.due_timers(50.0) == [("e0", "soon", 10.0), ("e1", "soon", 11.0), ("e2", "soon", 12.0)]
    # a Scan of one item (is any timer armed?), then the due index, one query per shard
    assert rec.ops() == ["scan"] + ["query"] * TIMER_SHARDS
    assert scanned(rec, "query") == 3  # 273 timers armed, 3 read


def test_idle_sweeps_and_relay_passes_are_one_request_per_table(store: DynamoDBStore, rec: Recorder) -> None:
    """No timer armed, nothing pending: a sweep is one Scan of at most one item, a relay pass one per table
    (the idle floor of a deployment: a sweep a minute, a backstop pass every few minutes)."""
    assert store.due_timers(50.0) == [] and store.pending_outbox(100) == [] and store.pending_spawns(100) == []
    assert rec.ops() == ["scan", "scan", "scan"]


def test_a_pass_over_named_shards_reads_only_those(store: DynamoDBStore, rec: Recorder) -> None:
    """The relay's stream trigger names the shards its inserts went to; the pass Queries only those."""
    for n in range(40):
        emit(store, n)
    everything = store.pending_outbox()
    home = execution_shard("e7")
    rec.reset()
    mine = store.pending_outbox(100, shards={home})
    assert rec.ops() == ["query"]
    assert [e.seq for e in mine] == [e.seq for e in everything if queue_shard(e.seq) == str(home)]
    assert "e7" in {e.target_id and e.target_id.replace("t", "e") for e in mine}


def test_listing_by_status_reads_the_page(store: DynamoDBStore, rec: Recorder) -> None:
    for n in range(60):
        store.save(
            Execution(id=f"x-{n:02d}", definition_id="order", status="running" if n % 6 == 0 else "finished")
        )
    rec.reset()
    page = store.list_executions(status="running", limit=5)
    assert [s.id for s in page.items] == ["x-00", "x-06", "x-12", "x-18", "x-24"] and page.next_cursor
    assert scanned(rec, "query") <= 6  # limit + 1 index entries, not 60 executions
    [(_, batch)] = [c for c in rec.calls if c[0] == "batch_get_item"]
    assert sum(len(r["Keys"]) for r in batch["RequestItems"].values()) == 5


def test_delete_timer_guard(store: DynamoDBStore) -> None:
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], timers=[TimerOp("schedule", "s", 1.5)])
    store.commit(exe, [], timers=[TimerOp("schedule", "s", 7.25)])
    store.delete_timer("e1", "s", 1.5)  # stale sweep: no-op
    assert store.due_timers(10.0) == [("e1", "s", 7.25)]
    store.delete_timer("e1", "s", 7.25)
    store.delete_timer("e1", "gone", 1.0)  # absent: no-op
    assert store.due_timers(10.0) == []


def test_untargeted_and_spawn_round_trip(store: DynamoDBStore, ddb: Any) -> None:
    exe = Execution(id="p", definition_id="order")
    store.commit(
        exe, [(None, Event(id="n1", name="note"))], spawns=[("p.1", "fork.r1", {"a": [1, {"b": None}]})]
    )
    [entry] = store.pending_outbox()
    assert entry.target_id is None and entry.event.id == "n1"
    [spawn] = store.pending_spawns()
    assert (spawn.parent_id, spawn.child_id, spawn.root_path, spawn.context) == (
        "p",
        "p.1",
        "fork.r1",
        {"a": [1, {"b": None}]},
    )
    store.ack_outbox(entry.seq)
    store.ack_spawn(spawn.seq)
    assert store.pending_outbox() == [] and store.pending_spawns() == []
