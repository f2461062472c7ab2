"""The dedupe check of ``load_for_event`` / ``is_processed``: one GetItem in the common case, exact always.

An applied event id is in the execution item's ``rids`` or, once spilled, in ``processed`` — and then also
in the item's ``spill`` filter. The filter lets a fresh id be ruled out without reading ``processed``; a
false positive, or an item without a filter, only costs the second read.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from bench._meter import Meter
from durastate.engine import DefinitionRegistry, Event, load_definition
from durastate.engine.model import Execution
from durastate.runtime.worker import Worker
from durastate.store.dynamodb.bloom import bloom_may_contain
from durastate.store.dynamodb.limits import item_size
from durastate.store.dynamodb.sync import DynamoDBStore
from tests._aws import boto3_client, shared_moto_server, unique_prefix

from .conftest import Recorder, make_store

COSTS = Path(__file__).resolve().parents[3] / "bench" / "defs" / "costs.yaml"


def stored(ddb: Any, store: Any, execution_id: str) -> dict[str, Any]:
    key = {"id": {"S": execution_id}}
    item: dict[str, Any] = ddb.get_item(TableName=store.table("executions"), Key=key)["Item"]
    return item


def marks(ddb: Any, store: DynamoDBStore) -> set[str]:
    """Every spilled event id: the ids of the chunks (and single marks, written for items without a filter)."""
    items = ddb.scan(TableName=store.table("processed"), ConsistentRead=True)["Items"]
    return {e for i in items for e in (i["ids"]["SS"] if "ids" in i else [i["event_id"]["S"]])}


def apply(store: DynamoDBStore, execution_id: str, event_ids: list[str]) -> None:
    """Apply each event as the worker does: load with the dedupe check, then commit with the mark."""
    for event_id in event_ids:
        exe, seen = store.load_for_event(execution_id, event_id)
        assert not seen, event_id
        exe = exe or Execution(id=execution_id, definition_id="order")
        exe.context["n"] = exe.context.get("n", 0) + 1
        store.commit(exe, [], processed_event_id=event_id)


def test_the_common_path_is_one_get_item_and_one_read_unit(ddb: Any) -> None:
    """Counted from the real requests (botocore event hooks, billed as the cost bench bills them)."""
    prefix = unique_prefix()
    meter = Meter.for_durastate(prefix)
    meter.attach(ddb, "dynamodb")
    store = make_store(ddb, prefix=prefix)
    apply(store, "e1", [f"ev{n}" for n in range(40)])  # 4 spills of 8 ids: the filter is in use
    assert len(stored(ddb, store, "e1")["spill"]["B"]) == 128
    fresh = DynamoDBStore(ddb, prefix=prefix)  # nothing cached: the same single read
    for n, s in enumerate((store, fresh, store, fresh)):
        meter.tag = f"load{n}"
        exe, seen = s.load_for_event("e1", f"new{n}")
        assert exe is not None and not seen
        t = meter.tallies[meter.tag]
        assert dict(t.requests) == {"GetItem": 1} and t.rru == 1.0
        meter.tag = f"commit{n}"
        s.commit(exe, [], processed_event_id=f"new{n}")
        writes = dict(meter.tallies[meter.tag].requests)
        assert writes in ({"PutItem": 1}, {"PutItem": 2})  # the put, or a chunk of spilled ids first
    meter.tag = "dup"
    assert store.load_for_event("e1", "new3")[1]  # in rids: the same single read says so
    assert dict(meter.tallies["dup"].requests) == {"GetItem": 1}


def test_the_state_only_item_stays_within_one_write_unit(ddb: Any) -> None:
    """The cost bench's state-only step (``bump``) with uuid event ids: rids full, the filter full."""
    prefix = unique_prefix()
    meter = Meter.for_durastate(prefix)
    meter.attach(ddb, "dynamodb")
    store = make_store(ddb, prefix=prefix)
    reg = DefinitionRegistry()
    reg.register(load_definition(COSTS))
    worker = Worker(store, reg, clock=lambda: 1_700_000_000.0, trace=False)
    start = {"definition_id": "costs", "context": {"peer": "peer"}}
    worker.handle("x0", Event(id="x0:start", name="durastate.start", data=start))
    sizes, spills, false_positives = [], 0, 0
    for n in range(96):
        meter.tag = f"bump{n}"
        # uuid-sized ids, deterministic (the filter's rare false positive costs one Query of the chunks)
        worker.handle("x0", Event(id=str(uuid.uuid5(uuid.NAMESPACE_OID, str(n))), name="bump"))
        t = meter.tallies[meter.tag]
        false_positives += t.requests["Query"]
        assert t.requests["GetItem"] == 1 and t.rru == 1.0 + t.requests["Query"] and t.requests["PutItem"] in (1, 2)
        # the execution's Put is 1 write unit; a spill adds one chunk of 1 write unit, every few events
        assert t.wru == t.requests["PutItem"]
        spills += t.requests["PutItem"] - 1
        sizes.append(item_size(stored(ddb, store, "x0")))
    assert len(stored(ddb, store, "x0")["spill"]["B"]) == 128
    assert max(sizes) <= 1024, max(sizes)
    assert false_positives <= 2  # about 1 % at this many spilled ids
    # the item keeps as many ids as fit in its kilobyte (uuids packed to 16 bytes): one spill in about 20
    assert spills <= 96 // 20


def test_spilled_duplicates_are_still_detected_after_many_events(ddb: Any) -> None:
    prefix = unique_prefix()
    store = make_store(ddb, prefix=prefix, recent_events=2)
    applied = [f"ev{n}" for n in range(300)]
    apply(store, "e1", applied)
    item = stored(ddb, store, "e1")
    recent = {v["S"] for v in item["rids"]["L"]}
    assert len(recent) <= 2 and recent | marks(ddb, store) == set(applied)
    assert all(bloom_may_contain(item["spill"]["B"], e) for e in set(applied) - recent)  # no id lost
    fresh = DynamoDBStore(ddb, prefix=prefix, recent_events=2)
    # Every applied id through a store that knows nothing yet; every third (spread over all the spilled
    # chunks) through the one that wrote them. Ids never applied: with 300 in a 1024-bit filter, about one
    # in five is a false positive, answered from the marks.
    for s, ids in ((fresh, applied), (store, applied[::3])):
        for event_id in ids:
            exe, seen = s.load_for_event("e1", event_id)
            assert exe is not None and seen, event_id
            assert s.is_processed("e1", event_id)
        assert not any(s.is_processed("e1", f"other{n}") for n in range(0, 300, 2))
        assert not s.load_for_event("e1", "other")[1]


def test_a_false_positive_reads_the_mark_and_answers_right(rec: Recorder, ddb: Any) -> None:
    store = make_store(rec, recent_events=1)
    apply(store, "e1", [f"ev{n}" for n in range(40)])
    item = stored(ddb, store, "e1")
    bloom = item["spill"]["B"]
    recent = {v["S"] for v in item["rids"]["L"]}
    # an id never applied that the filter cannot rule out
    probe = next(p for n in range(1_000_000) if bloom_may_contain(bloom, p := f"probe{n}"))
    assert probe not in marks(ddb, store)
    rec.reset()
    exe, seen = store.load_for_event("e1", probe)
    assert exe is not None and not seen
    assert [(op, kw["TableName"]) for op, kw in rec.calls][:2] == [
        ("get_item", store.table("executions")),
        ("query", store.table("processed")),  # the execution's chunks, newest first
    ]
    assert not store.is_processed("e1", probe)
    spilled = next(f"ev{n}" for n in range(40) if f"ev{n}" not in recent)
    rec.reset()
    assert store.load_for_event("e1", spilled)[1]  # the filter says maybe, its chunk says yes
    assert rec.ops()[:2] == ["get_item", "query"]
    rec.reset()
    ruled_out = next(p for n in range(1000) if not bloom_may_contain(bloom, p := f"fresh{n}"))
    assert not store.load_for_event("e1", ruled_out)[1]
    assert rec.ops() == ["get_item"]


def test_a_missing_execution_is_one_read(store: DynamoDBStore, rec: Recorder) -> None:
    """No execution, no mark: marks are only written for ids an existing execution holds (executions
    are never deleted), so the dedupe check needs no second read."""
    assert store.load_for_event("nobody", "ev") == (None, False)
    assert not store.is_processed("nobody", "ev")
    assert rec.ops() == ["get_item", "get_item"]  # one each
    assert {kw["TableName"] for _, kw in rec.calls} == {store.table("executions")}


def test_the_seed_layout_reads_execution_and_mark_together(rec: Recorder) -> None:
    store = make_store(rec, recent_events=0)
    apply(store, "e1", ["ev0", "ev1"])
    rec.reset()
    assert store.load_for_event("e1", "ev0")[1] and not store.load_for_event("e1", "ev9")[1]
    assert rec.ops() == ["batch_get_item", "batch_get_item"]


def test_mixed_layouts_stay_exact(ddb: Any, rec: Recorder) -> None:
    """A seed-layout store writes marks only to ``processed`` and drops the filter; a store that finds
    no filter reads the mark every time (and, knowing that, in the same request)."""
    prefix = unique_prefix()
    fast = make_store(ddb, prefix=prefix)
    apply(fast, "e1", [f"ev{n}" for n in range(5)])
    assert "spill" in stored(ddb, fast, "e1")
    seed = make_store(ddb, prefix=prefix, recent_events=0)
    apply(seed, "e1", ["ev5"])
    item = stored(ddb, seed, "e1")
    assert "spill" not in item and "rids" not in item
    other = make_store(rec, prefix=prefix)
    rec.reset()
    assert not other.load_for_event("e1", "new")[1]
    assert rec.ops() == ["get_item", "get_item"]  # no filter: the mark is read
    assert all(other.load_for_event("e1", f"ev{n}")[1] for n in range(6))
    rec.reset()
    apply(other, "e1", ["ev6"])
    assert rec.ops()[0] == "batch_get_item"  # it saw no filter: execution and mark in one request
    assert "spill" not in stored(ddb, other, "e1")  # the filter never comes back: marks are not in it
    assert all(fast.is_processed("e1", f"ev{n}") for n in range(7)) and not fast.is_processed("e1", "ev7")


def test_a_commit_without_a_load_carries_the_filter(ddb: Any) -> None:
    """A commit of an execution not loaded through this store reads rids and filter with the version."""
    prefix = unique_prefix()
    first = make_store(ddb, prefix=prefix, recent_events=2)
    apply(first, "e1", [f"ev{n}" for n in range(9)])
    exe = first.load("e1")
    assert exe is not None
    second = DynamoDBStore(ddb, prefix=prefix, recent_events=2)
    for n in range(9, 14):
        second.commit(exe, [], processed_event_id=f"ev{n}")
        second._forget("e1")  # as if every commit came from a new process
    fresh = DynamoDBStore(ddb, prefix=prefix, recent_events=2)
    assert all(fresh.is_processed("e1", f"ev{n}") for n in range(14))
    assert not any(fresh.is_processed("e1", f"new{n}") for n in range(50))


async def test_the_async_store_shares_the_filter_and_the_sharded_relay_read() -> None:
    """Over aiobotocore's real HTTP path: the binary filter round-trips, spilled ids are still found,
    a fresh id costs one read, and the relay's sharded read comes back oldest first."""
    from durastate.store.dynamodb.aio import AsyncDynamoDBStore

    url = shared_moto_server().url
    store = await AsyncDynamoDBStore.create(
        prefix=unique_prefix(), endpoint_url=url, region="us-east-1", recent_events=2
    )
    try:
        for n in range(20):
            exe, seen = await store.load_for_event("e1", f"ev{n}")
            assert not seen
            exe = exe or Execution(id="e1", definition_id="order")
            await store.commit(exe, [("t", Event(id=f"out{n}", name="x"))], processed_event_id=f"ev{n}")
        assert all([(await store.load_for_event("e1", f"ev{n}"))[1] for n in range(20)])
        assert not await store.is_processed("e1", "new")
        assert [e.event.id for e in await store.pending_outbox(7)] == [f"out{n}" for n in range(7)]
        client = boto3_client("dynamodb", url)
        assert len(stored(client, store, "e1")["spill"]["B"]) == 128
    finally:
        await store.close()


def test_uuid_ids_are_packed_in_the_item_and_come_back_exactly(ddb: Any) -> None:
    """A uuid (hyphenated or 32-digit hex) is kept in ``rids`` as its bytes, any other id as text; the dedupe
    check answers the same for every form, from the item and after a spill, on a fresh store too."""
    prefix = unique_prefix()
    store = make_store(ddb, prefix=prefix)
    applied = [str(uuid.uuid4()) if n % 3 == 0 else uuid.uuid4().hex if n % 3 == 1 else f"ev-{n}"
               for n in range(60)]
    applied += [str(uuid.uuid4()).upper(), "{" + str(uuid.uuid4()) + "}"]  # not canonical: kept as text
    apply(store, "e1", applied)
    item = stored(ddb, store, "e1")
    kinds = {next(iter(v)) for v in item["rids"]["L"]}
    assert kinds == {"B", "S"}, kinds
    fresh = DynamoDBStore(ddb, prefix=prefix)
    for s in (store, fresh):
        assert all(s.is_processed("e1", e) for e in applied)
        assert all(s.load_for_event("e1", e)[1] for e in applied)
        assert not any(s.is_processed("e1", e) for e in (str(uuid.uuid4()), uuid.uuid4().hex, "ev-x"))
        assert not any(s.is_processed("e1", e.upper()) for e in applied if e.islower() and "-" in e)
