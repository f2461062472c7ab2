"""The timer sweeper Lambda: an EventBridge schedule in → one bounded sweep → how many fired out.

Each due timer becomes a ``durastate.timeout`` event with a deterministic id (so a re-sweep after a crash is
deduplicated by SQS and by the worker), sent to the queue, then deleted guarded by its ``fire_at`` (so a
timer re-armed meanwhile survives). At most ``DURASTATE_SWEEP_LIMIT`` timers fire per run: a large backlog
drains over several scheduled runs instead of one run timing out halfway.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
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
    rt = aws.get_runtime(DEFINITIONS_DIR)
    limit = rt.settings.sweep_limit
    fired = rt.run_sweeper(limit)
    metrics.add_metric(name="TimersFired", unit=MetricUnit.Count, value=fired)
    result = {"fired": fired, "limit": limit, "more": fired >= limit}
    logger.info("sweep done", extra=result)
    return result
