"""A map over 10,000 items in one DynamoDB item (moto): what docs/definitions.md says about long lists."""

from __future__ import annotations

import pytest

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.model import START, MapProgress
from durastate.errors import ExecutionTooLarge
from durastate.store.dynamodb.limits import MAX_ITEM_BYTES, item_size
from durastate.store.dynamodb.sync import DynamoDBStore

from .conftest import Recorder

ORDERS = [f"order-{i:05d}" for i in range(10_000)]

BIG = {
    "id": "big", "initial": "mapping",
    "states": {
        "mapping": {
            "map": {"items": "$context.orders", "invoke": {"definition": "work", "context": {"order": "$item"}},
                    "max_concurrency": 100, "output": "$event.output.cents"},
            "on_done": "done",
        },
        "done": {"type": "final"},
    },
}


def written_size(rec: Recorder) -> int:
    """The size of the execution item the last commit wrote (a Put or the Put of a transaction)."""
    for op, kwargs in reversed(rec.calls):
        if op == "put_item":
            return item_size(kwargs["Item"])
        if op == "transact_write_items":
            return max(item_size(i["Put"]["Item"]) for i in kwargs["TransactItems"] if "Put" in i)
    raise AssertionError(f"no write among {rec.ops()}")


def test_a_map_of_ten_thousand_items_is_stored_at_its_largest(store: DynamoDBStore, rec: Recorder) -> None:
    """On entry the parent holds the list twice (its context and the items not started yet): its peak."""
    exe = Execution(id="p", definition_id="big", context={"orders": ORDERS})
    step(load_definition(BIG), exe, Event(name=START), 0.0)
    store.commit(exe, [], processed_event_id="p:start")
    size = written_size(rec)
    assert 280_000 < size < 300_000, size  # 288 KB measured, of 400 KB
    loaded = store.load("p")
    assert loaded is not None and loaded.maps == exe.maps and len(loaded.children) == 100


def test_ten_thousand_whole_child_contexts_are_refused_before_any_request(store: DynamoDBStore,
                                                                         rec: Recorder) -> None:
    """Kept whole, 10,000 small child contexts (37 bytes each) beside the list pass 400 KB: refused, typed."""
    outputs = [{"order": o, "cents": 1234} for o in ORDERS]
    exe = Execution(id="p", definition_id="big", active_path="mapping", context={"orders": ORDERS},
                    maps={"mapping": MapProgress(total=10_000, started=10_000, done=9_999, outputs=outputs)})
    rec.reset()
    with pytest.raises(ExecutionTooLarge) as err:
        store.save(exe)
    assert err.value.limit == MAX_ITEM_BYTES and 500_000 < err.value.size < 520_000
    assert rec.calls == [] and store.load("p") is None
