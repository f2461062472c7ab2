"""Reads that page, and reads whose cost follows the items they return (not the table)."""

from __future__ import annotations

from typing import Any

import pytest

from harel.engine.model import Event, Execution
from harel.engine.store._base import TimerOp
from harel.engine.store.dynamodb import DynamoDBStore

from .conftest import Recorder


def scanned(rec: Recorder, op: str) -> int:
    return sum(int(r.get("ScannedCount", 0)) for name, r in rec.responses if name == op)


def test_relay_scan_follows_pages(store: DynamoDBStore, rec: Recorder) -> None:
    """A backlog bigger than one 1 MB Scan page comes back whole and in seq order."""
    for n in range(4):
        exe = Execution(id=f"e{n}", definition_id="order")
        store.commit(exe, [(f"t{n}", Event(id=f"big{n}", name="x", data={"blob": "y" * 350_000}))])
    rec.reset()
    entries = store.pending_outbox()
    assert [e.event.id for e in entries] == ["big0", "big1", "big2", "big3"]
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert rec.ops().count("scan") >= 2  # LastEvaluatedKey was followed


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
    assert set(rec.ops()) == {"query"}  # the due index, one query per shard; never a Scan
    assert scanned(rec, "query") == 3  # 273 timers armed, 3 read


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
