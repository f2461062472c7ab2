"""End to end on the no-Docker local stack: the synthesized stack's resources on moto's HTTP server, the
packaged handlers run as Lambda would, events enqueued with plain boto3 in the wire format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.devstack import LocalStack, parse_template

from .helpers import QUIET, FakeClock, count, drain_queue, executions, send, settle, start

pytestmark = pytest.mark.slow


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def stack(cloud_assembly: Path, clock: FakeClock) -> Iterator[LocalStack]:
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=clock, retry_delay=0,
                    environment=QUIET) as st:
        yield st


def test_resources_come_from_the_template(stack: LocalStack, template_json: dict[str, Any]) -> None:
    ddb, sqs = stack.client("dynamodb"), stack.client("sqs")
    res = parse_template(template_json)
    assert {t.name for t in res.tables.values()} == {
        f"durastate_{n}" for n in ("executions", "outbox", "spawns", "timers", "processed", "counters", "trace")}
    for t in res.tables.values():
        desc = ddb.describe_table(TableName=t.name)["Table"]
        assert desc["KeySchema"] == t.key_schema
        streaming = bool(desc.get("StreamSpecification", {}).get("StreamEnabled"))
        assert streaming == (t.stream_view_type is not None)
        assert {g["IndexName"] for g in desc.get("GlobalSecondaryIndexes", [])} == {
            g["IndexName"] for g in t.global_secondary_indexes}
        if t.ttl_attribute:
            ttl = ddb.describe_time_to_live(TableName=t.name)["TimeToLiveDescription"]
            assert ttl["AttributeName"] == t.ttl_attribute
    attrs = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])["Attributes"]
    assert attrs["FifoQueue"] == "true"
    assert attrs["DeduplicationScope"] == "messageGroup"
    assert attrs["FifoThroughputLimit"] == "perMessageGroupId"
    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["maxReceiveCount"] == 1000
    assert redrive["deadLetterTargetArn"].endswith("durastate-events-dlq.fifo")
    bus = stack.client("events").describe_event_bus(Name="durastate-notifications")
    assert bus["Name"] == "durastate-notifications"


def test_orders_run_through_invokes_regions_and_timers_to_their_outcomes(stack: LocalStack,
                                                                          clock: FakeClock) -> None:
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    for oid in ("paid", "expires", "abandoned"):
        start(sqs, q, oid)
        send(sqs, q, oid, "add_item", {"price": 30})
    send(sqs, q, "paid", "submit")
    send(sqs, q, "expires", "submit")
    settle(stack)
    exes = executions(ddb)
    assert exes["paid"]["active_path"] == "processing.payment"
    assert exes["paid~1"]["definition_id"] == "payment"  # the invoked child, created by the worker

    send(sqs, q, "paid~1", "authorize", {"receipt": "R-1"})
    settle(stack)
    exes = executions(ddb)
    assert exes["paid"]["active_path"] == "processing.fulfilment"
    assert {exes["paid~2"]["root_path"], exes["paid~3"]["root_path"]} == {
        "processing.fulfilment.packing", "processing.fulfilment.shipping"}  # regions, spawned by the relay

    # forwarded from the parent to the regions; the shipping region sends the tracking number back up
    send(sqs, q, "paid", "picked")
    send(sqs, q, "paid", "label_printed", {"tracking": "T-1"})
    settle(stack)

    clock.advance(901)  # the payment of "expires" times out (15 min): the sweeper's schedule fires it
    settle(stack)
    clock.advance(3600)  # the cart of "abandoned" was left alone for an hour
    settle(stack)

    exes = executions(ddb)
    assert (exes["paid"]["status"], exes["paid"]["outcome"]) == ("finished", "fulfilled")
    assert exes["paid"]["context"]["receipt"] == "R-1"
    assert exes["paid"]["context"]["tracking"] == "T-1"
    assert all(exes[c]["status"] == "finished" for c in ("paid~1", "paid~2", "paid~3"))
    assert (exes["expires~1"]["outcome"], exes["expires"]["outcome"]) == ("expired", "payment_failed")
    assert (exes["abandoned"]["status"], exes["abandoned"]["outcome"]) == ("finished", "abandoned")
    assert exes["abandoned"]["context"]["items"] == 1
    for table in ("durastate_timers", "durastate_outbox", "durastate_spawns"):
        assert count(ddb, table) == 0, table
    assert drain_queue(sqs, stack.dlq_url) == []


def test_poison_message_goes_to_the_dlq_with_its_reason_and_its_group_continues(stack: LocalStack) -> None:
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    sqs.send_message(QueueUrl=q, MessageBody='{"target_id": "p1", "event": {"name": 42}}',
                     MessageGroupId="p1", MessageDeduplicationId="poison-1")
    start(sqs, q, "p1")
    send(sqs, q, "p1", "add_item", {"price": 5})
    send(sqs, q, "ghost", "submit")  # an event for an execution that does not exist
    settle(stack)

    exes = executions(ddb)
    assert exes["p1"]["context"] == {"items": 1, "total": 5}  # processed after the poison, in order
    letters = {m["MessageAttributes"]["durastate.source_message_id"]["StringValue"]: m
               for m in drain_queue(sqs, stack.dlq_url)}
    assert len(letters) == 2
    reasons = sorted(m["MessageAttributes"]["durastate.reason"]["StringValue"] for m in letters.values())
    assert any("ghost" in r for r in reasons), reasons
    poison = next(m for m in letters.values() if '"name": 42' in m["Body"])
    assert poison["MessageAttributes"]["durastate.error"]["StringValue"] == "MalformedEvent"


def test_a_record_that_keeps_failing_unexpectedly_is_dead_lettered_with_its_reason(stack: LocalStack) -> None:
    """An unexpected error (a bug) is retried (partial batch response); on its fifth receive the worker moves
    it to the DLQ with its reason — long before the redrive policy would — and other executions are never
    held up."""
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    runtime = stack.runtime
    original = runtime.apply
    attempts: list[str] = []

    def flaky(env: Any) -> Any:
        if env.target_id == "flaky":
            attempts.append(env.event.id)
            raise RuntimeError("throttled (simulated)")
        return original(env)

    runtime.apply = flaky
    start(sqs, q, "flaky")
    start(sqs, q, "steady")
    send(sqs, q, "steady", "add_item", {"price": 7})
    settle(stack)

    assert len(attempts) == 5  # DURASTATE_MAX_ATTEMPTS (default 5)
    exes = executions(ddb)
    assert "flaky" not in exes
    assert exes["steady"]["context"]["items"] == 1
    letters = drain_queue(sqs, stack.dlq_url)
    assert [json.loads(m["Body"])["target_id"] for m in letters] == ["flaky"]
    attrs = {k: v["StringValue"] for k, v in letters[0]["MessageAttributes"].items() if "StringValue" in v}
    assert attrs["durastate.error"] == "RuntimeError" and "throttled (simulated)" in attrs["durastate.reason"]


def test_duplicate_delivery_changes_nothing(stack: LocalStack) -> None:
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    start(sqs, q, "d1")
    eid = send(sqs, q, "d1", "add_item", {"price": 3})
    settle(stack)
    # the same event again, past SQS's deduplication (another dedup id): the worker's marks catch it
    body = json.dumps({"target_id": "d1", "event": {"id": eid, "name": "add_item", "data": {"price": 3}}})
    sqs.send_message(QueueUrl=q, MessageBody=body, MessageGroupId="d1", MessageDeduplicationId="again")
    settle(stack)
    assert executions(ddb)["d1"]["context"] == {"items": 1, "total": 3}
