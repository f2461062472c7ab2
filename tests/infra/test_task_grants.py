"""Lambda tasks through the construct: ``task_functions`` lets the relay (which runs tasks) invoke exactly
those functions, given as functions of the app, by name or by ARN; without it, no function may invoke any."""

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

ARN = "arn:aws:lambda:eu-west-1:111122223333:function:fraud-check"


def synth(tmp: pytest.TempPathFactory, with_tasks: bool) -> dict[str, Any]:
    layer = tmp.mktemp("layer")
    (layer / "python").mkdir()
    (layer / "python" / "placeholder.txt").write_text("stand-in layer\n")
    app = cdk.App(outdir=str(tmp.mktemp("out")))
    stack = cdk.Stack(app, "Tasks", env=cdk.Environment(account="123456789012", region="us-east-1"))
    tasks: list[lambda_.IFunction | str] = []
    if with_tasks:
        charge = lambda_.Function(stack, "Charge", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler",
                                  code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"))
        tasks = [charge, "send-receipt", ARN]
    DurastateEngine(stack, "Engine", definitions_dir=ROOT / "examples", layer_code=lambda_.Code.from_asset(str(layer)),
                    build_root=tmp.mktemp("build"), task_functions=tasks)
    return dict(Template.from_stack(stack).to_json())


def invoke_grants(template: dict[str, Any]) -> dict[str, list[Any]]:
    """Per durastate function (by service name): the resources of its lambda:InvokeFunction statements."""
    resources = template["Resources"]
    out: dict[str, list[Any]] = {}
    for fn in resources.values():
        if fn["Type"] != "AWS::Lambda::Function" or "Environment" not in fn["Properties"]:
            continue
        name = fn["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME")
        role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in resources.values():
            if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]:
                for st in r["Properties"]["PolicyDocument"]["Statement"]:
                    if "lambda:InvokeFunction" in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]):
                        res = st["Resource"]
                        out.setdefault(name, []).extend(res if isinstance(res, list) else [res])
    return out


def test_the_relay_may_invoke_exactly_the_task_functions(tmp_path_factory: pytest.TempPathFactory) -> None:
    grants = invoke_grants(synth(tmp_path_factory, with_tasks=True))
    assert list(grants) == ["durastate-relay"]
    relay = grants["durastate-relay"]
    charge = next(r["Fn::GetAtt"][0] for r in relay if isinstance(r, dict) and "Fn::GetAtt" in r)
    assert charge.startswith("Charge")
    assert relay == [
        {"Fn::GetAtt": [charge, "Arn"]},  # a function of the app
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},  # a name: in the stack's account and region
                           ":lambda:us-east-1:123456789012:function:send-receipt"]]},
        ARN,  # an ARN, as given
    ]

def test_without_task_functions_nothing_may_invoke(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert invoke_grants(synth(tmp_path_factory, with_tasks=False)) == {}
