"""DurastateClient: idempotent starts, sends, reads — over SQS (moto) and over any transport + store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durastate.client import DurastateClient, start_event_id
from durastate.engine.model import Execution
from durastate.errors import DurastateError, MalformedEvent
from durastate.store import DictStore
from durastate.transport import InMemoryTransport
from durastate.transport.sqs import SqsTransport

from .conftest import receive_all


def test_start_with_given_id_is_idempotent_on_sqs(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    client = DurastateClient(SqsTransport(sqs, q))
    assert client.start("order", {"total": 5}, execution_id="order-42") == "order-42"
    assert client.start("order", {"total": 5}, execution_id="order-42") == "order-42"
    [m] = receive_all(sqs, q)  # the second start had the same deduplication id
    body = json.loads(m["Body"])
    assert body == {"target_id": "order-42", "event": {
        "id": "order-42:start", "name": "durastate.start", "data": {"definition_id": "order",
                                                                 "context": {"total": 5}}}}
    assert m["Attributes"]["MessageGroupId"] == "order-42"
    assert m["Attributes"]["MessageDeduplicationId"] == start_event_id("order-42")


def test_generated_ids_and_send() -> None:
    transport = InMemoryTransport()
    client = DurastateClient(transport)
    a, b = client.start("order"), client.start("order")
    assert a != b and len(a) == 32
    eid = client.send(a, "pay", {"amount": 3})
    assert client.send(a, "pay", {"amount": 3}, event_id="retry-1") == "retry-1"
    claimed = transport.claim(10)
    assert {(c.target_id, c.event.name) for c in claimed} == {(a, "durastate.start"), (b, "durastate.start")}
    assert eid


def test_reserved_names_and_reads() -> None:
    store = DictStore()
    client = DurastateClient(InMemoryTransport(), store)
    with pytest.raises(MalformedEvent, match="reserved"):
        client.send("x", "durastate.timeout")
    assert client.get("nope") is None
    store.save(Execution(id="e1", definition_id="order"))
    got = client.get("e1")
    assert got is not None and got.definition_id == "order"
    assert client.trace("e1") == []
    assert [s.id for s in client.list().items] == ["e1"]
    with pytest.raises(DurastateError, match="no store"):
        DurastateClient(InMemoryTransport()).get("e1")


def test_unknown_definition_is_rejected_before_enqueueing() -> None:
    from durastate.errors import UnknownDefinition

    class Defs:
        def get(self, definition_id: str) -> object:
            raise UnknownDefinition(definition_id, ["order"])

    transport = InMemoryTransport()
    with pytest.raises(UnknownDefinition):
        DurastateClient(transport, definitions=Defs()).start("ordr")
    assert transport.claim(10) == []


def test_for_aws_reads_the_tables_and_writes_the_queue(sqs: Any, queues: tuple[str, str]) -> None:
    from durastate.store.dynamodb.sync import DynamoDBStore

    q, _ = queues
    client = DurastateClient.for_aws(q, table_prefix="cli", region="us-east-1")
    assert isinstance(client.store, DynamoDBStore)
    client.store.ensure_tables()
    client.store.save(Execution(id="x1", definition_id="order"))
    got = client.get("x1")
    assert got is not None and got.version == 1
    client.send("x1", "ping", event_id="p-1")
    [m] = receive_all(sqs, q)
    assert json.loads(m["Body"])["event"]["id"] == "p-1"


def test_history_reads_every_step_of_a_store_that_keeps_them() -> None:
    store = DictStore(trace_max=2, history=True)
    client = DurastateClient(InMemoryTransport(), store)
    for n in range(5):
        store.append_trace("e1", {"n": n})
    assert [s["n"] for s in client.history("e1")] == [0, 1, 2, 3, 4]
    assert [s["n"] for s in client.trace("e1")] == [3, 4]


def test_for_aws_backfills_and_deletes_a_schedule_in_the_tables(queues: tuple[str, str]) -> None:
    from durastate.engine.schedules import ScheduleSpec
    from durastate.runtime import ManualClock
    from durastate.runtime.schedules import sync_schedules
    from durastate.store.dynamodb.sync import DynamoDBStore

    q, _ = queues
    client = DurastateClient.for_aws(q, table_prefix="cli", region="us-east-1")
    assert isinstance(client.store, DynamoDBStore)
    client.store.ensure_tables()
    clock = ManualClock(1_767_225_600.0)  # 2026-01-01T00:00Z
    client.clock = clock
    sync_schedules(client.store, {"hourly": ScheduleSpec(definition="order", rate="1h")}, clock())
    clock.advance(3 * 3600)
    done = client.backfill_schedule("hourly", 1_767_229_200.0, 1_767_232_800.0)
    assert done.started == ["hourly~20260101T010000Z", "hourly~20260101T020000Z"]
    assert [e.target_id for e in client.store.pending_outbox()] == done.started  # the relay's to deliver
    assert client.delete_schedule("hourly").deleted and client.schedules() == []
    assert client.store.due_timers(clock() + 86400) == []
