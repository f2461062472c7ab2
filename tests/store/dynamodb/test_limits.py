"""DynamoDB limits are checked before any request: a typed error with size and limit, nothing written."""

from __future__ import annotations

import pytest

from durastate.engine.model import Event, Execution
from durastate.errors import ExecutionTooLarge
from durastate.store.base import TimerOp
from durastate.store.dynamodb.limits import MAX_ITEM_BYTES, MAX_TXN_BYTES, MAX_TXN_ITEMS, S, item_size
from durastate.store.dynamodb.sync import DynamoDBStore

from .conftest import Recorder


def big(n: int) -> str:
    return "x" * n


def nothing_written(store: DynamoDBStore, rec: Recorder) -> None:
    assert rec.calls == []  # refused before any request
    assert store.load("e1") is None or store.load("e1") is not None  # (reads still work)


def test_execution_item_over_400kb(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order", context={"blob": big(MAX_ITEM_BYTES)})
    with pytest.raises(ExecutionTooLarge) as err:
        store.save(exe)
    assert err.value.limit == MAX_ITEM_BYTES and err.value.size > MAX_ITEM_BYTES
    assert "execution 'e1'" in str(err.value) and "nothing was written" in str(err.value)
    assert rec.calls == [] and exe.version == 0
    assert store.load("e1") is None


def test_execution_just_under_the_limit_is_stored(store: DynamoDBStore) -> None:
    exe = Execution(id="e1", definition_id="order", context={"blob": big(MAX_ITEM_BYTES - 1000)})
    store.save(exe)
    loaded = store.load("e1")
    assert loaded is not None and loaded.context == exe.context


def test_emitted_event_over_400kb(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order")
    event = Event(id="huge", name="x", data={"blob": big(MAX_ITEM_BYTES)})
    with pytest.raises(ExecutionTooLarge, match="event 'huge'") as err:
        store.commit(exe, [("t", event)], processed_event_id="ev")
    assert err.value.limit == MAX_ITEM_BYTES
    assert rec.calls == []
    assert store.load("e1") is None and store.pending_outbox() == []


def test_commit_over_100_items(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order")
    emits = [(f"t{i}", Event(name="x")) for i in range(60)]
    timers = [TimerOp("schedule", f"s{i}", 1.0) for i in range(40)]  # 1 + 60 + 40 = 101
    with pytest.raises(ExecutionTooLarge, match="items") as err:
        store.commit(exe, emits, timers=timers)
    assert (err.value.size, err.value.limit) == (101, MAX_TXN_ITEMS)
    assert rec.calls == []
    assert store.load("e1") is None and store.pending_outbox() == [] and store.due_timers(9.0) == []


def test_commit_of_exactly_100_items_goes_through(store: DynamoDBStore) -> None:
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [(f"t{i}", Event(name="x")) for i in range(99)])
    assert len(store.pending_outbox()) == 99


def test_commit_over_4mb(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order")
    emits = [(f"t{i}", Event(name="x", data={"blob": big(350_000)})) for i in range(12)]
    with pytest.raises(ExecutionTooLarge) as err:
        store.commit(exe, emits, processed_event_id="ev")
    assert err.value.limit == MAX_TXN_BYTES and err.value.size > MAX_TXN_BYTES
    assert rec.calls == []
    assert store.load("e1") is None and store.pending_outbox() == []


def test_trace_step_over_400kb(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order")
    with pytest.raises(ExecutionTooLarge, match="trace step"):
        store.commit(exe, [], trace={"blob": big(MAX_ITEM_BYTES)})
    with pytest.raises(ExecutionTooLarge, match="trace step"):
        store.append_trace("e1", {"blob": big(MAX_ITEM_BYTES)})
    assert rec.calls == []


def test_item_size_follows_dynamodb_rules() -> None:
    assert item_size({"id": S("abc")}) == 2 + 3
    assert item_size({"n": {"N": "12345"}}) == 1 + 4  # 5 significant digits -> 3 + 1
    assert item_size({"l": {"L": [S("ab"), S("c")]}}) == 1 + 3 + (2 + 1) + (1 + 1)
    assert item_size({"é": S("é")}) == 4  # UTF-8 bytes
