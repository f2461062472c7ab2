"""DynamoDB cost on the local stack: the deployed handlers, driven only by ``send_message``, every request billed.

The in-process rows of :mod:`bench.dynamo_cost` call the runtime's pieces directly and emulate their
triggers. This mode runs the stack as deployed instead: :class:`durastate.devstack.LocalStack` (moto's HTTP
server, the resources of the synthesized CDK template, the packaged worker / relay / sweeper / timers
handlers called as Lambda calls them), and a client that does nothing but ``send_message`` an event to the
event queue, as any producer would. :class:`bench._meter.Meter` bills every request the handlers make
through the runtime's clients (DynamoDB capacity from the item sizes, twice inside transactions; SQS per
request), and every client ``SendMessage``.

Each path runs on :data:`EXECUTIONS` executions at once, so the worker receives batches of 10 records —
the stack's ``BatchSize`` — whenever the queue holds them: one event per execution per round (FIFO keeps
each execution's events in order; batches mix executions):

- **state-only, first 8 events** and **steady state** (after :data:`dynamo_cost.WARMUP` events, over
  :data:`dynamo_cost.STEADY` more: the occasional spill of event ids is in the average);
- **emit (+ relay)**: ``notify`` sends an event to a peer; the relay's stream-triggered invocations are
  the path's (the peer's own transition is not);
- **timer arm + fire, via the hop**: the arm's commit and its hop to the timers queue; the timers function
  forwarding it when due; the timeout's transition (which deletes the timer);
- **timer arm + fire, via the sweeper**: the same arm, its hop lost (taken off the timers queue), then the
  sweeper firing it once overdue (send, delete) and the timeout's transition;
- **fork/join**: the fork, the relay creating both regions, the forwarded events, the children's steps
  and finish notices, the join — the whole cycle;
- **idle**: an empty sweep (every minute) and an empty relay backstop (every 5 minutes), per minute.

Lambda duration is **measured**: the wall time of each handler invocation on this machine (requests to
moto's server included), billed per invocation rounded up to the millisecond, at the stack's 512 MB
arm64 price. The event source's own requests are counted as the stack makes them: one ``ReceiveMessage``
and one ``DeleteMessageBatch`` per worker (or timers) invocation. moto answers in-process here, so a
request's latency is this machine's, not DynamoDB's (the result says how much of each invocation was
spent inside requests).

``python -m bench.dynamo_cost_local [n_rounds_scale] [baseline_dir]``: the section alone, as JSON.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._meter import Meter, Tally
from bench._util import measure_with_package
from bench.dynamo_cost import DEFS, LAMBDA_MEMORY_GB, PRICES, STEADY, WARMUP
from durastate.store.dynamodb import limits

EXECUTIONS = 10
"""Executions driven side by side: one round of events fills one worker batch of 10."""
EMIT_ROUNDS = 4
QUIET = {"POWERTOOLS_LOG_LEVEL": "ERROR", "POWERTOOLS_METRICS_DISABLED": "true"}
SWEEP_PER_MINUTE = 1.0
BACKSTOP_PER_MINUTE = 1 / 5
POLL_REQUESTS = 2
"""SQS requests the event source makes per invocation it triggers: a ReceiveMessage and a DeleteMessageBatch."""

PATHS: list[tuple[str, str]] = [
    ("state-only, first 8 events", "first8"),
    ("state-only, steady state", "steady"),
    ("with emits (+ relay)", "emit"),
    ("timer arm + fire, via the hop", "hop"),
    ("timer arm + fire, via the sweeper", "timer"),
    ("fork/join (whole cycle)", "fork"),
]


class _Clock:
    """The stack's clock (schedules, the runtime): moved by the driver, never by waiting."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class _Invocations:
    """Each handler invocation: its path, wall time, records, and the time spent inside its requests."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.phase = "setup"
        self.calls: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.in_requests: dict[str, float] = defaultdict(float)
        self.spill_wru: dict[str, float] = defaultdict(float)
        self._t0: list[float] = []

    def wrap(self, role: str, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def call(event: Any, context: Any) -> Any:
            tag = self.phase if role == "worker" else f"{self.phase}:{role}"
            self.meter.tag = tag
            t0 = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                records = len(event.get("Records") or []) if isinstance(event, dict) else 0
                self.calls[tag].append((time.perf_counter() - t0, records))
                self.meter.tag = "poll"

        return call

    def hook(self, client: Any, service: str) -> None:
        client.meta.events.register(f"before-call.{service}.*", self._before)
        client.meta.events.register(f"after-call.{service}.*", self._after)
        if service == "dynamodb":
            for op in ("PutItem", "TransactWriteItems"):
                client.meta.events.register(f"provide-client-params.dynamodb.{op}", self._spills)

    def _spills(self, params: dict[str, Any], **_: Any) -> None:
        """Write units of chunks of spilled event ids (``processed`` puts): the dedupe's share, apart."""
        puts = [(params, 1)] if "Item" in params else [(e["Put"], 2) for e in params.get("TransactItems", [])
                                                        if "Put" in e]
        for put, factor in puts:
            if str(put.get("TableName", "")).endswith("_processed"):
                self.spill_wru[self.meter.tag] += factor * max(1, math.ceil(limits.item_size(put["Item"]) / 1024))

    def _before(self, **_: Any) -> None:
        self._t0.append(time.perf_counter())

    def _after(self, **_: Any) -> None:
        self.in_requests[self.meter.tag] += time.perf_counter() - self._t0.pop()


def _drive(template: Path, scale: float, warmup: int) -> dict[str, Any]:
    from durastate.devstack import LocalStack
    from durastate.devstack.moto_server import endpoint_client
    from durastate.runtime.sweeper import HOP_GRACE
    from durastate.transport.wire import dump_envelope, new_event

    clock = _Clock()
    stack = LocalStack(template, port=0, clock=clock, retry_delay=0, definitions_dir=DEFS, environment=QUIET,
                       real_time_delays=False)
    with stack:
        meter = Meter.for_durastate(stack.environment().get("DURASTATE_TABLE_PREFIX") or "durastate")
        inv = _Invocations(meter)
        for service in ("dynamodb", "sqs"):
            meter.attach(stack.client(service), service)
            inv.hook(stack.client(service), service)
        producer = endpoint_client("sqs", stack.endpoint_url, stack.region)
        meter.attach(producer, "sqs")
        spare = endpoint_client("sqs", stack.endpoint_url, stack.region)  # not billed: plays a lost hop
        for role in list(stack.handlers):
            stack.handlers[role] = inv.wrap(role, stack.handlers[role])
        ids = [f"x{i}" for i in range(EXECUTIONS)]
        seq = [0]

        def send(eid: str, name: str, data: dict[str, Any] | None = None, event_id: str | None = None) -> None:
            """The client: one plain ``send_message`` per event (uuid-sized ids, as a client's are)."""
            seq[0] += 1
            event = new_event(name, data or {}, event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"b/{seq[0]}")))
            meter.tag = f"{inv.phase}:send"
            producer.send_message(QueueUrl=stack.queue_url, MessageBody=dump_envelope(eid, event),
                                  MessageGroupId=eid, MessageDeduplicationId=event.id)
            meter.tag = "poll"

        def drain(streams: bool = True) -> None:
            """The triggers, until nothing is left: worker batches, stream records, due hops."""
            while True:
                busy = stack.poll_worker().received
                busy += stack.poll_streams() if streams else 0
                busy += stack.poll_timers()
                if not busy:
                    return

        def round_of(phase: str, name: str, rounds: int = 1, only: list[str] | None = None) -> None:
            for _ in range(rounds):
                inv.phase = phase
                for eid in only or ids:
                    send(eid, name)
                drain()

        inv.phase = "setup"
        send("peer", "durastate.start", {"definition_id": "costs", "context": {}}, "peer:start")
        for eid in ids:
            send(eid, "durastate.start", {"definition_id": "costs", "context": {"peer": "peer"}}, f"{eid}:start")
        drain()
        round_of("first8", "bump", 7)  # events 2..8 of each execution (the start was the first)
        round_of("setup", "bump", max(0, warmup - 8))
        for i in range(1, EXECUTIONS):  # staggered: execution i is i events ahead, so the executions spill
            round_of("setup", "bump", 1, ids[i:])  # their recent ids at different rounds, as unrelated ones do
        round_of("steady", "bump", max(1, round(STEADY * scale)))
        for _ in range(max(1, round(EMIT_ROUNDS * scale))):
            inv.phase = "emit"
            for eid in ids:
                send(eid, "notify")
            while stack.poll_worker().received:  # the emitting commits
                pass
            while stack.poll_streams():  # the relay's invocations their inserts trigger
                pass
            inv.phase = "setup"
            drain()  # the peer's own transitions
        # a timer delivered by the hop: arm (the worker hops it), due, the timers function forwards it
        inv.phase = "hop"
        for eid in ids:
            send(eid, "arm")
        while stack.poll_worker().received:
            pass
        clock.now += 61
        drain(streams=False)
        # a timer fired by the sweeper: its hop lost, overdue past the grace, swept
        inv.phase = "timer"
        for eid in ids:
            send(eid, "arm")
        while stack.poll_worker().received:
            pass
        while True:  # the hops never arrive
            got = spare.receive_message(QueueUrl=stack.timers_queue_url, MaxNumberOfMessages=10,
                                        WaitTimeSeconds=0).get("Messages") or []
            if not got:
                break
            spare.delete_message_batch(QueueUrl=stack.timers_queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        clock.now += 61 + HOP_GRACE
        stack.run_function("sweeper")
        drain(streams=False)
        for what in ("split", "l", "r"):
            round_of("fork", what)
        ddb = stack.client("dynamodb")
        meter.tag = "check"
        executions = next(n for n in stack.table_names.values() if n.endswith("_executions"))
        for eid in ids:
            item = ddb.get_item(TableName=executions, Key={"id": {"S": eid}}, ConsistentRead=True)["Item"]
            path = json.loads(item["data"]["S"]).get("active_path")
            if path != "idle":
                raise RuntimeError(f"{eid} ended the cycle in {path!r}, not idle")
        inv.phase = "idle"
        for _ in range(EXECUTIONS):
            clock.now += 60
            stack.run_function("sweeper")
            stack.run_function("relay")
        tallies = dict(meter.tallies)
        calls = dict(inv.calls)
        in_requests = dict(inv.in_requests)
        spill_wru = dict(inv.spill_wru)
        with contextlib.suppress(OSError):
            urllib.request.urlopen(urllib.request.Request(f"{stack.endpoint_url}/moto-api/reset", method="POST"),
                                   timeout=30).close()
    return {"tallies": tallies, "calls": calls, "in_requests": in_requests, "spill_wru": spill_wru}


def _lambda_dollars(calls: list[tuple[float, int]]) -> tuple[float, float]:
    """(dollars, billed ms) of these invocations: per request, and per millisecond rounded up each."""
    billed_ms = sum(math.ceil(seconds * 1000.0) for seconds, _ in calls)
    dollars = len(calls) * PRICES["lambda_request"] + billed_ms / 1000.0 * LAMBDA_MEMORY_GB * PRICES["lambda_gb_s_arm"]
    return dollars, float(billed_ms)


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    """Per-transition rows from the tallies and the invocations of one drive."""
    tallies: dict[str, Tally] = raw["tallies"]
    calls: dict[str, list[tuple[float, int]]] = {k: [tuple(c) for c in v] for k, v in raw["calls"].items()}
    paths: dict[str, Any] = {}
    for label, phase in PATHS:
        mine = [t for t in set(tallies) | set(calls) if t == phase or t.startswith(phase + ":")]
        total = Tally()
        for tag in mine:
            if tag in tallies:
                total.add(tallies[tag])
        worker = calls.get(phase, [])
        # the worker's records, and the timeouts the timers function applies itself (the hop's delivery)
        transitions = sum(records for tag in (phase, f"{phase}:timers") for _, records in calls.get(tag, []))
        if not transitions:
            continue
        invocations = [c for tag in mine if tag in calls for c in calls[tag]]
        polled = [c for tag in mine if tag == phase or tag.endswith(":timers") for c in calls.get(tag, [])]
        sqs_requests = total.sqs_requests + POLL_REQUESTS * len(polled)
        lam, billed_ms = _lambda_dollars(invocations)
        ddb = total.wru * PRICES["dynamodb_wru"] + total.rru * PRICES["dynamodb_rru"]
        sqs = sqs_requests * PRICES["sqs_fifo_request"]
        per = 1.0 / transitions
        wall = sum(s for s, _ in invocations)
        inside = sum(raw["in_requests"].get(tag, 0.0) for tag in mine)
        paths[label] = {
            "transitions": transitions,
            "records_per_worker_call": sum(records for _, records in worker) / max(1, len(worker)),
            "all": {**total.scaled(per), "sqs": sqs_requests * per},
            "spill_wru": sum(raw.get("spill_wru", {}).get(tag, 0.0) for tag in mine) * per,
            "lambda": {"invocations": len(invocations) * per, "billed_ms": billed_ms * per,
                       "in_requests_ms": inside * 1000.0 * per, "compute_ms": (wall - inside) * 1000.0 * per},
            "dollars_per_million": {"dynamodb": ddb * per * 1e6, "sqs": sqs * per * 1e6,
                                    "lambda": lam * per * 1e6, "total": (ddb + sqs + lam) * per * 1e6},
        }
    sweeps = calls.get("idle:sweeper", [])
    backstops = calls.get("idle:relay", [])
    sweep_t, backstop_t = tallies.get("idle:sweeper", Tally()), tallies.get("idle:relay", Tally())
    n_sweeps, n_backstops = max(1, len(sweeps)), max(1, len(backstops))
    lam_sweep, _ = _lambda_dollars(sweeps)
    lam_backstop, _ = _lambda_dollars(backstops)
    idle = {
        "sweep_requests": sweep_t.dynamo_requests / n_sweeps,
        "backstop_requests": backstop_t.dynamo_requests / n_backstops,
        "requests_per_minute": sweep_t.dynamo_requests / n_sweeps * SWEEP_PER_MINUTE
        + backstop_t.dynamo_requests / n_backstops * BACKSTOP_PER_MINUTE,
        "sweep_ms": 1000.0 * sum(s for s, _ in sweeps) / n_sweeps,
        "backstop_ms": 1000.0 * sum(s for s, _ in backstops) / n_backstops,
        "dollars_per_month": 43_200 * (
            (sweep_t.rru * PRICES["dynamodb_rru"] + lam_sweep) / n_sweeps * SWEEP_PER_MINUTE
            + (backstop_t.rru * PRICES["dynamodb_rru"] + lam_backstop) / n_backstops * BACKSTOP_PER_MINUTE),
    }
    return {"paths": paths, "idle": idle, "executions": EXECUTIONS}


def template_path(given: str | None = None) -> Path:
    from bench.timers_lateness import template_path as synthesized

    return synthesized(given or os.environ.get("DURASTATE_BENCH_TEMPLATE") or None)


def measure_local(scale: float = 1.0, template: str | None = None, warmup: int = WARMUP) -> dict[str, Any]:
    """Drive every path on the local stack with the importable ``durastate``; per-transition rows."""
    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                 ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(k, v)
    with contextlib.redirect_stdout(sys.stderr):  # the handlers' metrics (EMF lines) go to stdout, as on Lambda
        result = summarize(_drive(template_path(template), scale, warmup))
    result.update({"scale": scale, "warmup": warmup, "steady": max(1, round(STEADY * scale))})
    return result


def _measure_elsewhere(code: str, scale: float, template: Path, warmup: int) -> dict[str, Any]:
    """:func:`measure_local` with the ``durastate`` package of the checkout ``code`` (the same stack
    template and handlers, that package's runtime and store)."""
    return measure_with_package(code, "dynamo_cost_local",
                                f"measure_local({float(scale)!r}, {str(template)!r}, {int(warmup)})")


def run_local(scale: float = 1.0, baseline: str | None = None, template: str | None = None,
              warmup: int = WARMUP) -> dict[str, Any]:
    """The local-stack cost section; with ``baseline`` (a folder holding an older ``durastate`` package, or
    ``DURASTATE_BENCH_BASELINE``) the same drive against it, for the before/after in one run."""
    baseline = baseline or os.environ.get("DURASTATE_BENCH_BASELINE") or None
    tmpl = template_path(template)
    result = measure_local(scale, str(tmpl), warmup)
    if baseline:
        result["before"] = _measure_elsewhere(baseline, scale, tmpl, warmup)
        result["baseline"] = str(baseline)
    result.update({"prices": PRICES, "lambda_memory_gb": LAMBDA_MEMORY_GB})
    return result


if __name__ == "__main__":
    args = sys.argv[1:]
    json.dump(run_local(float(args[0]) if args else 1.0, args[1] if len(args) > 1 else None), sys.stdout, indent=1)
