"""The relay Lambda: a stream or schedule event in → the runtime's relay passes → counts out.

It is triggered two ways, and does the same thing for both:

* **DynamoDB streams** of the outbox and spawns tables (``NEW_IMAGE``, inserts only), so an emitted event
  or a fork is delivered as soon as its commit lands — no waiting for a schedule. The stream records are
  only a wake-up call: the relay reads the tables themselves (spawns first, so a region child exists
  before any event forwarded to it, then the outbox) and acks only what it delivered.
* **An EventBridge schedule**, the backstop for anything a failed or throttled stream invocation missed.

Work per invocation is bounded (``DURASTATE_RELAY_BUDGET`` items per pass, more passes only while time
remains); what is left is picked up by the next trigger. Delivery is idempotent end to end (SQS
deduplication by event id, the worker's dedupe marks, idempotent child creation), so concurrent or
crashed relays duplicate nothing in effect.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from durastate.runtime import aws, telemetry

DEFINITIONS_DIR = Path(__file__).resolve().parent / "definitions"

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-relay")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "durastate")
tracer = Tracer(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-relay")


def _trigger(event: dict[str, Any]) -> tuple[str, int, set[int] | None]:
    """("stream", inserted items, their queue shards) for a DynamoDB stream batch, else ("schedule", 0, None).

    The shards are read from the inserted items' keys, so the pass Queries only those; a record whose key
    names no shard makes the pass read them all."""
    if isinstance(event.get("Records"), list):
        stream = DynamoDBStreamEvent(event)
        shards: set[int] | None = set()
        inserts = 0
        for r in stream.records:
            if r.event_name is None or r.event_name.name != "INSERT":
                continue
            inserts += 1
            shard = ((r.raw_event.get("dynamodb") or {}).get("Keys") or {}).get("shard", {}).get("S")
            if shards is not None and shard is not None and shard.isdigit():
                shards.add(int(shard))
            else:
                shards = None
        return "stream", inserts, shards
    return "schedule", 0, None


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (``relay.handler``)."""
    if is_metrics_disabled():  # what a disabled flush kept: see the worker module's docstring
        metrics.clear_metrics()
    trigger, inserts, shards = _trigger(event)
    logger.append_keys(trigger=trigger)
    metrics.add_metric(name="RelayRuns", unit=MetricUnit.Count, value=1)
    if trigger == "stream" and inserts == 0:
        # Acks delete outbox/spawn items; if the stream filter lets their REMOVE records through there is
        # nothing new to deliver.
        return {"trigger": trigger, "skipped": True, "spawned": 0, "sent": 0, "published": 0, "passes": 0}
    rt = aws.get_runtime(DEFINITIONS_DIR)
    stats, passes = rt.run_relay(remaining_ms=context.get_remaining_time_in_millis, shards=shards)
    for name, value in (("Spawned", stats.spawned), ("Relayed", stats.sent), ("Published", stats.published)):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    result = {"trigger": trigger, "skipped": False, "spawned": stats.spawned, "sent": stats.sent,
              "published": stats.published, "passes": passes}
    logger.info("relay pass done", extra=result)
    telemetry.flush()  # the region children's spans leave before Lambda may freeze the function
    return result
