"""Timer lateness on the local stack: fire time minus due time, before (sweeper only) and after (the hop).

    python -m bench.timers_lateness            # 20 timers per class and mode (about 6 minutes)
    python -m bench.timers_lateness --quick    # 6 per class
    python -m bench.timers_lateness --template cdk.out/DurastateStack.template.json

Both modes run in one run on the same synthesized stack: ``before`` turns the hop off (an empty
``DURASTATE_TIMERS_QUEUE_URL``: the sweeper alone fires timers, once a minute, as before the hop existed),
``after`` keeps the stack as deployed. Each mode runs the local stack's loop in a thread on a clock that
runs at real speed from an offset, so that the delay classes 1 s, 30 s, 5 min, 1 h and 2 d all come due
within the same minute or two of real time:

* the 2 d, 1 h and 5 min timers are armed (``after: {seconds: $context.delay}``: the class's delay plus a
  spread of up to a minute, so due times fall at every phase of the sweeper's minute), then the
  clock jumps until the next class is as far from due as its own delay, and finally to 40 s before the
  first of them is due; each jump is a moment at which a sweep runs, as on AWS, where a long timer waits
  in the timers table until a sweep finds it within range;
* the 1 s and 30 s timers are armed in real time, one after another over a minute.

Lateness is read from the trace: ``at`` of the ``durastate.timeout`` step minus the ``fire_at`` the timer
was armed with (the last part of the timeout's deterministic id).
Requests are counted on the runtime's SQS client (sends only: receives and deletes are the event source's,
priced apart in the notes). The hop is held until due on the stack's clock
(:mod:`durastate.devstack.timer_hops`), so what is measured is the delivery and the apply, not the
precision of SQS's own delay (whole seconds, which the timers function waits out on AWS).
Writes ``bench/results/timers.json`` and ``bench/results/timers.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from durastate.devstack import LocalStack
from durastate.devstack.moto_server import endpoint_client
from durastate.store.dynamodb.sharding import TIMER_SHARDS
from durastate.store.dynamodb.sync import DynamoDBStore
from durastate.transport.wire import dump_envelope, new_event

ROOT = Path(__file__).resolve().parents[1]
CLASSES: dict[str, float] = {"1 s": 1, "30 s": 30, "5 min": 300, "1 h": 3600, "2 d": 172800}
GOALS = {"p50": 0.5, "p99": 1.5}
LEAD = 40.0
"""Seconds of real time between the last clock jump and the first long timer's due time."""
DEFINITION = """\
id: bench_timer
initial: waiting
states:
  waiting:
    after: {seconds: $context.delay, target: done}
  done: {}
"""
QUIET = {"POWERTOOLS_LOG_LEVEL": "ERROR", "POWERTOOLS_METRICS_DISABLED": "true", "DURASTATE_TRACE": "1"}

# AWS list prices (us-east-1) for the idle cost of the timer machinery.
SQS_PER_MILLION = 0.40
LAMBDA_PER_MILLION = 0.20
LAMBDA_GB_SECOND = 0.0000133334
RRU_PER_MILLION = 0.25
MINUTES_A_MONTH = 30 * 24 * 60
ESM_POLLERS = 5
"""Long-polling connections Lambda keeps on an idle standard queue (AWS: it starts with five)."""


class OffsetClock:
    """Real time plus an offset the benchmark moves forward (read by the loop's thread)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def template_path(given: str | None) -> Path:
    """The synthesized template: the given one, ``cdk.out``'s, or a fresh ``cdk synth`` in a temp folder."""
    if given:
        return Path(given)
    local = ROOT / "cdk.out" / "DurastateStack.template.json"
    if local.is_file():
        return local
    out = Path(tempfile.mkdtemp(prefix="durastate-bench-synth-")) / "cdk.out"
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    subprocess.run([str(cdk) if cdk.exists() else "cdk", "synth", "--quiet", "--no-notices", "-o", str(out)],
                   cwd=ROOT, check=True, env={**_env(), "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
                                              "CDK_DISABLE_CLI_TELEMETRY": "1"})
    return out / "DurastateStack.template.json"


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def count_sends(client: Any) -> Counter[str]:
    """SQS send requests of ``client`` by queue name (a batch of ten is one request)."""
    counts: Counter[str] = Counter()

    def hook(params: dict[str, Any], **_: Any) -> None:
        counts[str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]] += 1

    for op in ("SendMessage", "SendMessageBatch"):
        client.meta.events.register(f"provide-client-params.sqs.{op}", hook)
    return counts


def run_mode(template: Path, defs: Path, hops: bool, per_class: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    clock = OffsetClock()
    env = dict(QUIET) if hops else {**QUIET, "DURASTATE_TIMERS_QUEUE_URL": ""}
    stack = LocalStack(template, port=0, clock=clock, retry_delay=0, definitions_dir=defs, environment=env,
                       real_time_delays=False)
    due: dict[str, str] = {}  # execution -> class
    with stack:
        sends = count_sends(stack.client("sqs"))
        producer = endpoint_client("sqs", stack.endpoint_url, stack.region)

        def arm(cls: str, delay: float) -> None:
            eid = f"{'hop' if hops else 'sweep'}-{cls.replace(' ', '')}-{len(due)}"
            start = new_event("durastate.start", {"definition_id": "bench_timer", "context": {"delay": delay}},
                              f"{eid}:start")
            producer.send_message(QueueUrl=stack.queue_url, MessageBody=dump_envelope(eid, start),
                                  MessageGroupId=eid, MessageDeduplicationId=start.id)
            due[eid] = cls

        stop = threading.Event()
        loop = threading.Thread(target=stack.serve, args=(stop, 0.01), daemon=True)
        loop.start()
        try:
            long_classes = ["2 d", "1 h", "5 min"]
            for i, cls in enumerate(long_classes):
                for _ in range(per_class):
                    arm(cls, CLASSES[cls] + rng.uniform(0, 60))
                time.sleep(2)  # the loop applies the starts (the worker hops what is within range)
                gap = CLASSES[cls] - (CLASSES[long_classes[i + 1]] if i + 1 < len(long_classes) else LEAD)
                clock.offset += gap
                time.sleep(2)  # a sweep runs at the jump
            for n in range(2 * per_class):  # the short classes, armed in real time over a minute
                cls = "1 s" if n % 2 == 0 else "30 s"
                arm(cls, CLASSES[cls])
                time.sleep(60 / (2 * per_class))
            store = DynamoDBStore(endpoint_client("dynamodb", stack.endpoint_url, stack.region), prefix="durastate")
            deadline = time.time() + 240
            fired: dict[str, float] = {}
            while time.time() < deadline and len(fired) < len(due):
                time.sleep(3)
                for eid in due:
                    if eid in fired:
                        continue
                    steps = [s for s in store.read_trace(eid) if s.get("event") == "durastate.timeout"
                             and not s.get("ignored")]
                    if steps:  # fire time minus the fire_at in the timeout's id (~timeout:<exe>:<path>:<fire_at>)
                        fired[eid] = float(steps[0]["at"]) - float(str(steps[0]["event_id"]).rsplit(":", 1)[1])
        finally:
            stop.set()
            loop.join(timeout=30)
            urllib.request.urlopen(urllib.request.Request(f"{stack.endpoint_url}/moto-api/reset",
                                                          method="POST"), timeout=30).close()
    late: dict[str, list[float]] = {cls: [] for cls in CLASSES}
    for eid, cls in due.items():
        if eid in fired:
            late[cls].append(fired[eid])
    timers = len(due)
    return {
        "mode": "after (hop)" if hops else "before (sweeper only)",
        "timers": timers,
        "unfired": timers - len(fired),
        "classes": {cls: _stats(v) for cls, v in late.items()},
        "all": _stats([x for v in late.values() for x in v]),
        "sqs_sends": dict(sends),
        "sqs_sends_per_timer": sum(sends.values()) / max(1, timers),
    }


def _stats(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    values = sorted(values)

    def q(p: float) -> float:
        return values[min(len(values) - 1, max(0, round(p * (len(values) - 1))))]

    return {"n": len(values), "p50": statistics.median(values), "p99": q(0.99), "min": values[0],
            "max": values[-1]}


def idle_cost() -> dict[str, float]:
    """Dollars a month the timer machinery costs with no timer at all (list prices; computed, not measured)."""
    sweeps = MINUTES_A_MONTH
    sweeper = (sweeps * LAMBDA_PER_MILLION / 1e6 + sweeps * 0.2 * 0.5 * LAMBDA_GB_SECOND  # 200 ms at 512 MB
               + sweeps * TIMER_SHARDS * 0.5 * RRU_PER_MILLION / 1e6)  # one eventually consistent query a shard
    polls = ESM_POLLERS * 3 * MINUTES_A_MONTH  # 20 s long polls: three a minute each
    return {"sweeper (1/min)": round(sweeper, 3), "timers queue event source (idle long polls)":
            round(polls * SQS_PER_MILLION / 1e6, 3), "total": round(sweeper + polls * SQS_PER_MILLION / 1e6, 3)}


def markdown(res: dict[str, Any], command: str) -> str:
    lines = ["# Timer lateness on the local stack (fire time minus due time, seconds)", "",
             f"`{command}` — {res['per_class']} timers per class and mode, both modes in one run.", "",
             "| class | before p50 | before p99 | after p50 | after p99 |", "|---|---|---|---|---|"]
    before, after = res["before"], res["after"]
    for cls in [*CLASSES, "all"]:
        b = before["all"] if cls == "all" else before["classes"][cls]
        a = after["all"] if cls == "all" else after["classes"][cls]
        lines.append(f"| {cls} | {_f(b, 'p50')} | {_f(b, 'p99')} | {_f(a, 'p50')} | {_f(a, 'p99')} |")
    lines += ["", f"Goals: p50 ≤ {GOALS['p50']} s, p99 ≤ {GOALS['p99']} s.", "",
              "| | before | after |", "|---|---|---|",
              f"| timers (unfired) | {before['timers']} ({before['unfired']}) | {after['timers']} "
              f"({after['unfired']}) |",
              f"| SQS send requests per timer | {before['sqs_sends_per_timer']:.2f} | "
              f"{after['sqs_sends_per_timer']:.2f} |",
              f"| sends by queue | {before['sqs_sends']} | {after['sqs_sends']} |", "",
              "Idle cost of the timer machinery a month (list prices, computed): "
              + ", ".join(f"{k} ${v}" for k, v in res["idle_cost"].items()) + "."]
    return "\n".join(lines) + "\n"


def _f(s: dict[str, Any], key: str) -> str:
    return f"{s[key]:.2f}" if key in s else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="6 timers per class")
    ap.add_argument("--template", default=None, help="synthesized template (default: cdk.out's, or a synth)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"), help="output folder")
    args = ap.parse_args(argv)
    per_class = 6 if args.quick else 20
    template = template_path(args.template)
    defs = Path(tempfile.mkdtemp(prefix="durastate-bench-timers-"))
    try:
        (defs / "bench_timer.yaml").write_text(DEFINITION)
        res: dict[str, Any] = {"per_class": per_class}
        for name, hops in (("before", False), ("after", True)):
            print(f"[timers] {name} ...", flush=True)
            res[name] = run_mode(template, defs, hops, per_class, seed=15)
            print(json.dumps(res[name]["all"]), flush=True)
        res["idle_cost"] = idle_cost()
    finally:
        shutil.rmtree(defs, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m bench.timers_lateness" + (" --quick" if args.quick else "")
    (out / "timers.json").write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    (out / "timers.md").write_text(markdown(res, command), encoding="utf-8")
    print(markdown(res, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
