"""The example order, driven from ``durastate.start`` to its outcome through the worker, relay and sweeper
Lambda handlers on moto: Lambda-shaped SQS batches, stream-triggered relay, scheduled sweeper, injected clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.client import DurastateClient
from durastate.engine.model import Execution
from durastate.transport.sqs import SqsTransport

from .harness import Stack

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def stack(queues: tuple[str, str]) -> Iterator[Stack]:
    s = Stack(*queues, EXAMPLES)
    yield s
    s.close()


def load(stack: Stack, exe_id: str) -> Execution:
    exe = stack.raw_store.load(exe_id)
    assert exe is not None, f"{exe_id} does not exist"
    return exe


def test_order_paid_packed_and_shipped_in_parallel(stack: Stack) -> None:
    client = DurastateClient(SqsTransport(stack.sqs, stack.queue_url), stack.raw_store)
    oid = client.start("order", execution_id="o-1")
    client.send(oid, "add_item", {"price": 40})
    client.send(oid, "add_item", {"price": 2})
    client.send(oid, "submit")
    stack.pump()
    order = load(stack, oid)
    assert order.active_path == "processing.payment" and order.context["total"] == 42
    [(pay_id, ref)] = order.children.items()
    assert ref.kind == "invoke" and load(stack, pay_id).active_path == "pending"

    client.send(pay_id, "authorize", {"receipt": "r-77"})
    stack.pump()
    order = load(stack, oid)
    assert order.active_path == "processing.fulfilment" and order.context["receipt"] == "r-77"
    regions = {cid: ref for cid, ref in order.children.items() if ref.kind == "region"}
    assert len(regions) == 2 and all(load(stack, cid).status == "running" for cid in regions)

    client.send(oid, "picked")                              # forwarded to both regions
    client.send(oid, "label_printed", {"tracking": "TRK1"})  # the shipping region tells the parent
    stack.pump()
    order = load(stack, oid)
    assert (order.status, order.outcome) == ("finished", "fulfilled")
    assert order.context["tracking"] == "TRK1"
    assert all(load(stack, cid).status == "finished" for cid in regions)  # both regions joined
    assert client.trace(oid)  # the steps were traced through the DynamoDB store
    assert stack.raw_store.due_timers(stack.clock() + 10**6) == []  # the cart timer was cancelled
    assert stack.sqs.receive_message(QueueUrl=stack.dlq_url).get("Messages") is None


def test_timeouts_expire_a_payment_and_abandon_a_cart(stack: Stack) -> None:
    client = DurastateClient(SqsTransport(stack.sqs, stack.queue_url), stack.raw_store)
    slow = client.start("order", execution_id="o-slow")
    client.send(slow, "add_item", {"price": 10})
    client.send(slow, "submit")
    idle = client.start("order", execution_id="o-idle")
    stack.pump()
    [pay_id] = load(stack, slow).children
    assert stack.advance(901) == 1  # the payment's 15-minute timer
    assert (load(stack, pay_id).status, load(stack, pay_id).outcome) == ("finished", "expired")
    order = load(stack, slow)
    assert (order.status, order.outcome) == ("finished", "payment_failed")
    assert load(stack, idle).active_path == "cart"
    assert stack.advance(3600) == 1  # the idle cart's hour (o-slow's cart timer was cancelled on submit)
    assert (load(stack, idle).status, load(stack, idle).outcome) == ("finished", "abandoned")
    # A sweep with nothing due, and a restarted (re-delivered) start of a finished order, change nothing.
    assert stack.advance(10) == 0
    client.start("order", execution_id="o-idle")
    stack.pump()
    assert load(stack, idle).outcome == "abandoned"
