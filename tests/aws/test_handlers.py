"""The three Lambda handlers on moto, fed real Lambda-shaped SQS / stream / EventBridge events."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.devstack import queue_arn, sqs_event
from durastate.engine.model import Event
from durastate.store.base import ExecutionStore
from durastate.transport.sqs import SqsTransport, sqs_id

from .conftest import REGION, receive_all
from .harness import COUNTER_YAML, Stack


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "counter.yaml").write_text(COUNTER_YAML)
    return folder


@pytest.fixture
def stack(queues: tuple[str, str], definitions: Path) -> Iterator[Stack]:
    s = Stack(*queues, definitions)
    yield s
    s.close()


def make_stack(queues: tuple[str, str], definitions: Path, wrap: Any) -> Stack:
    return Stack(*queues, definitions, wrap_store=wrap)


class Proxy:
    """Wraps a store; subclasses override what they intercept."""

    def __init__(self, inner: ExecutionStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def start(stack: Stack, *ids: str, **context: Any) -> None:
    for i in ids:
        stack.runtime.worker.handle(i, Event(id=f"{i}:start", name="durastate.start",
                                             data={"definition_id": "counter", "context": dict(context)}))


def receive_batch(stack: Stack, n: int = 10) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = stack.sqs.receive_message(
        QueueUrl=stack.queue_url, MaxNumberOfMessages=n, MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"]).get("Messages", [])
    return msgs


def lambda_event(messages: list[dict[str, Any]], stack: Stack) -> dict[str, Any]:
    return sqs_event(messages, queue_arn(stack.queue_url, REGION), REGION)


def count(stack: Stack, exe_id: str) -> int:
    exe = stack.raw_store.load(exe_id)
    assert exe is not None
    return int(exe.context["count"])


def metrics_out(text: str) -> dict[str, float]:
    """Sum the EMF metrics Powertools printed (one JSON document per flush)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        doc = json.loads(line)
        for d in doc["_aws"]["CloudWatchMetrics"]:
            assert d["Namespace"] == "durastate"
            for m in d["Metrics"]:
                v = doc[m["Name"]]
                totals[m["Name"]] = totals.get(m["Name"], 0) + (sum(v) if isinstance(v, list) else v)
    return totals


GROUPS = ["A", "B", "C", "A", "B", "C", "A", "B", "C", "A"]


@pytest.mark.parametrize("k", [0, 4, 9])
def test_failure_at_k_returns_exactly_what_fifo_must_retry(queues: tuple[str, str], definitions: Path,
                                                          k: int) -> None:
    from botocore.exceptions import ClientError

    poisoned = {f"inc-{k}"}

    class Throttled(Proxy):
        def load_for_event(self, execution_id: str, event_id: str) -> Any:
            if event_id in poisoned:
                raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException",
                                             "Message": "slow down"}}, "BatchGetItem")
            return self.inner.load_for_event(execution_id, event_id)

    stack = make_stack(queues, definitions, Throttled)
    try:
        start(stack, "A", "B", "C")
        SqsTransport(stack.sqs, stack.queue_url).send(
            [(g, Event(id=f"inc-{i}", name="inc")) for i, g in enumerate(GROUPS)])
        batch = receive_batch(stack)
        assert [json.loads(m["Body"])["target_id"] for m in batch] == GROUPS  # one batch, three groups
        response = stack.call_worker(lambda_event(batch, stack))
        must_retry = [batch[i]["MessageId"] for i in range(k, 10) if GROUPS[i] == GROUPS[k]]
        assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == must_retry
        applied = {g: sum(1 for i, x in enumerate(GROUPS) if x == g and not (x == GROUPS[k] and i >= k))
                   for g in "ABC"}
        assert {g: count(stack, g) for g in "ABC"} == applied
        # Lambda deletes the rest; the failed records come back, in order, and now succeed.
        for m in batch:
            if m["MessageId"] not in must_retry:
                stack.sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=m["ReceiptHandle"])
            else:
                stack.sqs.change_message_visibility(QueueUrl=stack.queue_url,
                                                    ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
        poisoned.clear()
        again = receive_batch(stack)
        assert [m["MessageId"] for m in again] == must_retry
        assert stack.call_worker(lambda_event(again, stack))["batchItemFailures"] == []
        assert {g: count(stack, g) for g in "ABC"} == {"A": 4, "B": 3, "C": 3}
    finally:
        stack.close()


def test_permanent_failures_go_to_the_dlq_and_the_group_proceeds(stack: Stack,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    start(stack, "A")
    sqs, q = stack.sqs, stack.queue_url
    t = SqsTransport(sqs, q)
    t.send([("A", Event(id="i1", name="inc"))])
    sqs.send_message(QueueUrl=q, MessageBody='{"target_id": "A", "event": {"name": "inc"}}',
                     MessageGroupId="A", MessageDeduplicationId="bad-1")
    t.send([("A", Event(id="i2", name="inc")), ("ghost", Event(id="g1", name="inc")),
            ("new", Event(id="new:start", name="durastate.start", data={"definition_id": "nope"}))])
    capsys.readouterr()
    batch = receive_batch(stack)
    assert len(batch) == 5
    log_lines = io.StringIO()
    handler = stack.worker.logger.registered_handler
    previous = handler.setStream(log_lines)
    try:
        assert stack.call_worker(lambda_event(batch, stack))["batchItemFailures"] == []
    finally:
        handler.setStream(previous)
    assert count(stack, "A") == 2  # i1 and i2: the malformed record between them did not block A
    letters = receive_all(sqs, stack.dlq_url)
    reasons = {m["MessageAttributes"]["durastate.error"]["StringValue"]: m for m in letters}
    assert set(reasons) == {"MalformedEvent", "UnknownExecution", "UnknownDefinition"}
    bad = reasons["MalformedEvent"]
    assert bad["Body"] == '{"target_id": "A", "event": {"name": "inc"}}'  # verbatim, so it can be redriven
    assert "event.id is missing" in bad["MessageAttributes"]["durastate.reason"]["StringValue"]
    assert bad["MessageAttributes"]["durastate.source_message_id"]["StringValue"] == batch[1]["MessageId"]
    assert "no execution 'ghost'" in reasons["UnknownExecution"]["MessageAttributes"]["durastate.reason"][
        "StringValue"]
    assert reasons["UnknownExecution"]["MessageAttributes"]["durastate.event_id"]["StringValue"] == "g1"
    out = capsys.readouterr().out
    totals = metrics_out(out)
    assert totals["DeadLettered"] == 3 and totals["EventsApplied"] == 2
    logged = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    ghost = [e for e in logged if e.get("execution_id") == "ghost"]
    assert ghost and all(e["event_id"] == "g1" for e in ghost)


def test_duplicate_delivery_changes_nothing(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    start(stack, "A")
    sqs, q = stack.sqs, stack.queue_url
    SqsTransport(sqs, q).send([("A", Event(id="i1", name="inc"))])
    [m] = receive_batch(stack)
    event = lambda_event([m], stack)
    capsys.readouterr()
    assert stack.call_worker(event)["batchItemFailures"] == []
    before = stack.raw_store.load("A")
    # The same record again (an SQS at-least-once redelivery), and the same event in a new message.
    assert stack.call_worker(event)["batchItemFailures"] == []
    sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])
    sqs.send_message(QueueUrl=q, MessageBody=m["Body"], MessageGroupId="A", MessageDeduplicationId="other")
    assert stack.call_worker(lambda_event(receive_batch(stack), stack))["batchItemFailures"] == []
    after = stack.raw_store.load("A")
    assert before is not None and after is not None
    assert after.version == before.version and after.context == before.context and count(stack, "A") == 1
    totals = metrics_out(capsys.readouterr().out)
    assert totals["EventsApplied"] == 1 and totals["Duplicates"] == 2


def test_an_event_a_suspended_execution_holds_is_processed_not_failed(
        stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    """Held (suspended, retrying, failed awaiting a redrive) is a success: not a batch item failure that
    SQS would redeliver after the visibility timeout, holding back the execution's later events."""
    start(stack, "A")
    stack.runtime.worker.handle("A", Event(id="s", name="durastate.suspend"))
    SqsTransport(stack.sqs, stack.queue_url).send([("A", Event(id="i1", name="inc")),
                                                   ("A", Event(id="i2", name="inc"))])
    batch = receive_batch(stack)
    capsys.readouterr()
    assert stack.call_worker(lambda_event(batch, stack))["batchItemFailures"] == []
    exe = stack.raw_store.load("A")
    assert exe is not None and exe.status == "suspended" and [e.id for e in exe.held] == ["i1", "i2"]
    totals = metrics_out(capsys.readouterr().out)
    assert totals["EventsHeld"] == 2 and "Failures" not in totals


def test_relay_crash_between_send_and_ack_duplicates_nothing(queues: tuple[str, str],
                                                             definitions: Path) -> None:
    crash = {"armed": True}

    class CrashOnAck(Proxy):
        def ack_outbox(self, seq: int) -> None:
            if crash["armed"]:
                crash["armed"] = False
                raise RuntimeError("relay killed after send, before ack")
            self.inner.ack_outbox(seq)

    stack = make_stack(queues, definitions, CrashOnAck)
    try:
        start(stack, "A", peer="B")
        start(stack, "B")
        stack.runtime.worker.handle("A", Event(id="p1", name="poke"))  # emits inc -> B, in A's outbox
        with pytest.raises(RuntimeError, match="relay killed"):
            stack.call_relay()
        assert len(stack.raw_store.pending_outbox()) == 1  # sent, not acked
        stats = stack.call_relay()  # the next trigger delivers it again, then acks
        assert stats["sent"] == 1 and stack.raw_store.pending_outbox() == []
        # Bypass SQS's five-minute deduplication too: deliver the relayed event a second time ourselves.
        [m] = receive_batch(stack)
        stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody=m["Body"], MessageGroupId="B",
                               MessageDeduplicationId="after-the-window")
        assert stack.call_worker(lambda_event([m], stack))["batchItemFailures"] == []
        stack.sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=m["ReceiptHandle"])
        stack.pump()
        assert count(stack, "B") == 1
    finally:
        stack.close()


def test_sweep_racing_a_rearm_keeps_the_rearmed_timer(queues: tuple[str, str], definitions: Path) -> None:
    holder: dict[str, Stack] = {}

    class RearmDuringSweep(Proxy):
        def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
            due: list[tuple[str, str, float]] = self.inner.due_timers(now, since)
            if due and "raced" not in holder:
                holder["raced"] = holder["stack"]
                holder["stack"].clock.advance(5)
                holder["stack"].runtime.worker.handle("A", Event(id="r1", name="rearm"))
            return due

    stack = make_stack(queues, definitions, RearmDuringSweep)
    holder["stack"] = stack
    try:
        start(stack, "A")
        stack.runtime.worker.handle("A", Event(id="w1", name="wait"))
        exe = stack.raw_store.load("A")
        assert exe is not None and exe.active_path == "waiting"
        first = exe.timers["waiting"]
        stack.clock.advance(31)
        assert stack.call_sweeper()["fired"] == 1  # swept the old timer while A re-armed
        rearmed = stack.raw_store.load("A")
        assert rearmed is not None and rearmed.timers["waiting"] == first + 36
        assert stack.raw_store.due_timers(first + 36) == [("A", "waiting", first + 36)]  # survived
        stack.pump()  # the stale timeout is applied and ignored
        exe = stack.raw_store.load("A")
        assert exe is not None and exe.active_path == "waiting"
        assert stack.advance(30) == 1  # the re-armed timer fires on time
        exe = stack.raw_store.load("A")
        assert exe is not None and exe.active_path == "idle" and not exe.timers
    finally:
        stack.close()


def test_relay_skips_stream_batches_without_inserts_and_publishes_untargeted(stack: Stack) -> None:
    from durastate.devstack import dynamodb_stream_event, scheduled_event

    removes = dynamodb_stream_event("durastatet_outbox", [{"seq": {"N": "3"}}], keys=["seq"], event_name="REMOVE")
    assert stack.call_relay(removes)["skipped"] is True
    assert stack.call_relay(scheduled_event("backstop", REGION))["trigger"] == "schedule"
    start(stack, "A")
    stack.runtime.worker.handle("A", Event(id="s1", name="shout"))
    res = stack.call_relay()
    assert res["published"] == 1 and res["sent"] == 0  # no bus configured: logged, acked, not lost
    assert stack.raw_store.pending_outbox() == []


def test_relay_publishes_untargeted_emits_to_the_event_bus(queues: tuple[str, str], definitions: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    events = boto3.client("events", region_name=REGION)
    events.create_event_bus(Name="durastate-bus")
    sqs = boto3.client("sqs", region_name=REGION)
    notices = sqs.create_queue(QueueName="notices")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=notices, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="shouts", EventBusName="durastate-bus",
                    EventPattern=json.dumps({"detail-type": ["shouted"]}))
    events.put_targets(Rule="shouts", EventBusName="durastate-bus", Targets=[{"Id": "q", "Arn": arn}])
    monkeypatch.setenv("DURASTATE_EVENT_BUS_NAME", "durastate-bus")
    stack = Stack(*queues, definitions)
    try:
        start(stack, "A")
        stack.runtime.worker.handle("A", Event(id="i1", name="inc"))
        stack.runtime.worker.handle("A", Event(id="s1", name="shout"))
        assert stack.call_relay()["published"] == 1
        [m] = receive_all(sqs, notices)
        body = json.loads(m["Body"])
        assert (body["source"], body["detail-type"], body["detail"]["data"]) == ("durastate", "shouted", {"n": 1})
    finally:
        stack.close()


def test_disabled_metrics_stay_disabled_in_a_warm_container(stack: Stack, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """With POWERTOOLS_METRICS_DISABLED, Powertools skips each flush but keeps the values; left alone they
    pile up across invocations until add_metric prints them at 100 (metrics published after all) and a
    later flush warns it has nothing. Each handler starts empty instead: nothing printed, nothing warned."""
    import warnings

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "No application metrics to publish" would fail the test
        for _ in range(120):  # the sweeper adds three metrics a run: 100 values of each without the reset
            stack.call_sweeper()
    assert metrics_out(capsys.readouterr().out) == {}


def test_a_batch_publishes_one_value_per_metric(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    """The worker sums each outcome over its batch: one EMF value per metric, not one per record."""
    start(stack, "A", "B", "C")
    SqsTransport(stack.sqs, stack.queue_url).send([(t, Event(id=f"{t}-inc", name="inc")) for t in "ABC"])
    capsys.readouterr()
    assert stack.call_worker(lambda_event(receive_batch(stack), stack))["batchItemFailures"] == []
    [doc] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert doc["EventsApplied"] in (3.0, [3.0])


def test_the_worker_lambda_applies_the_rule_for_derived_ids(stack: Stack) -> None:
    """On the AWS path (SQS FIFO, the worker Lambda, DynamoDB on moto): a forged early timeout with its true
    id, a control event to a schedule record and a pre-claimed redrive id, put on the queue as any producer
    can, are dead-lettered or left unrecorded — and the true timeout still fires when it is due (SQS does
    not drop it as a duplicate of the forged one: the runtime's derived ids get keyed deduplication ids)."""
    from durastate.engine.ids import redrive_event_id, timeout_event_id

    start(stack, "A")
    stack.runtime.worker.handle("A", Event(id="w", name="wait"))
    exe = stack.raw_store.load("A")
    assert exe is not None
    fire_at = exe.timers["waiting"]
    early = timeout_event_id("A", "waiting", fire_at)
    body = {"target_id": "A", "event": {"id": early, "name": "durastate.timeout",
                                        "data": {"path": "waiting", "fire_at": fire_at, "swept": True}}}
    stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body), MessageGroupId="A",
                           MessageDeduplicationId=early.replace(":", "-")[:128])
    SqsTransport(stack.sqs, stack.queue_url).send([
        ("~schedule~hb", Event(id="t", name="durastate.terminate")),
        ("A", Event(id=redrive_event_id("w", 1), name="inc")),
    ])
    stack.pump()
    letters = receive_all(stack.sqs, stack.dlq_url)
    errors = sorted(m["MessageAttributes"]["durastate.error"]["StringValue"] for m in letters)
    assert errors == ["ReservedId", "TimerNotDue"]
    exe = stack.raw_store.load("A")
    assert exe is not None and (exe.active_path, exe.context["count"]) == ("waiting", 0)
    assert not stack.raw_store.is_processed("A", redrive_event_id("w", 1))
    # Still in the queue when the sweeper sends the true timeout, under the deduplication id the runtime
    # used to give it (the event id): SQS drops a message whose id it saw within five minutes.
    stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body), MessageGroupId="A",
                           MessageDeduplicationId=sqs_id(early))
    assert stack.advance(31) == 1
    exe = stack.raw_store.load("A")
    assert exe is not None and exe.active_path == "idle", "the true timeout did not fire"


def test_the_worker_lambda_under_a_global_provider_links_each_event_to_its_producer(stack: Stack) -> None:
    """As under the ADOT layer: the process has a global provider. The context comes from the record's
    ``traceparent`` attribute or, failing that, its X-Ray ``AWSTraceHeader``; a redelivery makes no span."""
    from tests.otel import as_global, linked, memory_provider, spans_of

    provider, exporter = memory_provider()
    tp = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    with as_global(provider):
        start(stack, "A")
        stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(
            {"target_id": "A", "event": {"id": "i1", "name": "inc"}}), MessageGroupId="A",
            MessageDeduplicationId="i1", MessageAttributes={"traceparent": {"DataType": "String", "StringValue": tp}})
        [m] = receive_batch(stack)
        event = lambda_event([m], stack)
        assert stack.call_worker(event)["batchItemFailures"] == []
        assert stack.call_worker(event)["batchItemFailures"] == []  # redelivered: a duplicate
        stack.sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=m["ReceiptHandle"])
        SqsTransport(stack.sqs, stack.queue_url).send([("A", Event(id="i2", name="inc"))])
        [m2] = receive_batch(stack)
        m2.setdefault("Attributes", {})["AWSTraceHeader"] = xray  # what SQS adds under X-Ray active tracing
        assert stack.call_worker(lambda_event([m2], stack))["batchItemFailures"] == []
    spans = list(exporter.get_finished_spans())
    (first,) = [s for s in spans_of(spans, "A", "inc") if s.attributes and s.attributes["durastate.event.id"] == "i1"]
    (second,) = [s for s in spans_of(spans, "A", "inc") if s.attributes and s.attributes["durastate.event.id"] == "i2"]
    assert int("b" * 16, 16) in linked(first)
    assert int("53995c3f42cd8ad8", 16) in linked(second)
    assert {s.context.trace_id for s in spans_of(spans, "A")} == {spans_of(spans, "A")[0].context.trace_id}
