"""The invoker the local stack uses in Lambda's place: batches, partial failures, redrive to the DLQ."""

from __future__ import annotations

import json
from typing import Any

from durastate.devstack import SqsBatchInvoker
from durastate.engine.model import Event
from durastate.transport.sqs import SqsTransport

from .conftest import receive_all


class Handler:
    """Records what it saw; fails the event ids in ``fail`` (always) and raises when ``crash`` is set."""

    def __init__(self, fail: set[str] | None = None) -> None:
        self.fail = fail or set()
        self.crash = False
        self.seen: list[list[str]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        assert context.get_remaining_time_in_millis() > 0 and context.function_name
        ids = [json.loads(r["body"])["event"]["id"] for r in event["Records"]]
        records = event["Records"]
        assert all(r["eventSource"] == "aws:sqs" and r["attributes"]["MessageGroupId"] for r in records)
        self.seen.append(ids)
        if self.crash:
            raise RuntimeError("boom")
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]
                                      if json.loads(r["body"])["event"]["id"] in self.fail]}


def test_batches_of_at_most_ten_and_successes_deleted(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    SqsTransport(sqs, q).send([(f"g{i % 3}", Event(id=f"e{i}", name="x")) for i in range(25)])
    handler = Handler()
    invoker = SqsBatchInvoker(sqs, q, handler)
    assert invoker.drain() == 25
    assert all(len(b) <= 10 for b in handler.seen)
    assert sorted(i for b in handler.seen for i in b) == sorted(f"e{i}" for i in range(25))
    assert invoker.poll_once().received == 0


def test_failed_records_are_retried_and_finally_redriven(sqs: Any, queues: tuple[str, str]) -> None:
    q, dlq = queues
    SqsTransport(sqs, q).send([("a", Event(id="bad", name="x")), ("b", Event(id="ok", name="x"))])
    handler = Handler(fail={"bad"})
    invoker = SqsBatchInvoker(sqs, q, handler, retry_delay=0)
    first = invoker.poll_once()
    assert (first.received, first.succeeded, first.failed) == (2, 1, 1)
    for _ in range(10):
        invoker.poll_once()
    assert sum(b.count("bad") for b in handler.seen) == 5  # maxReceiveCount of the queue's redrive policy
    [letter] = receive_all(sqs, dlq)
    assert json.loads(letter["Body"])["event"]["id"] == "bad"


def test_a_crashed_invocation_returns_the_whole_batch(sqs: Any, queues: tuple[str, str]) -> None:
    q, _ = queues
    SqsTransport(sqs, q).send([("a", Event(id="1", name="x")), ("b", Event(id="2", name="x"))])
    handler = Handler()
    invoker = SqsBatchInvoker(sqs, q, handler, retry_delay=0)
    handler.crash = True
    assert invoker.poll_once().failed == 2
    handler.crash = False
    assert invoker.poll_once().succeeded == 2
