"""The timer hop, the alarm's topic, the worker's concurrency bound and the trace switch reach the template.

The default stack is the session's real ``cdk synth``; the construct's props are checked with an
in-process synth and a stand-in layer; the ``durastate:*`` context keys with one more real ``cdk synth``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from durastate.cdk import DurastateEngine
from durastate.cdk.construct import DEFAULT_WORKER_MAX_CONCURRENCY

from .synth import ROOT, STACK, cdk_cli

pytestmark = pytest.mark.slow


def _of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == kind}


def _function(template: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    [(lid, fn)] = [(lid, r) for lid, r in _of(template, "AWS::Lambda::Function").items()
                   if r["Properties"]["Handler"] == handler]
    return lid, fn


def _mapping(template: dict[str, Any], function_id: str) -> dict[str, Any]:
    [esm] = [r["Properties"] for r in _of(template, "AWS::Lambda::EventSourceMapping").values()
             if r["Properties"]["FunctionName"] == {"Ref": function_id}]
    return esm


def test_timers_queue_and_function_hop_timers_due_within_fifteen_minutes(template_json: dict[str, Any]) -> None:
    [(queue_id, queue)] = [(lid, q) for lid, q in _of(template_json, "AWS::SQS::Queue").items()
                           if q["Properties"]["QueueName"] == "durastate-timers"]
    assert "FifoQueue" not in queue["Properties"], "per-message delays need a standard queue"
    timers_id, timers = _function(template_json, "timers.handler")
    assert _mapping(template_json, timers_id)["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    for handler in ("worker.handler", "relay.handler", "sweeper.handler", "timers.handler"):
        env = _function(template_json, handler)[1]["Properties"]["Environment"]["Variables"]
        assert env["DURASTATE_TIMERS_QUEUE_URL"] == {"Ref": queue_id}
    assert timers["Properties"]["Timeout"] <= 60


def test_dead_letter_alarm_notifies_a_topic_and_the_worker_is_bounded(template_json: dict[str, Any]) -> None:
    [topic_id] = _of(template_json, "AWS::SNS::Topic")
    [alarm] = _of(template_json, "AWS::CloudWatch::Alarm").values()
    assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
    worker_id, worker = _function(template_json, "worker.handler")
    esm = _mapping(template_json, worker_id)
    assert esm["ScalingConfig"] == {"MaximumConcurrency": DEFAULT_WORKER_MAX_CONCURRENCY}
    assert "ReservedConcurrentExecutions" not in worker["Properties"]
    outputs = template_json["Outputs"]
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": topic_id}
    assert "TimersQueueUrl" in outputs
    env = worker["Properties"]["Environment"]["Variables"]
    assert env["DURASTATE_TRACE"] == "0", "the trace is off by default (only failed steps are recorded)"
    assert "DURASTATE_HISTORY" not in env, "whole histories are off by default (the ring of 200)"


@pytest.fixture(scope="module")
def custom(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    layer = tmp_path_factory.mktemp("layer")
    (layer / "python").mkdir()
    (layer / "python" / "placeholder.txt").write_text("stand-in layer\n")
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("out")))
    stack = cdk.Stack(app, "Custom")
    topic = sns.Topic(stack, "OpsTopic")
    DurastateEngine(stack, "Orders", table_prefix="orders", definitions_dir=ROOT / "examples",
                    layer_code=lambda_.Code.from_asset(str(layer)), build_root=tmp_path_factory.mktemp("build"),
                    alarm_topic=topic, timer_hops=False, worker_max_concurrency=None,
                    worker_reserved_concurrency=50, trace=True, history=True)
    return dict(Template.from_stack(stack).to_json())


def test_props_take_an_existing_topic_reserve_concurrency_and_turn_hops_off(custom: dict[str, Any]) -> None:
    [topic_id] = _of(custom, "AWS::SNS::Topic")  # the one passed in: none created
    assert topic_id.startswith("OpsTopic")
    [alarm] = _of(custom, "AWS::CloudWatch::Alarm").values()
    assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
    worker_id, worker = _function(custom, "worker.handler")
    assert worker["Properties"]["ReservedConcurrentExecutions"] == 50
    assert "ScalingConfig" not in _mapping(custom, worker_id)
    assert [q["Properties"]["QueueName"] for q in _of(custom, "AWS::SQS::Queue").values()
            if not q["Properties"].get("FifoQueue")] == []
    handlers = {r["Properties"]["Handler"] for r in _of(custom, "AWS::Lambda::Function").values()}
    assert "timers.handler" not in handlers
    assert "DURASTATE_TIMERS_QUEUE_URL" not in worker["Properties"]["Environment"]["Variables"]
    assert worker["Properties"]["Environment"]["Variables"]["DURASTATE_TRACE"] == "1"
    assert worker["Properties"]["Environment"]["Variables"]["DURASTATE_HISTORY"] == "1"


def test_context_keys_turn_the_trace_on_and_set_the_worker_bound(tmp_path: Path) -> None:
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1", "CDK_DISABLE_CLI_TELEMETRY": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    out = tmp_path / "cdk.out"
    proc = subprocess.run([cdk_cli(), "synth", "--quiet", "--no-notices", "-o", str(out),
                           "-c", "durastate:trace=true", "-c", "durastate:timerHops=false",
                           "-c", "durastate:workerMaxConcurrency=4"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    template = json.loads((out / f"{STACK}.template.json").read_text())
    worker_id, worker = _function(template, "worker.handler")
    assert worker["Properties"]["Environment"]["Variables"]["DURASTATE_TRACE"] == "1"
    assert _mapping(template, worker_id)["ScalingConfig"] == {"MaximumConcurrency": 4}
    assert not [r for r in _of(template, "AWS::Lambda::Function").values()
                if r["Properties"]["Handler"] == "timers.handler"]
