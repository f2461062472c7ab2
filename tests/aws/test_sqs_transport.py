"""SqsTransport against moto's SQS FIFO: wire format, ids, batching, per-entry retries, claim/ack/release."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durastate.engine.model import Event
from durastate.errors import DeliveryFailed
from durastate.transport.sqs import SqsTransport, sqs_id
from durastate.transport.wire import parse_envelope

from .conftest import receive_all


class Recording:
    """A client wrapper that records ``send_message_batch`` calls and can fail chosen entries."""

    def __init__(self, inner: Any, fail: dict[str, list[tuple[str, bool]]] | None = None) -> None:
        self.inner = inner
        self.fail = fail or {}  # event id -> per-attempt [(code, sender_fault)], consumed in order
        self.batches: list[list[dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.batches.append(Entries)
        ok, failed = [], []
        for e in Entries:
            plan = self.fail.get(e["MessageDeduplicationId"])
            if plan:
                code, sender = plan.pop(0)
                failed.append({"Id": e["Id"], "Code": code, "Message": "injected", "SenderFault": sender})
            else:
                ok.append(e)
        resp: dict[str, Any] = {"Successful": [], "Failed": failed}
        if ok:
            resp["Successful"] = self.inner.send_message_batch(QueueUrl=QueueUrl, Entries=ok)["Successful"]
        return resp


def ev(i: int, name: str = "tick") -> Event:
    return Event(id=f"e{i}", name=name, data={"i": i})


def test_wire_format_group_and_dedup_ids(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    SqsTransport(sqs, q).send([("exe-1", Event(id="ev-1", name="go", data={"x": 1}))])
    [m] = receive_all(sqs, q)
    assert json.loads(m["Body"]) == {"target_id": "exe-1",
                                     "event": {"id": "ev-1", "name": "go", "data": {"x": 1}}}
    assert m["Attributes"]["MessageGroupId"] == "exe-1"
    assert m["Attributes"]["MessageDeduplicationId"] == "ev-1"
    assert parse_envelope(m["Body"]).event.id == "ev-1"


def test_resend_of_same_event_is_deduplicated(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    t = SqsTransport(sqs, q)
    t.send([("a", ev(1))])
    t.send([("a", ev(1))])
    assert len(receive_all(sqs, q)) == 1


def test_ids_sqs_cannot_take_map_to_a_stable_hash() -> None:
    assert sqs_id("order-42:start") == "order-42:start"
    odd = "ordre n°42 with spaces"
    assert sqs_id(odd) == sqs_id(odd) and sqs_id(odd).startswith("h-") and len(sqs_id(odd)) <= 128
    assert sqs_id("x" * 129) != sqs_id("x" * 128)


def test_sends_in_batches_of_ten_in_order(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    rec = Recording(sqs)
    SqsTransport(rec, q).send([("a" if i % 2 else "b", ev(i)) for i in range(25)])
    assert [len(b) for b in rec.batches] == [10, 10, 5]
    got = receive_all(sqs, q)
    assert len(got) == 25
    per_group: dict[str, list[int]] = {}
    for m in got:
        env = parse_envelope(m["Body"])
        per_group.setdefault(env.target_id, []).append(env.event.data["i"])
    assert per_group["a"] == sorted(per_group["a"]) and per_group["b"] == sorted(per_group["b"])


def test_failed_entries_are_retried_until_they_go(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    rec = Recording(sqs, {"e3": [("InternalError", False), ("ServiceUnavailable", False)],
                          "e7": [("InternalError", False)]})
    sleeps: list[float] = []
    SqsTransport(rec, q, sleep=sleeps.append).send([("a", ev(i)) for i in range(10)])
    assert [len(b) for b in rec.batches] == [10, 2, 1]  # only the failed entries are re-sent
    assert len(sleeps) == 2 and all(0 < s <= 2.0 for s in sleeps)  # bounded backoff, injected sleep
    assert sorted(parse_envelope(m["Body"]).event.id for m in receive_all(sqs, q)) == sorted(
        f"e{i}" for i in range(10))


def test_an_entry_that_keeps_failing_raises_and_names_it(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    rec = Recording(sqs, {"e2": [("InternalError", False)] * 10})
    with pytest.raises(DeliveryFailed) as info:
        SqsTransport(rec, q, max_attempts=3, sleep=lambda s: None).send([("a", ev(i)) for i in range(12)])
    assert [f[0] for f in info.value.failures] == ["e2"]
    assert len(rec.batches) == 4  # 10 (e2 fails), e2, e2 — then the second chunk of 2 still goes
    assert len(receive_all(sqs, q)) == 11  # nothing else was held back or dropped


def test_sender_fault_is_not_retried(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    rec = Recording(sqs, {"e1": [("InvalidParameterValue", True)]})
    with pytest.raises(DeliveryFailed, match="InvalidParameterValue") as err:
        SqsTransport(rec, q, sleep=lambda s: None).send([("a", ev(1))])
    assert len(rec.batches) == 1
    assert err.value.permanent == {"e1"}  # the relay drops it instead of retrying it forever


def test_claim_hands_out_one_per_target_in_order(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    t = SqsTransport(sqs, q)
    t.send([("a", ev(1)), ("a", ev(2)), ("b", ev(3)), ("a", ev(4))])
    first = t.claim(10)
    assert sorted((c.target_id, c.event.id) for c in first) == [("a", "e1"), ("b", "e3")]
    assert all(c.attempts == 1 for c in first)
    assert t.claim(10) == []  # a and b are both in flight
    for c in first:
        t.ack(c)
    second = t.claim(10)
    assert [(c.target_id, c.event.id) for c in second] == [("a", "e2")]
    t.ack(second[0])
    [third] = t.claim(10)
    assert third.event.id == "e4"
    t.ack(third)
    assert t.claim(10) == []


def test_release_returns_the_message_and_its_held_back_successors_in_order(sqs: Any,
                                                                          queues: tuple[str, str]) -> None:
    q, _ = queues
    t = SqsTransport(sqs, q)
    t.send([("a", ev(1)), ("a", ev(2))])
    [c1] = t.claim(10)
    t.release(c1)
    again = t.claim(10)
    assert [c.event.id for c in again] == ["e1"] and again[0].attempts == 2
    t.ack(again[0])
    [c2] = t.claim(10)
    assert c2.event.id == "e2"


def test_claim_dead_letters_a_malformed_body(sqs: Any, queues: tuple[str, str]) -> None:
    q, dlq = queues
    sqs.send_message(QueueUrl=q, MessageBody="{not json", MessageGroupId="a", MessageDeduplicationId="bad")
    t = SqsTransport(sqs, q, dlq_url=dlq)
    t.send([("a", ev(1))])
    claimed = t.claim(10)
    [m] = receive_all(sqs, dlq)
    assert m["Body"] == "{not json"
    assert "not valid JSON" in m["MessageAttributes"]["durastate.reason"]["StringValue"]
    assert m["MessageAttributes"]["durastate.error"]["StringValue"] == "MalformedEvent"
    if not claimed:  # the group was locked by the bad message in the same receive
        claimed = t.claim(10)
    assert [c.event.id for c in claimed] == ["e1"]


def test_local_runtime_runs_the_example_over_sqs_and_dynamodb(sqs: Any, queues: tuple[str, str]) -> None:
    """The consumer side drives the embedded runtime: claim/ack/release on the FIFO queue, DynamoDB store."""
    import boto3

    from durastate.engine import DefinitionRegistry
    from durastate.runtime import LocalRuntime, ManualClock

    from .harness import EXAMPLES, make_store

    q, dlq = queues
    store = make_store(boto3.client("dynamodb", region_name="us-east-1"))
    clock = ManualClock()
    rt = LocalRuntime(store, DefinitionRegistry.from_dir(EXAMPLES), SqsTransport(sqs, q, dlq_url=dlq),
                      clock=clock)
    oid = rt.start("order", execution_id="o-9")
    rt.send(oid, Event(id="a1", name="add_item", data={"price": 9}))
    rt.send(oid, Event(id="s1", name="submit"))
    rt.run_until_idle()
    order = rt.get(oid)
    assert order is not None and order.active_path == "processing.payment"
    clock.advance(901)  # the payment expires
    rt.run_until_idle()
    order = rt.get(oid)
    assert order is not None and (order.status, order.outcome) == ("finished", "payment_failed")
    assert rt.dead_letters == []
