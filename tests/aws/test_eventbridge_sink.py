"""EventBridgeSink against moto: untargeted emits reach a rule's target; per-entry failures are retried."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from durastate.engine.model import Event
from durastate.errors import DeliveryFailed
from durastate.transport.eventbridge import EventBridgeSink

from .conftest import REGION, receive_all


@pytest.fixture
def bus(moto: None, sqs: Any) -> tuple[Any, str]:
    """(events client, queue url): bus ``durastate-bus`` with a rule routing source=durastate to a queue."""
    events = boto3.client("events", region_name=REGION)
    events.create_event_bus(Name="durastate-bus")
    q = sqs.create_queue(QueueName="notices")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="all-durastate", EventBusName="durastate-bus",
                    EventPattern=json.dumps({"source": ["durastate"]}))
    events.put_targets(Rule="all-durastate", EventBusName="durastate-bus", Targets=[{"Id": "q", "Arn": arn}])
    return events, q


class Flaky:
    def __init__(self, inner: Any, failures: dict[str, int]) -> None:
        self.inner, self.failures = inner, failures
        self.calls: list[int] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(len(Entries))
        out, ok = [], []
        for e in Entries:
            eid = json.loads(e["Detail"])["id"]
            if self.failures.get(eid, 0) > 0:
                self.failures[eid] -= 1
                out.append({"ErrorCode": "InternalFailure", "ErrorMessage": "injected"})
            else:
                out.append(None)
                ok.append(e)
        real = iter(self.inner.put_events(Entries=ok)["Entries"]) if ok else iter(())
        entries = [r if r is not None else next(real) for r in out]
        return {"FailedEntryCount": sum(1 for r in entries if "ErrorCode" in r), "Entries": entries}


def test_publishes_each_event_as_detail(bus: tuple[Any, str], sqs: Any) -> None:
    events, q = bus
    sink = EventBridgeSink(events, "durastate-bus")
    sink.publish([Event(id=f"n{i}", name="order.shipped", data={"i": i}) for i in range(12)])
    got = [json.loads(m["Body"]) for m in receive_all(sqs, q)]
    assert sorted(g["detail"]["id"] for g in got) == sorted(f"n{i}" for i in range(12))
    assert {g["detail-type"] for g in got} == {"order.shipped"} and {g["source"] for g in got} == {"durastate"}


def test_failed_entries_retry_then_raise(bus: tuple[Any, str], sqs: Any) -> None:
    events, q = bus
    flaky = Flaky(events, {"n1": 1})
    EventBridgeSink(flaky, "durastate-bus", sleep=lambda s: None).publish(
        [Event(id=f"n{i}", name="x") for i in range(3)])
    assert flaky.calls == [3, 1]
    assert len(receive_all(sqs, q)) == 3
    stuck = Flaky(events, {"n0": 99})
    with pytest.raises(DeliveryFailed, match="n0: InternalFailure"):
        EventBridgeSink(stuck, "durastate-bus", max_attempts=3, sleep=lambda s: None).publish(
            [Event(id="n0", name="x")])
    assert stuck.calls == [1, 1, 1]
