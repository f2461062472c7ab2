"""Schedules through the construct: the `schedules` prop reaches the sweeper as JSON, and the sweeper gets the
grants on schedule records only when the deployment has schedules (the prop or a folder file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from durastate.cdk import DurastateEngine
from durastate.cdk.construct import SCHEDULE_GRANTS, has_schedules_file

ROOT = Path(__file__).resolve().parents[2]


def test_a_schedules_file_is_recognised(tmp_path: Path) -> None:
    (tmp_path / "order.yaml").write_text("id: order\ninitial: a\nstates: {a: {type: final}}\n")
    assert not has_schedules_file(tmp_path)
    (tmp_path / "schedules.yaml").write_text("# nightly jobs\nschedules:\n  n: {definition: order, rate: 1d}\n")
    assert has_schedules_file(tmp_path)
    (tmp_path / "schedules.yaml").unlink()
    (tmp_path / "more.json").write_text('{"schedules": {}}')
    assert has_schedules_file(tmp_path)


def _sweeper_env_and_actions(template: dict[str, Any]) -> tuple[dict[str, str], set[str]]:
    resources = template["Resources"]
    (fn,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"
             and r["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME") == "durastate-sweeper"]
    role = fn["Role"]["Fn::GetAtt"][0]
    actions: set[str] = set()
    for r in resources.values():
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]:
            for st in r["Properties"]["PolicyDocument"]["Statement"]:
                actions.update(st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
    return fn["Environment"]["Variables"], actions


@pytest.mark.slow
def test_the_schedules_prop_reaches_the_sweeper_with_its_grants(tmp_path_factory: pytest.TempPathFactory) -> None:
    layer = tmp_path_factory.mktemp("layer")
    (layer / "python").mkdir()
    (layer / "python" / "placeholder.txt").write_text("stand-in layer\n")
    defs = tmp_path_factory.mktemp("defs")
    shutil.copy(ROOT / "examples" / "order.yaml", defs / "order.yaml")
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("out")))
    stack = cdk.Stack(app, "Scheduled")
    schedules = {"nightly": {"definition": "order", "cron": "0 2 * * *", "timezone": "Europe/Berlin"}}
    DurastateEngine(stack, "Engine", definitions_dir=defs, schedules=schedules,
                    layer_code=lambda_.Code.from_asset(str(layer)), build_root=tmp_path_factory.mktemp("build"))
    env, actions = _sweeper_env_and_actions(dict(Template.from_stack(stack).to_json()))
    assert json.loads(env["DURASTATE_SCHEDULES"]) == {"schedules": schedules}
    assert {f"dynamodb:{a}" for grant in SCHEDULE_GRANTS.values() for a in grant} <= actions
