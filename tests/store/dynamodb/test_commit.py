"""The commit: CAS races, all-or-nothing, the trace ring, dedupe marks, the cost of a state-only step."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from durastate.engine.model import Event, Execution
from durastate.errors import StoreConflict
from durastate.store.base import TimerOp
from durastate.store.dynamodb.core import SPILL_CHUNK_PREFIX
from durastate.store.dynamodb.limits import item_size
from durastate.store.dynamodb.sync import DynamoDBStore
from tests._aws import boto3_client, shared_moto_server, unique_prefix

from .conftest import Recorder, client_error, make_store


def everything(store: DynamoDBStore, exe: Execution, event_id: str, n: int) -> None:
    """A commit with every kind of side effect."""
    store.commit(
        exe,
        [("t1", Event(id=f"out-{n}", name="go")), (None, Event(id=f"note-{n}", name="note"))],
        processed_event_id=event_id,
        timers=[TimerOp("schedule", f"s{n}", 100.0 + n)],
        spawns=[(f"{exe.id}.{n}", "fork.r1", {"n": n})],
        trace={"n": n},
    )


def table_items(ddb: Any, store: DynamoDBStore, name: str) -> list[dict[str, Any]]:
    return list(ddb.scan(TableName=store.table(name), ConsistentRead=True)["Items"])


def test_two_racing_inserts_of_one_id_one_wins() -> None:
    """Two writers (own clients, real HTTP) insert the same id at once: exactly one conflicts."""
    url = shared_moto_server().url
    prefix = unique_prefix()
    first = DynamoDBStore(boto3_client("dynamodb", url), prefix=prefix)
    first.ensure_tables()
    second = DynamoDBStore(boto3_client("dynamodb", url), prefix=prefix)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def insert(name: str, store: DynamoDBStore) -> None:
        exe = Execution(id="race", definition_id="order", context={"writer": name})
        barrier.wait()
        try:
            everything(store, exe, f"start-{name}", 1)
            outcomes[name] = exe.version
        except StoreConflict as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=insert, args=(n, s)) for n, s in (("a", first), ("b", second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [n for n, o in outcomes.items() if o == 1]
    losses = [o for o in outcomes.values() if isinstance(o, StoreConflict)]
    assert len(wins) == 1 and len(losses) == 1
    assert (losses[0].expected, losses[0].found) == (0, 1)
    stored = first.load("race")
    assert stored is not None and stored.context == {"writer": wins[0]}
    assert first.is_processed("race", f"start-{wins[0]}")
    loser = "b" if wins[0] == "a" else "a"
    assert not first.is_processed("race", f"start-{loser}")
    assert len(first.pending_outbox()) == 2 and len(first.pending_spawns()) == 1


def test_a_conflict_leaves_nothing_of_its_transaction(ddb: Any, store: DynamoDBStore) -> None:
    exe = Execution(id="e1", definition_id="order")
    everything(store, exe, "ev0", 0)
    stale = store.load("e1")
    assert stale is not None
    everything(store, exe, "ev1", 1)
    before = {
        name: table_items(ddb, store, name) for name in ("outbox", "spawns", "timers", "processed", "trace")
    }
    before_exe = ddb.get_item(TableName=store.table("executions"), Key={"id": {"S": "e1"}})["Item"]
    with pytest.raises(StoreConflict) as err:
        everything(store, stale, "ev-stale", 9)
    assert (err.value.expected, err.value.found) == (1, 2)
    assert stale.version == 1  # the in-memory bump is undone
    after = {name: table_items(ddb, store, name) for name in before}
    assert after == before
    assert ddb.get_item(TableName=store.table("executions"), Key={"id": {"S": "e1"}})["Item"] == before_exe
    assert not store.is_processed("e1", "ev-stale")


def test_trace_ring_cancelled_commit_leaves_no_gap(ddb: Any, rec: Recorder) -> None:
    store = make_store(rec, trace_max=3)
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], trace={"n": 0})
    stale = store.load("e1")
    assert stale is not None
    store.commit(exe, [], trace={"n": 1})
    with pytest.raises(StoreConflict):
        store.commit(stale, [], trace={"n": "lost"})
    for n in range(2, 6):
        store.commit(exe, [], trace={"n": n})
    steps = store.read_trace("e1")
    assert [(s["n"], s["index"]) for s in steps] == [(3, 3), (4, 4), (5, 5)]
    idx = sorted(int(i["idx"]["N"]) for i in table_items(ddb, store, "trace"))
    assert idx == [3, 4, 5]  # exactly the ring: Put K + Delete K-3 in each transaction


def test_trace_index_from_a_fresh_store_continues_the_ring(ddb: Any) -> None:
    prefix = unique_prefix()
    first = make_store(ddb, prefix=prefix)
    exe = Execution(id="e1", definition_id="order")
    first.commit(exe, [], trace={"n": 0})
    first.commit(exe, [], trace={"n": 1})
    second = DynamoDBStore(ddb, prefix=prefix)  # no remembered index: reads the stored max
    again = second.load("e1")
    assert again is not None
    second.commit(again, [], trace={"n": 2})
    assert [s["index"] for s in second.read_trace("e1")] == [0, 1, 2]


def test_state_only_commit_is_one_conditional_put(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], processed_event_id="start")
    rec.reset()
    loaded, seen = store.load_for_event("e1", "ev1")
    assert loaded is not None and not seen
    loaded.active_path = "b"
    store.commit(loaded, [], processed_event_id="ev1")
    assert rec.ops() == ["get_item", "put_item"]  # two requests per state-only transition
    put = rec.calls[1][1]
    assert put["ConditionExpression"] == "#v = :ov"
    assert item_size(put["Item"]) <= 1024  # a small execution stays within one write unit
    assert store.load_for_event("e1", "ev1") == (store.load("e1"), True)


def test_dedupe_marks_survive_the_recent_window(ddb: Any, rec: Recorder) -> None:
    store = make_store(rec, recent_events=4)
    exe = Execution(id="e1", definition_id="order")
    for n in range(11):
        store.commit(exe, [], processed_event_id=f"ev{n}")
    assert all(store.is_processed("e1", f"ev{n}") for n in range(11))
    assert not store.is_processed("e1", "ev11")
    item = ddb.get_item(TableName=store.table("executions"), Key={"id": {"S": "e1"}})["Item"]
    recent = [v["S"] for v in item["rids"]["L"]]
    chunks = table_items(ddb, store, "processed")
    marks = sorted(i for c in chunks for i in c["ids"]["SS"])
    assert len(recent) <= 4
    assert sorted(recent + marks) == sorted(f"ev{n}" for n in range(11))
    # the spilled ids were written before the execution write that dropped them, one item per spill
    assert rec.ops().count("put_item") == 11 + 2 and len(chunks) == 2
    assert all(c["event_id"]["S"].startswith(SPILL_CHUNK_PREFIX) for c in chunks)


def test_recent_events_zero_is_the_seed_layout(ddb: Any, rec: Recorder) -> None:
    store = make_store(rec, recent_events=0)
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], processed_event_id="ev0")
    assert rec.ops() == ["transact_write_items"]
    put, mark = rec.calls[0][1]["TransactItems"]
    assert mark["Put"]["TableName"] == store.table("processed")
    assert "rids" not in put["Put"]["Item"]
    assert store.is_processed("e1", "ev0")


def test_commit_of_an_execution_loaded_elsewhere_reads_its_version_first(ddb: Any) -> None:
    prefix = unique_prefix()
    writer = make_store(ddb, prefix=prefix)
    exe = Execution(id="e1", definition_id="order")
    writer.commit(exe, [], processed_event_id="ev0")
    other = DynamoDBStore(ddb, prefix=prefix)
    other.commit(exe, [], processed_event_id="ev1")  # version 1 matches: fine, rids carried over
    assert other.is_processed("e1", "ev0") and other.is_processed("e1", "ev1")
    stale = Execution(id="e1", definition_id="order", version=1)
    with pytest.raises(StoreConflict) as err:
        DynamoDBStore(ddb, prefix=prefix).commit(stale, [], processed_event_id="ev2")
    assert (err.value.expected, err.value.found) == (1, 2)


def test_a_retried_put_that_had_landed_is_not_a_conflict(store: DynamoDBStore, rec: Recorder) -> None:
    """botocore retried our conditional Put after the first attempt landed: the CAS then fails on
    our own write. The stored item is exactly ours, so the commit succeeded."""
    exe = Execution(id="e1", definition_id="order")
    store.save(exe)

    def land_then_fail(real: Any, kwargs: dict[str, Any]) -> Any:
        real(**kwargs)
        try:
            real(**kwargs)
        except Exception as exc:
            exc.response["ResponseMetadata"]["RetryAttempts"] = 1  # type: ignore[attr-defined]
            raise
        raise AssertionError("the second put should fail its condition")

    rec.after["put_item"] = land_then_fail
    exe.context["x"] = 1
    store.save(exe)
    assert exe.version == 2
    loaded = store.load("e1")
    assert loaded is not None and loaded.context == {"x": 1} and loaded.version == 2


def test_identical_insert_by_someone_else_is_still_a_conflict(store: DynamoDBStore) -> None:
    store.save(Execution(id="e1", definition_id="order"))
    with pytest.raises(StoreConflict):
        store.save(Execution(id="e1", definition_id="order"))


def test_cancel_then_schedule_of_one_path_in_one_commit_ends_armed(store: DynamoDBStore) -> None:
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], timers=[TimerOp("schedule", "s", 5.0)])
    store.commit(exe, [], timers=[TimerOp("cancel", "s"), TimerOp("schedule", "s", 9.5)])
    assert store.due_timers(100.0) == [("e1", "s", 9.5)]


def test_consistent_reads_where_staleness_would_be_wrong(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [("e2", Event(name="x"))], spawns=[("e1.1", "p.r", {})])
    rec.reset()
    store.load("e1")
    store.load_for_event("e1", "ev")
    store.is_processed("e1", "ev")
    store.pending_outbox()
    store.pending_spawns()
    store.read_trace("e1")
    for op, kwargs in rec.calls:
        if op == "batch_get_item":
            assert all(r["ConsistentRead"] for r in kwargs["RequestItems"].values())
        else:
            assert kwargs["ConsistentRead"] is True, op


def test_an_unknown_error_re_raises_and_keeps_the_version(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order")
    store.save(exe)
    rec.fail["put_item"] = [client_error("ValidationException", "PutItem")]
    with pytest.raises(Exception, match="ValidationException"):
        store.save(exe)
    assert exe.version == 1
    store.save(exe)
    assert exe.version == 2


def test_ttl_attribute_on_marks_and_trace_steps_when_configured(ddb: Any) -> None:
    store = make_store(ddb, recent_events=1, processed_ttl=3600, trace_ttl=60, clock=lambda: 1000.0)
    exe = Execution(id="e1", definition_id="order")
    for n in range(3):
        store.commit(exe, [], processed_event_id=f"ev{n}", trace={"n": n})
    marks = table_items(ddb, store, "processed")
    assert marks and all(m["expires_at"] == {"N": "4600"} for m in marks)
    assert all(t["expires_at"] == {"N": "1060"} for t in table_items(ddb, store, "trace"))
    plain = make_store(ddb, recent_events=0)
    plain.commit(Execution(id="e2", definition_id="order"), [], processed_event_id="ev", trace={})
    assert all(
        "expires_at" not in i for i in table_items(ddb, plain, "processed") + table_items(ddb, plain, "trace")
    )


def test_record_trace_off_keeps_traced_state_only_steps_single_puts(rec: Recorder) -> None:
    store = make_store(rec, record_trace=False)
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], processed_event_id="ev", trace={"n": 0})
    assert rec.ops() == ["put_item"] and store.read_trace("e1") == []
    store.append_trace("e1", {"n": "explicit"})
    assert [s["n"] for s in store.read_trace("e1")] == ["explicit"]


def test_a_commit_that_only_arms_timers_needs_no_transaction(ddb: Any, rec: Recorder) -> None:
    """Timers armed ahead of the execution write (conditional Puts), then one PutItem: no transaction."""
    store = make_store(rec)
    exe = Execution(id="e1", definition_id="order")
    arm = [TimerOp("schedule", "a", 5.0), TimerOp("schedule", "b", 7.0)]
    store.commit(exe, [], processed_event_id="ev0", timers=arm)
    assert rec.ops() == ["put_item", "put_item", "put_item"]
    assert [kw["TableName"] for _, kw in rec.calls] == [store.table("timers")] * 2 + [store.table("executions")]
    assert store.due_timers(100.0) == [("e1", "a", 5.0), ("e1", "b", 7.0)]
    # re-armed at another time: the armed timer may only be replaced atomically with the state
    rec.reset()
    store.commit(exe, [], processed_event_id="ev1", timers=[TimerOp("schedule", "a", 9.0)])
    assert rec.ops() == ["put_item", "transact_write_items"]  # the conditional Put refused, then the transaction
    assert store.due_timers(100.0) == [("e1", "b", 7.0), ("e1", "a", 9.0)]


def test_a_timer_armed_ahead_of_a_lost_race_fires_a_stale_timeout(ddb: Any) -> None:
    """The commit loses its race after its timer went ahead: the timer fires, the engine ignores it."""
    store = make_store(ddb)
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], processed_event_id="ev0")
    stale = store.load("e1")
    assert stale is not None
    other = DynamoDBStore(ddb, prefix=store.prefix)
    other.commit(exe, [], processed_event_id="ev1")  # another writer got there first
    with pytest.raises(StoreConflict):
        store.commit(stale, [], processed_event_id="ev2", timers=[TimerOp("schedule", "w", 5.0)])
    loaded = store.load("e1")
    assert loaded is not None and loaded.version == 2 and "w" not in loaded.timers  # nothing of it applied
    assert store.due_timers(10.0) == [("e1", "w", 5.0)]  # but the timer is armed: its timeout is stale
