"""The timer sweeper Lambda: an EventBridge schedule in → one bounded sweep → how many fired out.

Each due timer becomes a ``durastate.timeout`` event with a deterministic id (so a re-sweep after a crash is
deduplicated by SQS and by the worker), sent to the queue, then deleted guarded by its ``fire_at`` (so a
timer re-armed meanwhile survives). At most ``DURASTATE_SWEEP_LIMIT`` timers fire per run: a large backlog
drains over several scheduled runs instead of one run timing out halfway.

Schedules ride on the same run: the container's first run stores the deployment's schedules (the
definitions folder's ``schedules:`` files and ``DURASTATE_SCHEDULES``), and a schedule's due ``tick`` timer
starts its execution through the outbox instead of sending a timeout (``durastate.runtime.schedules``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from durastate.runtime import aws

DEFINITIONS_DIR = Path(__file__).resolve().parent / "definitions"

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-sweeper")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "durastate")
tracer = Tracer(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-sweeper")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (``sweeper.handler``) for the EventBridge schedule."""
    if is_metrics_disabled():  # what a disabled flush kept: see the worker module's docstring
        metrics.clear_metrics()
    rt = aws.get_runtime(DEFINITIONS_DIR)
    limit = rt.settings.sweep_limit
    fired = rt.run_sweeper(limit)
    hopped = rt.sweeper.hopped  # handed to the timers queue, delayed until due (the rest fired now)
    metrics.add_metric(name="TimersFired", unit=MetricUnit.Count, value=fired - hopped)
    metrics.add_metric(name="TimersHopped", unit=MetricUnit.Count, value=hopped)
    result: dict[str, Any] = {"fired": fired - hopped, "hopped": hopped, "limit": limit, "more": fired >= limit}
    purge = rt.run_retention()  # the construct's `retention`: bounded purge batches, tombstones by TTL
    if purge is not None:
        metrics.add_metric(name="ExecutionsPurged", unit=MetricUnit.Count, value=purge.purged)
        result["purged"] = purge.purged
        result["purge_more"] = purge.more
    logger.info("sweep done", extra=result)
    return result
