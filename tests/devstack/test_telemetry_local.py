"""OpenTelemetry on the local AWS stack: the packaged handlers, run as Lambda would with a tracer provider the
process configured (what the ADOT layer does), make an order's whole life one linked trace — through the
outbox in DynamoDB, the SQS message attribute and body, the relay's region spawns and the sweeper's timer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from durastate.devstack import LocalStack
from tests.otel import as_global, linked, memory_provider, parent_of, spans_of, the_span

from .helpers import QUIET, FakeClock, executions, send, settle, start

pytestmark = pytest.mark.slow


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def otel() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider, exporter = memory_provider()
    with as_global(provider):
        yield provider, exporter


@pytest.fixture()
def stack(cloud_assembly: Path, clock: FakeClock,
          otel: tuple[TracerProvider, InMemorySpanExporter]) -> Iterator[LocalStack]:
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=clock, retry_delay=0,
                    environment=QUIET) as st:
        yield st


def test_an_orders_whole_life_is_one_linked_trace_on_the_local_stack(
        stack: LocalStack, clock: FakeClock, otel: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = otel
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    # A producer's span, handed over as an instrumented producer does: the SQS message attribute.
    with provider.get_tracer("shop").start_as_current_span("checkout") as checkout:
        ctx = checkout.get_span_context()
        traceparent = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    body = json.dumps({"target_id": "o1", "event": {"id": "o1:start", "name": "durastate.start",
                                                    "data": {"definition_id": "order", "context": {}}}})
    sqs.send_message(QueueUrl=q, MessageBody=body, MessageGroupId="o1", MessageDeduplicationId="o1:start",
                     MessageAttributes={"traceparent": {"DataType": "String", "StringValue": traceparent}})
    send(sqs, q, "o1", "add_item", {"price": 30})
    send(sqs, q, "o1", "submit")
    settle(stack)
    send(sqs, q, "o1~1", "authorize", {"receipt": "R-1"})
    settle(stack)
    send(sqs, q, "o1", "label_printed", {"tracking": "T-1"})
    send(sqs, q, "o1", "hold")
    settle(stack)
    clock.advance(86_400 + 60)  # on hold for a day: the sweeper fires the timer, the order is cancelled
    settle(stack)
    start(sqs, q, "other")  # an execution no traced producer started: a trace of its own
    settle(stack)
    exes = executions(ddb)
    assert (exes["o1"]["status"], exes["o1"]["outcome"]) == ("finished", "cancelled")

    spans = [s for s in exporter.get_finished_spans() if s.attributes and "workflow.execution.id" in s.attributes]
    family = [s for s in spans if s.attributes and str(s.attributes["workflow.execution.id"]).startswith("o1")]
    assert {s.context.trace_id for s in family} == {ctx.trace_id}  # one trace, the producer's
    assert {s.attributes["workflow.execution.id"] for s in family if s.attributes} == {"o1", "o1~1", "o1~2", "o1~3"}
    assert {s.context.trace_id for s in spans_of(spans, "other")} != {ctx.trace_id}

    root = the_span(spans, "o1", "durastate.start")
    assert parent_of(root) == ctx.span_id
    assert all(parent_of(s) == root.context.span_id for s in spans_of(spans, "o1") if s is not root)
    assert parent_of(the_span(spans, "o1~1", "durastate.start")) == the_span(spans, "o1", "submit").context.span_id
    entered = spans_of(spans, "o1", "durastate.finished")[0]
    assert the_span(spans, "o1~1", "authorize").context.span_id in linked(entered)
    for region in ("o1~2", "o1~3"):
        assert parent_of(the_span(spans, region, "durastate.start")) == entered.context.span_id
    assert the_span(spans, "o1", "hold").context.span_id in linked(the_span(spans, "o1", "durastate.timeout"))
    # one span per committed event, however the messages were delivered
    assert len(spans_of(spans, "o1", "add_item")) == 1
