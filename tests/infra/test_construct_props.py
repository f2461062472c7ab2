"""The construct's props reach the template (an in-process synth with a stand-in layer: no layer build)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from durastate.cdk import DurastateEngine

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    layer = tmp_path_factory.mktemp("layer")
    (layer / "python").mkdir()
    (layer / "python" / "placeholder.txt").write_text("stand-in layer\n")
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("out")))
    stack = cdk.Stack(app, "Custom")
    DurastateEngine(stack, "Orders", table_prefix="orders", definitions_dir=ROOT / "examples",
                removal_policy=cdk.RemovalPolicy.DESTROY, sweeper_rate=cdk.Duration.minutes(2),
                relay_backstop_rate=cdk.Duration.minutes(10), memory_size=1024,
                architecture=lambda_.Architecture.X86_64, worker_timeout=cdk.Duration.seconds(20),
                max_receive_count=3, layer_code=lambda_.Code.from_asset(str(layer)),
                build_root=tmp_path_factory.mktemp("build"))
    return dict(Template.from_stack(stack).to_json())


def _of(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def test_prefix_names_tables_queues_and_bus(template: dict[str, Any]) -> None:
    names = {r["Properties"]["TableName"] for r in _of(template, "AWS::DynamoDB::Table")}
    assert names == {f"orders_{n}" for n in ("executions", "outbox", "spawns", "timers", "processed",
                                             "counters", "trace")}
    assert {r["Properties"]["QueueName"] for r in _of(template, "AWS::SQS::Queue")} == {
        "orders-events.fifo", "orders-events-dlq.fifo", "orders-timers"}
    buses = [r["Properties"]["Name"] for r in _of(template, "AWS::Events::EventBus")]
    assert buses == ["orders-notifications"]
    for fn in _of(template, "AWS::Lambda::Function"):
        assert fn["Properties"]["Environment"]["Variables"]["DURASTATE_TABLE_PREFIX"] == "orders"


def test_sizing_rates_removal_and_redrive(template: dict[str, Any]) -> None:
    assert all(r["DeletionPolicy"] == "Delete" for r in _of(template, "AWS::DynamoDB::Table"))
    for fn in _of(template, "AWS::Lambda::Function"):
        assert fn["Properties"]["Architectures"] == ["x86_64"]
        assert fn["Properties"]["MemorySize"] == 1024
    rates = sorted(r["Properties"]["ScheduleExpression"] for r in _of(template, "AWS::Events::Rule"))
    assert rates == ["rate(10 minutes)", "rate(2 minutes)"]
    queue = next(q["Properties"] for q in _of(template, "AWS::SQS::Queue")
                 if q["Properties"]["QueueName"] == "orders-events.fifo")
    assert queue["VisibilityTimeout"] == 120
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 3


def test_a_definitions_folder_without_definitions_is_refused(tmp_path: Path) -> None:
    from durastate.cdk.construct import definition_files

    (tmp_path / "notes.txt").write_text("no statecharts here")
    with pytest.raises(ValueError, match="holds no"):
        definition_files(tmp_path)
