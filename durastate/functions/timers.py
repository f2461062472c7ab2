"""The timers Lambda: delayed timeouts from the standard timers queue in → applied to their executions.

Timers due within 15 minutes are sent to the timers queue as soon as they are armed (by the worker after
its commit, or by the sweeper when they come within range), each with a ``DelaySeconds`` that ends when it
is due. This function receives them then and applies each timeout as the worker does — dedupe marks, the
execution's compare-and-swap, the stale-timer check — so the timer fires within about a second of its due
time instead of up to a sweep late (``durastate.runtime.aws.AwsRuntime.fire_timers``).

Why apply here instead of forwarding to the FIFO event queue: forwarding is a second request per timer
(the hop is the first). A timeout is the clock's event, not part of any producer's order, and the
compare-and-swap serialises it with whatever the worker commits for the same execution meanwhile.
Partial batch responses: a timeout that fails for now (throttling, a conflict past the retry bound) comes
back alone after the queue's visibility timeout; one that can never apply goes to the dead-letter queue.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from durastate.runtime import aws, telemetry

DEFINITIONS_DIR = Path(__file__).resolve().parent / "definitions"

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-timers")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "durastate")
tracer = Tracer(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-timers")

#: The metric each outcome counts in (a timeout for a suspended or retrying execution is held in it).
OUTCOME_METRICS: dict[aws.Outcome, str] = {
    "applied": "TimersApplied", "duplicate": "Duplicates", "ignored": "EventsIgnored", "held": "EventsHeld",
    "dead-lettered": "DeadLettered"}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (``timers.handler``) for the timers queue's event source."""
    if is_metrics_disabled():  # what a disabled flush kept: see the worker module's docstring
        metrics.clear_metrics()
    rt = aws.get_runtime(DEFINITIONS_DIR)
    records = [(str(r.get("messageId") or ""), str(r.get("body") or "")) for r in event.get("Records") or []]
    outcomes, failed = rt.fire_timers(records)
    # Always one metric: an invocation whose messages all went back to the sweeper (or had nothing to
    # apply) would otherwise publish none, and Powertools warns about it on every such invocation.
    metrics.add_metric(name="TimerMessages", unit=MetricUnit.Count, value=len(records))
    for outcome, count in outcomes.items():
        metrics.add_metric(name=OUTCOME_METRICS[outcome], unit=MetricUnit.Count, value=count)
    if failed:
        metrics.add_metric(name="Failures", unit=MetricUnit.Count, value=len(failed))
    logger.info("timers applied", extra={"received": len(records), "failed": len(failed),
                                              **{str(k): v for k, v in outcomes.items()}})
    telemetry.flush()  # the timeouts' spans leave before Lambda may freeze the function
    return {"batchItemFailures": [{"itemIdentifier": mid} for mid in failed]}
