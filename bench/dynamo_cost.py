"""DynamoDB cost: requests and capacity units per transition, from the requests durastate actually sends.

The real runtime pieces — :class:`~durastate.runtime.Worker`, :class:`~durastate.runtime.Relay`,
:class:`~durastate.runtime.Sweeper`, ``DynamoDBStore`` and ``SqsTransport`` — run against moto (in process),
and :class:`bench._meter.Meter` bills every request they make. The Lambda event-source mapping is
emulated by the same calls it makes (``ReceiveMessage`` of up to 10, ``DeleteMessageBatch``), so SQS
requests are counted too. Each path of ``bench/defs/costs.yaml`` is driven a number of times and
averaged:

- **state-only** (``bump``): a transition that only changes the execution — with the trace step
  (the default) and without it (``Worker(trace=False)``);
- **with emits** (``notify``): the commit carries an event for another execution; its relay pass and
  SQS send are added;
- **with timers** (``arm`` then the timer firing): the arm, the sweep that fires it, and the timeout's
  transition;
- **fork/join** (``split``, ``l``, ``r``): the fork, the relay creating both region children, the
  forwarded events, the children's steps and finish notices, and the join — the whole cycle.

Prices are AWS's public on-demand prices in us-east-1 (see :data:`PRICES`); Lambda duration is an
assumption (stated in the output), derived from the request count at a typical in-region latency.
"""

from __future__ import annotations

import os
from dataclasses import astuple
from pathlib import Path
from typing import Any

from bench._meter import Meter, Tally

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
LAMBDA_MEMORY_GB = 0.5          # the stack's default (infra/construct.py memory_size=512)
LAMBDA_BATCH = 10               # the worker's SQS batch size in the stack
REQUEST_MS = 6.0                # assumed in-region latency of one DynamoDB/SQS request, in ms
COMPUTE_MS = 1.0                # assumed durastate CPU time per event in Lambda, in ms


def _setup() -> tuple[Any, ...]:
    import boto3

    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                 ("AWS_DEFAULT_REGION", REGION)):
        os.environ.setdefault(k, v)
    from durastate.engine import DefinitionRegistry, load_definition
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
    return store, sqs, url, transport, meter, reg


class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _drive(n: int) -> dict[str, Tally]:
    from durastate.engine import Event
    from durastate.runtime.relay import Relay
    from durastate.runtime.sweeper import Sweeper
    from durastate.runtime.worker import Worker
    from durastate.transport.wire import parse_envelope

    store, sqs, url, transport, meter, reg = _setup()
    invocations: dict[str, int] = {}
    """Relay / sweeper Lambda invocations, by path (the worker's are derived from its batch size)."""
    clock = _Clock()
    worker = Worker(store, reg, clock=clock)
    untraced = Worker(store, reg, clock=clock, trace=False)
    relay = Relay(store, reg, transport, clock=clock)
    sweeper = Sweeper(store, transport, clock=clock)
    seq = [0]

    def external(target: str, name: str, data: dict[str, Any] | None = None) -> None:
        """A client enqueues the event (one SendMessage), as `durastate send` or an app would."""
        seq[0] += 1
        transport.send([(target, Event(id=f"ext-{seq[0]}", name=name, data=data or {}))])

    def lambda_poll(tag: str, worker: Worker = worker) -> int:
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
                meter.tag = tag
                worker.handle(env.target_id, env.event)
                handled += 1
            meter.tag = tag + ":poll"
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)])

    def relay_all(tag: str) -> None:
        """One relay invocation as the stream trigger runs it: one pass (budget 100) while under budget.

        The stream triggers only on an insert, so nothing pending means no invocation (the peek that
        checks is not billed to any path)."""
        meter.tag = "peek"
        if not (store.pending_spawns() or store.pending_outbox()):
            return
        meter.tag = tag
        invocations[tag.split(":")[0]] = invocations.get(tag.split(":")[0], 0) + 1
        while sum(astuple(relay.run_once(max_items=100))) >= 100:
            pass

    def start(eid: str, ctx: dict[str, Any] | None = None) -> None:
        meter.tag = "setup"
        worker.handle(eid, Event(id=f"{eid}:start", name="durastate.start",
                                 data={"definition_id": "costs", "context": ctx or {}}))

    start("peer")
    out: dict[str, Tally] = {}
    for i in range(n):
        eid = f"x{i}"
        start(eid, {"peer": "peer"})
        # state-only
        meter.tag = "state-only:send"
        external(eid, "bump")
        lambda_poll("state-only")
        meter.tag = "state-notrace:send"
        external(eid, "bump")
        lambda_poll("state-notrace", untraced)
        # with an emit: the commit, then its relay pass (the receiver's own step is its own transition)
        meter.tag = "emit:send"
        external(eid, "notify")
        lambda_poll("emit")
        relay_all("emit:relay")
        meter.tag = "setup"
        lambda_poll("setup")  # the peer consumes `pinged` (not billed to this path)
        # with a timer: arm it, let it fire, the timeout's transition
        meter.tag = "timer:send"
        external(eid, "arm")
        lambda_poll("timer-arm")
        clock.now += 61
        meter.tag = "timer:sweep"
        invocations["timer"] = invocations.get("timer", 0) + 1
        sweeper.run_once()
        lambda_poll("timer-fire")
        # fork/join: the whole cycle
        meter.tag = "fork:send"
        external(eid, "split")
        lambda_poll("fork")
        relay_all("fork:relay")
        for name in ("l", "r"):
            meter.tag = "fork:send"
            external(eid, name)
            for _ in range(3):  # parent forwards -> children step -> finished notices -> parent
                lambda_poll("fork")
                relay_all("fork:relay")
        exe = store.load(eid)
        assert exe is not None and exe.active_path == "idle", exe
    for tag, tally in meter.tallies.items():
        out[tag] = tally
    out["_invocations"] = invocations  # type: ignore[assignment]
    return out


def _sum(tallies: dict[str, Tally], *prefixes: str) -> Tally:
    total = Tally()
    for tag, t in tallies.items():
        if tag.split(":")[0] in prefixes or tag in prefixes:
            total.add(t)
    return total


def _dollars(t: Tally, events: float, lambda_invocations: float) -> dict[str, float]:
    """Dollars for a tally covering ``events`` worker events and ``lambda_invocations`` Lambda calls.

    SQS: the measured sends, plus the worker's event source in steady state — one ``ReceiveMessage``
    and one ``DeleteMessageBatch`` per batch of :data:`LAMBDA_BATCH` (the bench's emulated poller
    receives one message at a time, so its own receive/delete counts are not billed).
    """
    p = PRICES
    ddb = t.wru * p["dynamodb_wru"] + t.rru * p["dynamodb_rru"]
    sqs_requests = t.sqs_requests + events * 2 / LAMBDA_BATCH
    sqs = sqs_requests * p["sqs_fifo_request"]
    seconds = (t.dynamo_requests * REQUEST_MS + events * COMPUTE_MS) / 1000.0
    lam = lambda_invocations * p["lambda_request"] + seconds * LAMBDA_MEMORY_GB * p["lambda_gb_s_arm"]
    return {"dynamodb": ddb, "sqs": sqs, "lambda": lam, "total": ddb + sqs + lam,
            "sqs_requests": sqs_requests}


def run(n: int = 10) -> dict[str, Any]:
    from moto import mock_aws

    with mock_aws():
        tallies = _drive(n)
    side_invocations: dict[str, int] = tallies.pop("_invocations")  # type: ignore[assignment]
    paths: dict[str, Any] = {}
    # (label, tags, transitions per cycle, worker events per cycle, lambda invocations per cycle)
    spec = [
        ("state-only", ("state-only",), 1, 1),
        ("state-only, trace off", ("state-notrace",), 1, 1),
        ("with emits (+ relay)", ("emit",), 1, 1),
        ("with timers (arm + fire)", ("timer-arm", "timer-fire", "timer"), 2, 2),
        ("fork/join (whole cycle)", ("fork",), None, None),
    ]
    billed = {k: v for k, v in tallies.items() if not k.endswith(":poll")}
    for label, tags, transitions, events in spec:
        t = _sum(billed, *tags)
        worker_t = _sum({k: v for k, v in tallies.items() if ":" not in k}, *tags)
        commits = worker_t.requests.get("PutItem", 0) + worker_t.requests.get("TransactWriteItems", 0)
        per_cycle_transitions = transitions or (commits / n)
        ev = events or per_cycle_transitions
        # Lambda: worker invocations share a batch of LAMBDA_BATCH; a relay/sweeper pass is one invocation.
        side = sum(v for k, v in side_invocations.items() if k in tags) / n
        invocations = ev / LAMBDA_BATCH + side
        per = 1.0 / (n * per_cycle_transitions)
        worker_only = worker_t.scaled(1.0 / (n * per_cycle_transitions))
        cost = _dollars(t, n * ev, n * invocations)
        everything = t.scaled(per)
        everything["sqs"] = cost.pop("sqs_requests") * per
        # The same with the client batching its sends (10 events per SendMessageBatch): only the
        # external intake's share of the SQS bill changes.
        intake = sum(v.sqs_requests for k, v in billed.items()
                     if k.split(":")[0] in tags and k.endswith(":send"))
        cost["total_batched_client"] = cost["total"] - intake * 0.9 * PRICES["sqs_fifo_request"]
        paths[label] = {
            "transitions_per_cycle": per_cycle_transitions,
            "worker": worker_only,
            "all": everything,
            "dollars_per_million": {k: v * per * 1e6 for k, v in cost.items()},
        }
    sfn_express = PRICES["sfn_express_request"] + 0.0625 * 0.1 * PRICES["sfn_express_gb_s"]
    return {"n": n, "paths": paths, "prices": PRICES, "region": REGION,
            "assumptions": {"lambda_memory_gb": LAMBDA_MEMORY_GB, "lambda_batch": LAMBDA_BATCH,
                            "request_ms": REQUEST_MS, "compute_ms": COMPUTE_MS},
            "step_functions": {"standard": PRICES["sfn_standard_transition"] * 1e6,
                               "express_min_execution": sfn_express * 1e6}}
