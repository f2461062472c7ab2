"""A user's own CDK app, outside this checkout, synthesizes the engine from the installed wheel.

Slow: the wheel (built once per session, see conftest.py) goes into a clean virtualenv with the ``cdk`` extra,
and the app — a folder of its own with its own definitions, importing only ``durastate.cdk`` — is
synthesized with ``app.synth()`` by that venv's Python (jsii runs on the development install's Node). It
guards what a checkout would hide: the handlers, the table layout, the layer's pins and the package files
the layer is built from all come from the installed distribution.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from .support import ROOT, run

pytestmark = pytest.mark.slow

DEFINITION = """
id: ticket
initial: open
context: {notes: 0}
states:
  open:
    on:
      note: {actions: [{assign: {notes: {add: ["$context.notes", 1]}}}]}
      close: closed
  closed: {type: final, outcome: closed}
"""

USER_APP = """
import json
import sys

import aws_cdk as cdk
import durastate.cdk
from durastate.cdk import DurastateEngine

app = cdk.App(outdir="cdk.out")
stack = cdk.Stack(app, "TicketsStack")
DurastateEngine(stack, "Engine", table_prefix="tickets", definitions_dir="definitions")
template = app.synth().get_stack_by_name("TicketsStack").template
json.dump({"durastate": durastate.cdk.__file__, "template": template}, sys.stdout)
"""


def test_a_users_cdk_app_synthesizes_from_the_installed_wheel(dists: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = dists
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt", f"{wheel}[cdk]"], cwd=tmp_path,
        timeout=900)

    app = tmp_path / "tickets-app"  # the user's project: nothing of this checkout in it
    (app / "definitions").mkdir(parents=True)
    (app / "definitions" / "ticket.yaml").write_text(DEFINITION)
    (app / "app.py").write_text(USER_APP)
    node_bin = Path(sys.executable).parent  # the development install links a supported Node there
    env_path = f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    build = tmp_path / "cdk-build"
    proc = run([python, "app.py"], cwd=app, timeout=900, extra_env={
        "PATH": env_path, "DURASTATE_CDK_BUILD_DIR": str(build), "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"})
    out = json.loads(proc.stdout)
    assert out["durastate"].startswith(str(venv)), out["durastate"]  # the installed package, not the checkout

    resources = out["template"]["Resources"].values()
    by_type: dict[str, list[dict[str, object]]] = {}
    for res in resources:
        by_type.setdefault(res["Type"], []).append(res["Properties"])
    tables = sorted(str(t["TableName"]) for t in by_type["AWS::DynamoDB::Table"])
    assert tables == sorted(f"tickets_{n}" for n in ("executions", "outbox", "spawns", "timers", "processed",
                                                       "counters", "trace"))
    queues = {str(q.get("QueueName")) for q in by_type["AWS::SQS::Queue"]}
    assert {"tickets-events.fifo", "tickets-events-dlq.fifo", "tickets-timers"} <= queues
    handlers = sorted(str(f["Handler"]) for f in by_type["AWS::Lambda::Function"])
    assert handlers == ["relay.handler", "sweeper.handler", "timers.handler", "worker.handler"]
    assert len(by_type["AWS::Lambda::LayerVersion"]) == 1

    # What each function's asset holds: its handler from the wheel, and the app's own definitions.
    assets = app / "cdk.out"
    worker_dirs = [d for d in assets.glob("asset.*") if (d / "worker.py").is_file()]
    assert len(worker_dirs) == 1 and (worker_dirs[0] / "definitions" / "ticket.yaml").is_file()
    [layer] = [d for d in assets.glob("asset.*") if (d / "python" / "durastate").is_dir()]
    assert (layer / "python" / "durastate" / "runtime" / "aws.py").is_file()
    assert not (layer / "python" / "durastate" / "cdk").exists()  # deployment code stays out of the layer
    assert (layer / "python" / "pydantic").is_dir() and (layer / "python" / "aws_lambda_powertools").is_dir()
