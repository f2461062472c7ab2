#!/usr/bin/env python3
"""CDK entry point: ``cdk synth`` / ``cdk deploy`` run this (see cdk.json).

Settings come from CDK context (``cdk.json`` or ``-c key=value``):
  durastate:tablePrefix     table/queue/bus name prefix            (default "durastate")
  durastate:definitions     folder of statecharts to package       (default "examples")
  durastate:removalPolicy   retain | destroy | snapshot (tables)   (default "retain")
  durastate:architecture    arm64 | x86_64                         (default "arm64")
  durastate:memorySize      Lambda memory in MB                    (default 512)
  durastate:sweeperRateMinutes / durastate:relayBackstopMinutes        (defaults 1 / 5)
  durastate:retentionDays   purge executions ended longer ago      (default: unset, never purge)
  durastate:trace           record a trace step per commit         (default false: only failed steps)
  durastate:history         keep every trace step, not the newest 200 (default false)
  durastate:timerHops       timers due within 15 min take the SQS delay hop (default true; false: sweeper only)
  durastate:workerMaxConcurrency  the worker event source's maximum concurrency (default 10)
  durastate:taskFunctions   Lambda functions definitions run as tasks, names or ARNs, comma-separated
                            (the relay may invoke exactly these; default: none)
  durastate:largeContexts   an encrypted S3 bucket for executions past DynamoDB's 400 KB item (default false)
  durastate:bundleLayer     no Lambda layer: the engine goes into each function's code (default false;
                            true for LocalStack community, which runs no layers)
  durastate:nag             run cdk-nag's AwsSolutions checks      (default true)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # the checkout's durastate package, as in a user's installed one

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from durastate.cdk import DurastateStack, architecture, removal_policy  # noqa: E402


def _context(app: cdk.App, key: str, default: str) -> str:
    value = app.node.try_get_context(f"durastate:{key}")
    return default if value is None else str(value)


def _days(value: str) -> cdk.Duration | None:
    """A number of days from context ("" or "0": off)."""
    if not value.strip() or float(value) == 0:
        return None
    if float(value) < 0:
        raise ValueError(f"durastate:retentionDays must be a positive number of days, not {value!r}")
    return cdk.Duration.hours(round(float(value) * 24))


def _flag(value: str, key: str) -> bool:
    """A true/false context value (``-c durastate:trace=true``)."""
    low = value.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"durastate:{key} must be true or false, not {value!r}")


def main() -> None:
    app = cdk.App()
    definitions = Path(_context(app, "definitions", "examples"))
    DurastateStack(
        app,
        _context(app, "stackName", "DurastateStack"),
        table_prefix=_context(app, "tablePrefix", "durastate"),
        definitions_dir=definitions if definitions.is_absolute() else ROOT / definitions,
        removal=removal_policy(_context(app, "removalPolicy", "retain")),
        arch=architecture(_context(app, "architecture", "arm64")),
        memory_size=int(_context(app, "memorySize", "512")),
        sweeper_rate=cdk.Duration.minutes(int(_context(app, "sweeperRateMinutes", "1"))),
        relay_backstop_rate=cdk.Duration.minutes(int(_context(app, "relayBackstopMinutes", "5"))),
        retention=_days(_context(app, "retentionDays", "")),
        trace=_flag(_context(app, "trace", "false"), "trace"),
        history=_flag(_context(app, "history", "false"), "history"),
        timer_hops=_flag(_context(app, "timerHops", "true"), "timerHops"),
        worker_max_concurrency=int(_context(app, "workerMaxConcurrency", "10")),
        task_functions=[f.strip() for f in _context(app, "taskFunctions", "").split(",") if f.strip()],
        bundle_layer=_flag(_context(app, "bundleLayer", "false"), "bundleLayer"),
        large_contexts=_flag(_context(app, "largeContexts", "false"), "largeContexts"),
    )
    if _context(app, "nag", "true").lower() not in ("false", "0", "no"):
        # Findings fail the synth; acknowledged ones are written into the template's Metadata with reasons.
        cdk.Validations.of(app).add_plugins(
            AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True))
    app.synth()


if __name__ == "__main__":
    main()
