"""The local-stack tests' templates: the app as ``cdk.json`` configures it (shared with tests/infra), and the
app with every optional grant on — retention, a ``schedules:`` file, a Lambda task function, the trace —
for the tests of those paths (the local stack decides every request against the roles, so a path must run
on a template that grants it, as on AWS). :func:`synth_app` synthesizes the app with other flags."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.infra.synth import (  # noqa: F401  (the session fixtures, a shared synth)
    ROOT,
    cdk_cli,
    cloud_assembly,
    template_json,
)

CHARGE = """\
id: charge
initial: charging
states:
  charging:
    invoke:
      task: {lambda: charge-card}
      input: {amount: 5}
    on_done: paid
    on_error: paid
  paid: {type: final}
"""
NOTIFY = """\
id: notify
initial: done
states:
  done:
    type: final
    entry: [{send: {event: noted, data: {n: 1}}}]
"""
SCHEDULES = """\
schedules:
  hourly:
    definition: notify
    rate: 1h
    catch_up: once
"""
FORK = """\
# The relay's commits: each region child's first commit sends to its parent, arms a timer due soon (its hop
# goes to the timers queue) or spawns regions of its own.
id: fork
initial: split
states:
  split:
    type: parallel
    on_done: joined
    states:
      a:
        initial: waiting
        states:
          waiting:
            entry: [{send: {to: parent, event: hello}}]
            after: {seconds: 60, target: done}
          done: {type: final}
      b:
        initial: inner
        states:
          inner:
            type: parallel
            on_done: fin
            states:
              x: {initial: x1, states: {x1: {type: final}}}
              y: {initial: y1, states: {y1: {type: final}}}
          fin: {type: final}
  joined: {type: final}
"""
TICK = """\
# The timers function's commits: a timeout that emits and arms the next timer (its hop), then one that
# enters a parallel state (spawns).
id: tick
initial: one
states:
  one:
    after: {seconds: 30, target: two, actions: [{send: {event: ticked}}]}
  two:
    after: {seconds: 30, target: three}
  three:
    type: parallel
    on_done: end
    states:
      p: {initial: p1, states: {p1: {type: final}}}
      q: {initial: q1, states: {q1: {type: final}}}
  end: {type: final}
"""
BUSY = """\
# Many events on one execution: its dedupe ids spill to the processed table, its trace ring drops old steps;
# its count is a search field (each commit puts its search entry; `list --where` reads the index).
id: busy
initial: counting
context: {n: 0}
search: {n: {type: number}}
states:
  counting:
    on: {inc: {actions: [{assign: {n: {add: ["$context.n", 1]}}}]}}
    after: {seconds: 120, target: waiting}
  waiting:
    on: {inc: {actions: [{assign: {n: {add: ["$context.n", 1]}}}]}}
    after: {seconds: 60, target: done}
  done: {type: final}
"""
FRAGILE = """\
# An action that fails: the execution fails (for `durastate redrive`).
id: fragile
initial: a
states:
  a:
    on: {go: {target: b, actions: [{assign: {x: {add: ["$context.nope", "x"]}}}]}}
  b: {type: final}
"""
CHARTS = {"charge.yaml": CHARGE, "notify.yaml": NOTIFY, "fork.yaml": FORK, "tick.yaml": TICK, "busy.yaml": BUSY,
          "fragile.yaml": FRAGILE, "schedules.yaml": SCHEDULES}
TASK_FUNCTION = "charge-card"
"""The Lambda task function the full template lets the relay invoke (in the local stack's account)."""


def charge_card(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The task function's handler (the local stack calls it as Lambda would)."""
    if event["input"]["amount"] > 100:
        raise ValueError("over the limit")
    return {"receipt": f"r-{event['task_id']}", "by": context.function_name}


def synth_app(tmp_path_factory: pytest.TempPathFactory, name: str, charts: dict[str, str],
              context: list[str]) -> Path:
    """``cdk synth`` of the app with a definitions folder of ``charts`` and ``-c`` context flags."""
    definitions = tmp_path_factory.mktemp(f"{name}-definitions")
    for chart in ("order.yaml", "payment.yaml"):
        shutil.copyfile(ROOT / "examples" / chart, definitions / chart)
    for file, text in charts.items():
        (definitions / file).write_text(text)
    out = tmp_path_factory.mktemp(f"{name}-synth") / "cdk.out"
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1", "CDK_DISABLE_CLI_TELEMETRY": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [cdk_cli(), "synth", "--quiet", "--no-notices", "-o", str(out),
            "-c", f"durastate:definitions={definitions}"]
    for flag in context:
        argv += ["-c", flag]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        pytest.fail(f"cdk synth failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return out / "DurastateStack.template.json"


@pytest.fixture(scope="session")
def full_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cdk synth`` of the app with retention (30 days), the schedules file, the task function and the trace."""
    return synth_app(tmp_path_factory, "full", CHARTS, ["durastate:retentionDays=30",
                                                        f"durastate:taskFunctions={TASK_FUNCTION}",
                                                        "durastate:trace=true"])
