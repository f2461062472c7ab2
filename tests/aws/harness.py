"""A Lambda-on-moto harness for the handler tests: tables, queues, env, the handlers and an invoker loop.

``Stack`` plays AWS Lambda for three of the functions of ``durastate/functions/``: the worker is fed Lambda-shaped
SQS batches by :class:`~durastate.devstack.lambda_emulator.SqsBatchInvoker` (≤ 10 records, FIFO groups kept
by the queue itself), the relay is called with DynamoDB stream batches (and schedule events), the sweeper
with EventBridge schedule events. Time is a :class:`~durastate.runtime.ManualClock` injected into the runtime.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3

from durastate.devstack import (
    FakeLambdaContext,
    HandlerLoop,
    SqsBatchInvoker,
    dynamodb_stream_event,
    scheduled_event,
)
from durastate.runtime import ManualClock
from durastate.runtime import aws as durastate_aws
from durastate.store.base import ExecutionStore

from .conftest import REGION, load_function

PREFIX = "durastatet"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

COUNTER_YAML = """
id: counter
initial: idle
context: {count: 0, peer: null}
states:
  idle:
    on:
      inc: {actions: [{assign: {count: {add: ["$context.count", 1]}}}]}
      wait: waiting
      stop: done
      poke: {actions: [{send: {event: inc, to: "$context.peer"}}]}
      shout: {actions: [{send: {event: shouted, data: {n: "$context.count"}}}]}
  waiting:
    after: {seconds: 30, target: idle}
    on:
      inc: {actions: [{assign: {count: {add: ["$context.count", 1]}}}]}
      rearm: waiting
  done: {type: final, outcome: ok}
"""

_FUNCTIONS: dict[str, ModuleType] = {}


def function(name: str) -> ModuleType:
    """The handler module ``durastate/functions/<name>.py``, imported once per test session (as a warm container)."""
    if name not in _FUNCTIONS:
        _FUNCTIONS[name] = load_function(name)
    return _FUNCTIONS[name]


def make_store(dynamodb: Any) -> ExecutionStore:
    """The DynamoDB store over moto, its seven tables created (the CDK stack's job in production)."""
    from durastate.store.dynamodb.sync import DynamoDBStore

    store = DynamoDBStore(dynamodb, prefix=PREFIX)
    ensure = getattr(store, "ensure_tables", None) or getattr(store, "_ensure_tables", None)
    if ensure is not None:
        ensure()
    return store


class Stack:
    """Everything one test needs; build it inside ``mock_aws``."""

    def __init__(self, queue_url: str, dlq_url: str, definitions: Path,
                 wrap_store: Callable[[ExecutionStore], ExecutionStore] | None = None) -> None:
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.queue_url, self.dlq_url = queue_url, dlq_url
        self.clock = ManualClock(1_800_000_000.0)
        os.environ.update({"DURASTATE_TABLE_PREFIX": PREFIX, "DURASTATE_QUEUE_URL": queue_url,
                           "DURASTATE_DLQ_URL": dlq_url, "DURASTATE_DEFINITIONS_DIR": str(definitions)})
        self.raw_store = make_store(self.dynamodb)
        self.store = wrap_store(self.raw_store) if wrap_store else self.raw_store
        self.runtime = durastate_aws.build_runtime(durastate_aws.AwsSettings.from_env(), clock=self.clock,
                                               sqs=self.sqs, store=self.store)
        durastate_aws.set_runtime(self.runtime)
        self.worker = function("worker")
        self.relay = function("relay")
        self.sweeper = function("sweeper")
        self.invoker = SqsBatchInvoker(self.sqs, queue_url, self.worker.handler, retry_delay=0,
                                       region=REGION)
        # Schedules never fire by themselves here: tests call the sweeper (``advance``) explicitly.
        self.loop = HandlerLoop(self.invoker, self.relay.handler, self.sweeper.handler,
                                relay_every=float("inf"), sweep_every=float("inf"), clock=lambda: 0.0,
                                region=REGION, stream_table=f"{PREFIX}_outbox")

    def close(self) -> None:
        durastate_aws.set_runtime(None)
        for name in ("DURASTATE_TABLE_PREFIX", "DURASTATE_QUEUE_URL", "DURASTATE_DLQ_URL", "DURASTATE_DEFINITIONS_DIR"):
            os.environ.pop(name, None)

    # -- invoking the functions as Lambda would ---------------------------------------------------
    def call_worker(self, event: dict[str, Any]) -> Any:
        return self.worker.handler(event, FakeLambdaContext(function_name="durastate-worker", region=REGION))

    def call_relay(self, event: dict[str, Any] | None = None) -> Any:
        if event is None:  # what the outbox stream delivers after a commit: one INSERT is enough
            event = dynamodb_stream_event(f"{PREFIX}_outbox", [{"seq": {"N": "1"}}], keys=["seq"],
                                          region=REGION)
        return self.relay.handler(event, FakeLambdaContext(function_name="durastate-relay", region=REGION))

    def call_sweeper(self) -> Any:
        return self.sweeper.handler(scheduled_event("durastate-sweep", REGION),
                                    FakeLambdaContext(function_name="durastate-sweeper", region=REGION))

    def pump(self) -> int:
        """Worker batches and relay passes until the queue, the outbox and the spawns are all empty."""
        return self.loop.run_until_idle(max_rounds=200)

    def advance(self, seconds: float) -> int:
        """Move time, run the sweeper as its schedule would, and settle; return the timers fired."""
        self.clock.advance(seconds)
        fired = int(self.call_sweeper()["fired"])
        self.pump()
        return fired
