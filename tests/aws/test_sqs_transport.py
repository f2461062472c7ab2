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


def test_a_derived_event_id_sent_first_cannot_make_sqs_drop_the_runtimes_message(
        sqs: Any, queues: tuple[str, str]) -> None:
    """SQS FIFO drops a message whose deduplication id it saw within five minutes. A producer who sends
    first with the id of a timeout the runtime will send (``MessageDeduplicationId`` = that event id) must
    not make SQS drop the true one: the runtime's derived ids get a deduplication id keyed by its
    transport, which still dedupes its own re-sends."""
    q, _ = queues
    true_id = "~timeout:A:waiting:1800000030.0"
    sqs.send_message(QueueUrl=q, MessageBody="{}", MessageGroupId="A", MessageDeduplicationId=sqs_id(true_id))
    runtime = SqsTransport(sqs, q)
    timeout = Event(id=true_id, name="durastate.timeout", data={"path": "waiting", "fire_at": 1800000030.0})
    runtime.send([("A", timeout)])
    runtime.send([("A", timeout)])  # the relay's re-send: deduplicated
    bodies = [m["Body"] for m in receive_all(sqs, q)]
    assert len(bodies) == 2 and parse_envelope(bodies[1]).event.id == true_id


def test_ids_sqs_cannot_take_map_to_a_stable_hash() -> None:
    assert sqs_id("order-42:start") == "order-42:start"
    odd = "ordre n°42 with spaces"
    assert sqs_id(odd) == sqs_id(odd) and sqs_id(odd).startswith("h-") and len(sqs_id(odd)) <= 128
    assert sqs_id("x" * 129) != sqs_id("x" * 128)


def test_sends_in_batches_of_ten_targets_one_entry_per_target_per_call(sqs: Any, queues: tuple[str, str]
                                                                       ) -> None:
    q, _ = queues
    rec = Recording(sqs)
    t = SqsTransport(rec, q)
    t.send([(f"t{i}", ev(i)) for i in range(25)])
    assert [len(b) for b in rec.batches] == [10, 10, 5]  # many targets share calls
    rec.batches.clear()
    t.send([("a" if i % 2 else "b", ev(100 + i)) for i in range(7)])
    # Two targets: a call carries the next entry of each, so one entry can never overtake another.
    assert [[e["MessageGroupId"] for e in b] for b in rec.batches] == [["b", "a"]] * 3 + [["b"]]
    got = receive_all(sqs, q)
    assert len(got) == 32
    per_group: dict[str, list[int]] = {}
    for m in got:
        env = parse_envelope(m["Body"])
        per_group.setdefault(env.target_id, []).append(env.event.data["i"])
    assert per_group["a"] == [101, 103, 105] and per_group["b"] == [100, 102, 104, 106]


def test_failed_entries_are_retried_until_they_go(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    rec = Recording(sqs, {"e3": [("InternalError", False), ("ServiceUnavailable", False)],
                          "e7": [("InternalError", False)]})
    sleeps: list[float] = []
    SqsTransport(rec, q, sleep=sleeps.append).send([(f"t{i}", ev(i)) for i in range(10)])
    assert [len(b) for b in rec.batches] == [10, 2, 1]  # only the failed entries are re-sent
    assert len(sleeps) == 2 and all(0 < s <= 2.0 for s in sleeps)  # bounded backoff, injected sleep
    assert sorted(parse_envelope(m["Body"]).event.id for m in receive_all(sqs, q)) == sorted(
        f"e{i}" for i in range(10))


def test_an_entry_that_keeps_failing_raises_and_names_it(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    rec = Recording(sqs, {"e2": [("InternalError", False)] * 10})
    with pytest.raises(DeliveryFailed) as info:
        SqsTransport(rec, q, max_attempts=3, sleep=lambda s: None).send(
            [("a" if i == 2 else f"t{i}", ev(i)) for i in range(12)])
    assert [f[0] for f in info.value.failures] == ["e2"]
    assert [len(b) for b in rec.batches] == [10, 2, 1, 1]  # 10 (e2 fails), the last 2, then e2 twice more
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


# -- a failed entry holds back the rest of its group ------------------------------------------------------
class FailByName:
    """A client wrapper that fails the first ``times`` entries carrying event ``name``, per entry.

    A wrapper, not moto: moto accepts or rejects a ``SendMessageBatch`` as a whole and cannot fail one
    entry of it, while real SQS reports each entry on its own (``Successful``/``Failed``) — so the wrapper
    answers for the failed entry (a server-side ``InternalError``) and hands every other entry to moto.
    """

    def __init__(self, inner: Any, name: str, times: int) -> None:
        self.inner, self.name, self.times = inner, name, times
        self.failed: list[str] = []
        self.batches: list[list[str]] = []  # the group of every entry of every call

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.batches.append([e["MessageGroupId"] for e in Entries])
        ok, failed = [], []
        for e in Entries:
            event = parse_envelope(e["MessageBody"]).event
            if event.name == self.name and self.times > 0:
                self.times -= 1
                self.failed.append(event.id)
                failed.append({"Id": e["Id"], "Code": "InternalError", "Message": "injected",
                               "SenderFault": False})
            else:
                ok.append(e)
        resp: dict[str, Any] = {"Successful": [], "Failed": failed}
        if ok:
            resp["Successful"] = self.inner.send_message_batch(QueueUrl=QueueUrl, Entries=ok)["Successful"]
        return resp


@pytest.mark.parametrize("max_attempts", [6, 1], ids=["retried-in-send", "retried-by-the-next-relay-pass"])
def test_a_partial_batch_does_not_reorder_what_a_region_sends_its_parent(
        sqs: Any, queues: tuple[str, str], tmp_path: Any, max_attempts: int) -> None:
    """Regression: the shipping region emits ``shipped_with`` then ``durastate.finished`` to the order in one
    step, so both go in one ``SendMessageBatch``. SQS fails the first entry and accepts the second: the
    second must not reach the order first (the order would finish and drop the tracking number)."""
    from durastate.engine import DefinitionRegistry
    from durastate.runtime import LocalRuntime, ManualClock
    from durastate.store import SqliteStore

    from .harness import EXAMPLES

    q, _ = queues
    client = FailByName(sqs, "shipped_with", times=1)
    sleeps: list[float] = []
    store = SqliteStore(tmp_path / "order.db")
    rt = LocalRuntime(store, DefinitionRegistry.from_dir(EXAMPLES),
                      SqsTransport(client, q, max_attempts=max_attempts, sleep=sleeps.append),
                      clock=ManualClock())
    oid = rt.start("order", execution_id="o1")
    rt.send(oid, Event(id="a1", name="add_item", data={"price": 9}))
    rt.send(oid, Event(id="s1", name="submit"))
    rt.run_until_idle()
    order = rt.get(oid)
    assert order is not None
    (payment,) = order.children
    rt.send(payment, Event(id="au", name="authorize", data={"receipt": "r-1"}))
    rt.run_until_idle()
    order = rt.get(oid)
    assert order is not None and order.active_path == "processing.fulfilment"
    regions = {ref.path.rsplit(".", 1)[-1]: cid for cid, ref in order.children.items()}
    rt.send(regions["packing"], Event(id="pk", name="picked"))
    rt.send(regions["shipping"], Event(id="lp", name="label_printed", data={"tracking": "T-42"}))
    if max_attempts == 1:  # the send gives up on the failed entry: the relay keeps it and its successor
        with pytest.raises(DeliveryFailed):
            rt.run_until_idle()
    rt.run_until_idle()
    assert len(client.failed) == 1  # the fault was injected, once
    order = rt.get(oid)
    assert order is not None and (order.status, order.outcome) == ("finished", "fulfilled")
    assert order.context.get("tracking") == "T-42"
    assert rt.dead_letters == []
    store.close()


def test_a_failing_entry_holds_back_every_later_entry_of_its_group_and_reports_them(
        sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    rec = Recording(sqs, {"e1": [("InternalError", False)] * 3})
    t = SqsTransport(rec, q, max_attempts=3, sleep=lambda s: None)
    with pytest.raises(DeliveryFailed) as info:
        t.send([("a", ev(0)), ("a", ev(1)), ("b", ev(2)), ("a", ev(3)), ("b", ev(4))])
    assert [(k, code) for k, code, _ in info.value.failures] == [("e1", "InternalError"), ("e3", "HeldBack")]
    assert info.value.permanent == frozenset()
    for batch in rec.batches:  # one entry per group per call: a failure can only hold back, never reorder
        groups = [e["MessageGroupId"] for e in batch]
        assert len(groups) == len(set(groups))
    per_group: dict[str, list[str]] = {}
    for m in receive_all(sqs, q):
        env = parse_envelope(m["Body"])
        per_group.setdefault(env.target_id, []).append(env.event.id)
    assert per_group == {"a": ["e0"], "b": ["e2", "e4"]}


def test_a_delayed_release_hides_the_message_and_keeps_its_group_behind_it(sqs: Any,
                                                                           queues: tuple[str, str]) -> None:
    q, _ = queues
    calls: list[list[int]] = []  # the VisibilityTimeout of each entry of each call

    class Visibility:
        def __getattr__(self, attr: str) -> Any:
            return getattr(sqs, attr)

        def change_message_visibility_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:
            calls.append([e["VisibilityTimeout"] for e in Entries])
            return sqs.change_message_visibility_batch(QueueUrl=QueueUrl, Entries=Entries)

    t = SqsTransport(Visibility(), q)
    t.send([("a", ev(1)), ("a", ev(2)), ("b", ev(3))])
    claimed = t.claim(10)
    c1 = next(c for c in claimed if c.event.id == "e1")
    for c in claimed:
        if c is not c1:
            t.ack(c)
    t.release(c1, delay=2.5)
    # e1 is hidden for 3 whole seconds; e2 (received with it, held back here) went back to the queue at
    # once, but SQS hands out nothing of group a while e1 is invisible.
    assert calls == [[3], [0]]
    assert t.claim(10) == []
    assert SqsTransport(sqs, q).claim(10) == []  # another consumer sees the same


def test_the_trace_context_travels_in_the_body_and_as_the_traceparent_attribute(
        sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    tp = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    t = SqsTransport(sqs, q)
    t.send([("exe-1", Event(id="ev-1", name="go", traceparent=tp)), ("exe-2", Event(id="ev-2", name="go"))])
    by_id = {json.loads(m["Body"])["event"]["id"]: m for m in receive_all(sqs, q)}
    assert by_id["ev-1"]["MessageAttributes"]["traceparent"] == {"DataType": "String", "StringValue": tp}
    assert json.loads(by_id["ev-1"]["Body"])["event"]["traceparent"] == tp
    assert "MessageAttributes" not in by_id["ev-2"]  # an untraced event sends nothing more


def test_a_claimed_message_takes_the_context_from_its_attribute_when_the_body_has_none(
        sqs: Any, queues: tuple[str, str]) -> None:
    """What an instrumented producer sends: the wire body, and the context as a message attribute."""
    q, _ = queues
    tp = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"
    sqs.send_message(QueueUrl=q, MessageBody=json.dumps({"target_id": "x", "event": {"id": "e1", "name": "go"}}),
                     MessageGroupId="x", MessageDeduplicationId="e1",
                     MessageAttributes={"traceparent": {"DataType": "String", "StringValue": tp}})
    [claimed] = SqsTransport(sqs, q).claim(1)
    assert claimed.event.traceparent == tp
