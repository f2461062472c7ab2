"""DynamoDB cost: requests and capacity units per transition, from the requests durastate actually sends.

The real runtime pieces — :class:`~durastate.runtime.Worker`, :class:`~durastate.runtime.Relay`,
:class:`~durastate.runtime.Sweeper`, ``DynamoDBStore`` and ``SqsTransport`` — run against moto (in process),
and :class:`bench._meter.Meter` bills every request they make. The Lambda event-source mapping is
emulated by the same calls it makes (``ReceiveMessage`` of up to 10, ``DeleteMessageBatch``), so SQS
requests are counted too; the relay is invoked as its stream trigger invokes it (with the queue shards the
inserts went to, read from the commit's own request). Event ids are uuid-sized, as a client's are. Each path
of ``bench/defs/costs.yaml`` is driven a number of times and averaged:

- **state-only** (``bump``): a transition that only changes the execution — during an execution's first 8
  events, and in the steady state (after :data:`WARMUP` events, averaged over :data:`STEADY` more, so the
  occasional write of spilled event ids is in the average); with the trace step and without it (the AWS
  deployment's default, ``DURASTATE_TRACE`` off);
- **with emits** (``notify``): the commit carries an event for another execution; its relay pass and
  SQS send are added;
- **with timers** (``arm`` then the timer firing): the arm, the sweep that fires it, and the timeout's
  transition;
- **fork/join** (``split``, ``l``, ``r``): the fork, the relay creating both region children, the
  forwarded events, the children's steps and finish notices, and the join — the whole cycle;
- **fork/join, regions: inline** (``split``, ``l``, ``r`` of ``costs_inline.yaml``): the same chart with
  ``regions: inline``, per
  event: each is one worker commit of the execution itself (nothing spawned, forwarded or relayed);
- **idle**: what an empty sweep (every minute) and the relay's scheduled backstop (every 5 minutes) cost
  with no traffic, per minute.

Lambda duration is measured, not assumed for CPU: the wall time of each worker / relay / sweeper call less
the time spent inside its AWS requests (moto runs in process, inside them) is durastate's own compute;
each request then adds :data:`REQUEST_MS`, a typical in-region latency (the one assumption left).

``run(baseline=DIR)`` also measures the same paths against the ``durastate`` package in ``DIR`` (an older
checkout), in a subprocess, with this very driver: the before/after of a change, in one run.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
import time
import uuid
from dataclasses import astuple
from pathlib import Path
from typing import Any

from bench._meter import Meter, Tally
from bench._util import measure_with_package

DEFS = Path(__file__).parent / "defs"
REGION = "us-east-1"

PRICES = {
    "dynamodb_wru": 0.625 / 1e6,     # on-demand write request unit (since the Nov 2024 price cut)
    "dynamodb_rru": 0.125 / 1e6,     # on-demand read request unit
    "sqs_fifo_request": 0.50 / 1e6,  # per 64 KB chunk of a request
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_s_arm": 0.0000133334,  # arm64 (the stack's default architecture)
    "sfn_standard_transition": 25.0 / 1e6,
    "sfn_express_request": 1.00 / 1e6,
    "sfn_express_gb_s": 0.00001667,  # first tier; 64 MB minimum, 100 ms increments
}
LAMBDA_MEMORY_GB = 0.5          # the stack's default (durastate/cdk/construct.py memory_size=512)
LAMBDA_BATCH = 10               # the worker's SQS batch size in the stack
REQUEST_MS = 6.0                # assumed in-region latency of one DynamoDB/SQS request, in ms
WARMUP = 40                     # events an execution has applied before the steady-state rows measure it
STEADY = 48                     # state-only events measured in the steady state, per execution
EMITS = 6                       # emitting events measured per execution
SWEEP_PER_MINUTE = 1.0          # the stack's sweeper schedule
BACKSTOP_PER_MINUTE = 1 / 5     # the stack's relay backstop schedule


def _setup() -> tuple[Any, ...]:
    import boto3

    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                 ("AWS_DEFAULT_REGION", REGION)):
        os.environ.setdefault(k, v)
    from durastate.engine import DefinitionRegistry, load_definition
    from durastate.errors import DefinitionError
    from durastate.store.dynamodb.sync import DynamoDBStore
    from durastate.transport.sqs import SqsTransport

    ddb = boto3.client("dynamodb", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    meter = Meter.for_durastate("bench")
    meter.attach(ddb, "dynamodb")
    meter.attach(sqs, "sqs")
    store = DynamoDBStore(ddb, prefix="bench")
    store.ensure_tables()
    url = sqs.create_queue(QueueName="bench.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    transport = SqsTransport(sqs, url, sleep=lambda s: None)
    reg = DefinitionRegistry()
    reg.register(load_definition(DEFS / "costs.yaml"))
    with contextlib.suppress(DefinitionError):  # an older durastate (a baseline run) has no inline regions
        reg.register(load_definition(DEFS / "costs_inline.yaml"))
    return ddb, store, sqs, url, transport, meter, reg


class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class _Wire:
    """Per-tag time spent inside AWS requests, and the queue shards commits inserted into (the relay's stream
    trigger names them). botocore hooks, like the meter's."""

    def __init__(self, ddb: Any, sqs: Any, meter: Meter) -> None:
        self.meter = meter
        self.in_requests: dict[str, float] = {}
        self.shards: set[int] = set()
        self._t0: list[float] = []
        for client, service in ((ddb, "dynamodb"), (sqs, "sqs")):
            client.meta.events.register(f"before-call.{service}.*", self._before)
            client.meta.events.register(f"after-call.{service}.*", self._after)
        ddb.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", self._inserts)

    def _before(self, **_: Any) -> None:
        self._t0.append(time.perf_counter())

    def _after(self, **_: Any) -> None:
        tag = self.meter.tag
        self.in_requests[tag] = self.in_requests.get(tag, 0.0) + time.perf_counter() - self._t0.pop()

    def _inserts(self, params: dict[str, Any], **_: Any) -> None:
        for entry in params.get("TransactItems", []):
            put = entry.get("Put") or {}
            if put.get("TableName", "").endswith(("_outbox", "_spawns")) and "shard" in put.get("Item", {}):
                self.shards.add(int(put["Item"]["shard"]["S"]))


def _drive(n: int) -> dict[str, Any]:
    from durastate.engine import Event, timeout_event_id
    from durastate.engine.model import TIMEOUT
    from durastate.runtime.relay import Relay
    from durastate.runtime.sweeper import Sweeper
    from durastate.runtime.worker import Worker
    from durastate.transport.wire import parse_envelope

    ddb, store, sqs, url, transport, meter, reg = _setup()
    wire = _Wire(ddb, sqs, meter)
    invocations: dict[str, int] = {}
    """Relay / sweeper Lambda invocations, by path (the worker's are derived from its batch size)."""
    wall: dict[str, float] = {}
    """Wall time of the handler calls, by tag (less the time in requests: durastate's compute)."""
    events: dict[str, int] = {}
    clock = _Clock()
    traced = Worker(store, reg, clock=clock)
    untraced = Worker(store, reg, clock=clock, trace=False)
    relay = Relay(store, reg, transport, clock=clock)
    sweeper = Sweeper(store, transport, clock=clock)
    hinted = "shards" in inspect.signature(relay.run_once).parameters
    seq = [0]

    def timed(tag: str, fn: Any, *args: Any, **kw: Any) -> Any:
        meter.tag = tag
        t0 = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            wall[tag] = wall.get(tag, 0.0) + time.perf_counter() - t0

    def external(target: str, name: str, tag: str, data: dict[str, Any] | None = None) -> None:
        """A client enqueues the event (one SendMessage), as `durastate send` or an app would."""
        seq[0] += 1
        meter.tag = tag + ":send"
        event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench/{seq[0]}"))
        transport.send([(target, Event(id=event_id, name=name, data=data or {}))])

    def lambda_poll(tag: str, worker: Worker = untraced) -> int:
        """The worker Lambda's event source: receive up to 10, handle each, delete the batch."""
        handled = 0
        while True:
            meter.tag = tag + ":poll"
            resp = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=LAMBDA_BATCH,
                                       AttributeNames=["MessageGroupId"])
            msgs = resp.get("Messages", [])
            if not msgs:
                return handled
            for m in msgs:
                env = parse_envelope(m["Body"])
                timed(tag, worker.handle, env.target_id, env.event)
                events[tag] = events.get(tag, 0) + 1
                handled += 1
            meter.tag = tag + ":poll"
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)])

    def relay_all(tag: str) -> None:
        """One relay invocation as the stream trigger runs it: passes of 100 over the shards the inserts
        went to, while a pass uses its whole budget. No insert, no invocation."""
        shards, wire.shards = set(wire.shards), set()
        if not shards:
            return
        invocations[tag.split(":")[0]] = invocations.get(tag.split(":")[0], 0) + 1
        kw = {"shards": shards} if hinted else {}
        while sum(astuple(timed(tag, relay.run_once, max_items=100, **kw))) >= 100:
            pass

    def start(eid: str, ctx: dict[str, Any] | None = None, definition_id: str = "costs") -> None:
        meter.tag = "setup"
        untraced.handle(eid, Event(id=f"{eid}:start", name="durastate.start",
                                   data={"definition_id": definition_id, "context": ctx or {}}))
        wire.shards = set()

    def bumps(eid: str, count: int, tag: str, worker: Worker = untraced) -> None:
        for _ in range(count):
            external(eid, "bump", tag)
            lambda_poll(tag, worker)

    start("peer")
    for i in range(n):
        eid = f"x{i}"
        start(eid, {"peer": "peer"})
        bumps(eid, 7, "first8")                      # events 2..8 of the execution (the start is the first)
        bumps(eid, WARMUP - 8, "setup")
        bumps(eid, STEADY, "steady")
        bumps(eid, STEADY // 4, "steady-traced", traced)
        # with an emit: the commit, then its relay pass (the receiver's own step is its own transition);
        # several, so that an occasional spill of event ids is averaged in, as on every other path
        for _ in range(EMITS):
            external(eid, "notify", "emit")
            lambda_poll("emit")
            relay_all("emit:relay")
            lambda_poll("setup")  # the peer consumes `pinged` (not billed to this path)
        # with a timer: arm it, let it fire, the timeout's transition
        external(eid, "arm", "timer")
        lambda_poll("timer-arm")
        clock.now += 61
        invocations["timer"] = invocations.get("timer", 0) + 1
        timed("timer:sweep", sweeper.run_once)
        lambda_poll("timer-fire")
        # a timer delivered by the hop (a delayed SQS message, forwarded to the event queue when due): no
        # sweep; the timeout's own commit deletes the timer. The hop's own SQS requests are not counted here.
        external(eid, "arm", "hop")
        lambda_poll("hop-arm")
        armed = [t for t in store.due_timers(clock.now + 3600) if t[0] == eid]
        if armed:
            _, path, fire_at = armed[0]
            clock.now = max(clock.now, fire_at)
            meter.tag = "hop:send"
            transport.send([(eid, Event(id=timeout_event_id(eid, path, fire_at), name=TIMEOUT,
                                        data={"path": path, "fire_at": fire_at}))])
            lambda_poll("hop-fire")
        # fork/join: the whole cycle
        external(eid, "split", "fork")
        lambda_poll("fork")
        relay_all("fork:relay")
        for name in ("l", "r"):
            external(eid, name, "fork")
            for _ in range(3):  # parent forwards -> children step -> finished notices -> parent
                lambda_poll("fork")
                relay_all("fork:relay")
        exe = store.load(eid)
        assert exe is not None and exe.active_path == "idle", exe
        if "costs-inline" in reg:
            # fork/join with `regions: inline`: three events, each one worker commit, nothing to relay
            start(f"i{i}", definition_id="costs-inline")
            for name in ("split", "l", "r"):
                external(f"i{i}", name, "ifork")
                lambda_poll("ifork")
                relay_all("ifork:relay")
            exe = store.load(f"i{i}")
            assert exe is not None and exe.active_path == "idle", exe
    # idle: nothing armed, nothing pending — an empty sweep and an empty backstop pass
    for _ in range(n):
        timed("idle:sweep", sweeper.run_once)
        timed("idle:backstop", relay.run_once, max_items=100)
    return {"tallies": dict(meter.tallies), "invocations": invocations, "wall": wall,
            "in_requests": wire.in_requests, "events": events, "hinted": hinted}


def _sum(tallies: dict[str, Tally], *prefixes: str) -> Tally:
    total = Tally()
    for tag, t in tallies.items():
        if tag.split(":")[0] in prefixes or tag in prefixes:
            total.add(t)
    return total


def _dollars(t: Tally, events: float, lambda_invocations: float, compute_s: float,
             sqs_in_lambda: float) -> dict[str, float]:
    """Dollars for a tally covering ``events`` worker events and ``lambda_invocations`` Lambda calls.

    SQS: the measured sends, plus the worker's event source in steady state — one ``ReceiveMessage``
    and one ``DeleteMessageBatch`` per batch of :data:`LAMBDA_BATCH` (the bench's emulated poller
    receives one message at a time, so its own receive/delete counts are not billed). Lambda duration:
    the measured compute plus :data:`REQUEST_MS` per request the functions make (every DynamoDB request,
    and ``sqs_in_lambda``: the relay's and the sweeper's sends, not the client's).
    """
    p = PRICES
    ddb = t.wru * p["dynamodb_wru"] + t.rru * p["dynamodb_rru"]
    sqs_requests = t.sqs_requests + events * 2 / LAMBDA_BATCH
    sqs = sqs_requests * p["sqs_fifo_request"]
    seconds = compute_s + (t.dynamo_requests + sqs_in_lambda) * REQUEST_MS / 1000.0
    lam = lambda_invocations * p["lambda_request"] + seconds * LAMBDA_MEMORY_GB * p["lambda_gb_s_arm"]
    return {"dynamodb": ddb, "sqs": sqs, "lambda": lam, "total": ddb + sqs + lam,
            "sqs_requests": sqs_requests, "lambda_ms": seconds * 1000.0}


PATHS: list[tuple[str, tuple[str, ...], int | None, int | None]] = [
    # (label, tags, transitions per cycle, worker events per cycle); None: counted from the worker calls
    ("state-only, first 8 events", ("first8",), 7, 7),
    ("state-only, steady state", ("steady",), STEADY, STEADY),
    ("state-only, steady state, trace on", ("steady-traced",), STEADY // 4, STEADY // 4),
    ("with emits (+ relay)", ("emit",), EMITS, EMITS),
    ("with timers (arm + fire)", ("timer-arm", "timer-fire", "timer"), 2, 2),
    ("with timers, hopped (arm + fire)", ("hop-arm", "hop-fire"), 2, 2),
    ("fork/join (whole cycle)", ("fork",), None, None),
    ("fork/join, regions: inline (split, l, r; per event)", ("ifork",), 3, 3),
]


def measure(n: int = 10) -> dict[str, Any]:
    """Drive every path ``n`` times against the importable ``durastate``; per-transition numbers."""
    from moto import mock_aws

    with mock_aws():
        raw = _drive(n)
    tallies: dict[str, Tally] = raw["tallies"]
    compute = {tag: max(0.0, raw["wall"][tag] - raw["in_requests"].get(tag, 0.0)) for tag in raw["wall"]}
    paths: dict[str, Any] = {}
    billed = {k: v for k, v in tallies.items() if not k.endswith(":poll")}
    for label, tags, transitions, events in PATHS:
        t = _sum(billed, *tags)
        worker_t = _sum({k: v for k, v in tallies.items() if ":" not in k}, *tags)
        # one worker call, one commit (a spill's chunk or a timer written ahead is a PutItem, not a commit)
        per_cycle_transitions = transitions or (sum(raw["events"].get(tag, 0) for tag in tags) / n)
        ev = events or per_cycle_transitions
        # Lambda: worker invocations share a batch of LAMBDA_BATCH; a relay/sweeper pass is one invocation.
        side = sum(v for k, v in raw["invocations"].items() if k in tags) / n
        invocations = ev / LAMBDA_BATCH + side
        per = 1.0 / (n * per_cycle_transitions)
        compute_s = sum(v for k, v in compute.items() if k.split(":")[0] in tags)
        worker_compute = sum(v for k, v in compute.items() if k in tags)
        sqs_in_lambda = sum(v.sqs_requests for k, v in billed.items()
                            if k.split(":")[0] in tags and not k.endswith(":send"))
        cost = _dollars(t, n * ev, n * invocations, compute_s, sqs_in_lambda)
        everything = t.scaled(per)
        everything["sqs"] = cost.pop("sqs_requests") * per
        lambda_ms = cost.pop("lambda_ms") * per
        intake = sum(v.sqs_requests for k, v in billed.items()
                     if k.split(":")[0] in tags and k.endswith(":send"))
        cost["total_batched_client"] = cost["total"] - intake * 0.9 * PRICES["sqs_fifo_request"]
        paths[label] = {
            "transitions_per_cycle": per_cycle_transitions,
            "worker": worker_t.scaled(1.0 / (n * per_cycle_transitions)),
            "all": everything,
            "dollars_per_million": {k: v * per * 1e6 for k, v in cost.items()},
            "compute_ms": worker_compute / (n * ev) * 1000.0,
            "lambda_ms": lambda_ms,
            "lambda_batch_ms": (worker_compute / (n * ev) * 1000.0 + worker_t.dynamo_requests / (n * ev)
                                * REQUEST_MS) * LAMBDA_BATCH,
        }
    sweep, backstop = _sum(tallies, "idle:sweep"), _sum(tallies, "idle:backstop")
    idle = {"sweep_requests": sweep.dynamo_requests / n, "backstop_requests": backstop.dynamo_requests / n,
            "requests_per_minute": (sweep.dynamo_requests * SWEEP_PER_MINUTE
                                    + backstop.dynamo_requests * BACKSTOP_PER_MINUTE) / n}
    return {"n": n, "paths": paths, "idle": idle, "relay_reads_hinted_shards": raw["hinted"]}


def _measure_elsewhere(code: str, n: int) -> dict[str, Any]:
    """:func:`measure` with the ``durastate`` package of the checkout ``code`` (this driver, that code)."""
    return measure_with_package(code, "dynamo_cost", f"measure({int(n)})")


def run(n: int = 10, baseline: str | None = None) -> dict[str, Any]:
    """The cost section: :func:`measure` here, and (``baseline``: a folder holding an older ``durastate``
    package, or ``DURASTATE_BENCH_BASELINE``) the same against it, for the before/after of a change."""
    baseline = baseline or os.environ.get("DURASTATE_BENCH_BASELINE") or None
    result = measure(n)
    if baseline:
        result["before"] = _measure_elsewhere(baseline, n)
        result["baseline"] = str(baseline)
    sfn_express = PRICES["sfn_express_request"] + 0.0625 * 0.1 * PRICES["sfn_express_gb_s"]
    result.update({"prices": PRICES, "region": REGION,
                   "assumptions": {"lambda_memory_gb": LAMBDA_MEMORY_GB, "lambda_batch": LAMBDA_BATCH,
                                   "request_ms": REQUEST_MS, "warmup": WARMUP, "steady": STEADY},
                   "step_functions": {"standard": PRICES["sfn_standard_transition"] * 1e6,
                                      "express_min_execution": sfn_express * 1e6}})
    return result


if __name__ == "__main__":  # python -m bench.dynamo_cost [n] [baseline]: the section alone, as JSON
    args = sys.argv[1:]
    json.dump(run(int(args[0]) if args else 2, args[1] if len(args) > 1 else None), sys.stdout, indent=1)
