"""The worker Lambda: an SQS FIFO batch in → the runtime's worker applies each event → a partial response out.

Why this shape:

* **Powertools' ``SqsFifoPartialProcessor`` with ``skip_group_on_error=True``.** FIFO order matters only
  *within* a message group (one group = one execution). When a record fails, the processor fails that
  record and every later record *of its group* in the batch, and keeps processing the other groups: the
  ``batchItemFailures`` it returns are exactly the records SQS must redeliver to keep each execution's
  order, and an unrelated execution is never held back by another one's failure. The response is always
  a partial response (``raise_on_entire_batch_failure`` off): when every record fails, listing them all
  is equivalent to raising, and keeps one code path.
* **Permanent vs. transient.** A record that can never succeed (malformed body, unknown definition, an
  event for an execution that does not exist, a result over DynamoDB's limits) is moved to the
  dead-letter queue by the handler with its reason and counts as *processed* — retrying it would only
  block its group. A transient failure (throttling, a conflict past the retry bound) raises, so SQS
  redelivers the record later, in order, however many receives it takes; an unexpected error (a bug) is
  dead-lettered with its reason once the record was received ``DURASTATE_MAX_ATTEMPTS`` times (5).
* **Backoff by visibility.** Every record handed back (a failure, or a later record of its group) is
  hidden for a delay that grows with its receive count (``ChangeMessageVisibility``: 1-2 s, doubling, at
  most 15 minutes; :meth:`~durastate.runtime.aws.AwsRuntime.back_off`), instead of the queue's 180 s
  visibility timeout each time: a blip is retried within seconds, an outage does not run up receives.
* **Metrics** (EMF through Powertools, namespace ``POWERTOOLS_METRICS_NAMESPACE``): ``EventsApplied``,
  ``Duplicates``, ``EventsIgnored``, ``EventsHeld`` (kept by a suspended, retrying or failed execution,
  applied later); ``DeadLettered`` (moved to the DLQ with a reason); ``Failures``
  (records handed back for SQS to redeliver) and ``Retries`` (records received again after such a
  failure: ``ApproximateReceiveCount`` > 1); ``Redrives`` (records replayed from the dead-letter
  queue, e.g. ``durastate dead-letters replay``, recognised by their ``durastate.replay_of`` attribute);
  ``Conflicts`` (commits that lost the compare-and-swap and were retried). One value per metric per
  batch. With metrics disabled (``POWERTOOLS_METRICS_DISABLED``, ``POWERTOOLS_DEV``) Powertools skips the
  flush but keeps what was added, so in a warm container the values would pile up until ``add_metric``
  prints them anyway at 100 and a later flush warns that it has nothing: every handler starts with
  ``clear_metrics()`` then.
* **Logs: a line per batch, failures always.** INFO is one ``batch done`` line per invocation with the
  outcome counts; every failure is a WARNING or an ERROR line of its own, with the record's keys. The
  per-record ``applied`` / ``duplicate`` / ``ignored`` lines are DEBUG, and Powertools' log sampling
  (``POWERTOOLS_LOGGER_SAMPLE_RATE``, default 0.01 here) turns DEBUG on for that share of invocations —
  enough to follow a record through, at a hundredth of the CloudWatch Logs bill of a line per record.
* **Thin.** Parsing, applying and dead-lettering live in :mod:`durastate.runtime.aws`, shared with the local
  stack and the tests; this module only wires Powertools around it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from durastate.errors import StoreConflict
from durastate.runtime import aws, telemetry
from durastate.transport.sqs import REPLAY_OF
from durastate.transport.tracecontext import from_message_attributes
from durastate.transport.wire import Envelope

DEFINITIONS_DIR = Path(__file__).resolve().parent / "definitions"

SAMPLE_RATE = float(os.environ.get("POWERTOOLS_LOGGER_SAMPLE_RATE") or 0.01)
"""Share of invocations logged at DEBUG (one record line each); the rest log one INFO line per batch."""

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-worker", sampling_rate=SAMPLE_RATE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "durastate")
tracer = Tracer(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "durastate-worker")

if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):  # on Lambda: durastate's own log lines as structured JSON too
    copy_config_to_registered_loggers(source_logger=logger, include={logging.getLogger("durastate").name})

processor = SqsFifoPartialProcessor(skip_group_on_error=True)
processor.raise_on_entire_batch_failure = False

_RECORD_KEYS = ["message_id", "message_group_id", "execution_id", "event_id", "event_name"]
OUTCOME_METRICS: dict[aws.Outcome, str] = {
    "applied": "EventsApplied", "duplicate": "Duplicates", "ignored": "EventsIgnored", "held": "EventsHeld",
    "dead-lettered": "DeadLettered"}


_batch: dict[str, int] = {}
"""The current batch's outcome counts: its one INFO line, and one value per metric for the batch (an EMF
line carries one number per metric, not one per record)."""


def _count(name: str, value: int = 1) -> None:
    if value:
        _batch[name] = _batch.get(name, 0) + value


@tracer.capture_method
def record_handler(record: SQSRecord) -> str:
    """Process one record; return its outcome, or raise to report it as a batch item failure."""
    rt = aws.get_runtime(DEFINITIONS_DIR)
    logger.append_keys(message_id=record.message_id, message_group_id=record.attributes.message_group_id)

    def parsed(env: Envelope) -> None:
        logger.append_keys(execution_id=env.target_id, event_id=env.event.id, event_name=env.event.name)

    attempts = _receive_count(record)
    if attempts > 1:
        _count("Retries")
    if REPLAY_OF in (record.raw_event.get("messageAttributes") or {}):
        _count("Redrives")
    conflicts_before = rt.worker.conflicts
    try:
        outcome = rt.process(record.body, message_id=record.message_id,
                             group_id=record.attributes.message_group_id, on_parsed=parsed, attempts=attempts,
                             traceparent=from_message_attributes(record.raw_event.get("messageAttributes"),
                                                                 record.raw_event.get("attributes")))
    except StoreConflict:
        _count("Failures")
        logger.warning("conflicts past the retry bound; SQS will redeliver", exc_info=True)
        raise
    except Exception:
        _count("Failures")
        logger.exception("transient failure; SQS will redeliver")
        raise
    else:
        _count(OUTCOME_METRICS[outcome])
        if outcome == "dead-lettered":
            logger.warning("record can never be applied: moved to the dead-letter queue with its reason")
        else:
            logger.debug(outcome)
        return outcome
    finally:
        _count("Conflicts", rt.worker.conflicts - conflicts_before)
        logger.remove_keys(_RECORD_KEYS)


def _receive_count(record: SQSRecord) -> int:
    try:
        return max(1, int(record.attributes.get("ApproximateReceiveCount") or 1))
    except ValueError:
        return 1


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (``worker.handler``) for the SQS event source with ReportBatchItemFailures."""
    if is_metrics_disabled():  # what a disabled flush kept: see the worker module's docstring
        metrics.clear_metrics()
    _batch.clear()
    response = dict(process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                             context=context))
    items = response.get("batchItemFailures")
    failed = {str(f.get("itemIdentifier")) for f in items} if isinstance(items, list) else set()
    if failed:
        records = [SQSRecord(r) for r in event.get("Records") or []]
        aws.get_runtime(DEFINITIONS_DIR).back_off(
            [(r.receipt_handle, _receive_count(r)) for r in records if r.message_id in failed])
    for name, value in _batch.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    logger.info("batch done", extra={"records": len(event.get("Records") or []), **_batch})
    telemetry.flush()  # the spans of this batch leave before Lambda may freeze the function
    return response
