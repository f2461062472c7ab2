"""Retention through the construct: TTL on the executions table and its ``ended`` index always; with the
``retention`` prop, the sweeper gets the setting and exactly the grants a purge batch needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from durastate.cdk import DurastateEngine
from durastate.cdk.construct import RETENTION_GRANTS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def synth(tmp: pytest.TempPathFactory, **props: Any) -> dict[str, Any]:
    layer = tmp.mktemp("layer")
    (layer / "python").mkdir()
    (layer / "python" / "placeholder.txt").write_text("stand-in layer\n")
    app = cdk.App(outdir=str(tmp.mktemp("out")))
    stack = cdk.Stack(app, "Kept")
    DurastateEngine(stack, "Engine", definitions_dir=ROOT / "examples", layer_code=lambda_.Code.from_asset(str(layer)),
                    build_root=tmp.mktemp("build"), **props)
    return dict(Template.from_stack(stack).to_json())


def sweeper(template: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The sweeper's environment and the statements of its role's policies."""
    resources = template["Resources"]
    (fn,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"
             and r["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME") == "durastate-sweeper"]
    role = fn["Role"]["Fn::GetAtt"][0]
    statements = [st for r in resources.values()
                  if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
                  for st in r["Properties"]["PolicyDocument"]["Statement"]]
    return fn["Environment"]["Variables"], statements


def actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for st in statements for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])}


def test_retention_reaches_the_sweeper_with_its_grants(tmp_path_factory: pytest.TempPathFactory) -> None:
    template = synth(tmp_path_factory, retention=cdk.Duration.days(30), tombstone_ttl=cdk.Duration.days(3))
    env, statements = sweeper(template)
    assert env["DURASTATE_RETENTION_SECONDS"] == str(30 * 86400)
    assert env["DURASTATE_TOMBSTONE_TTL_SECONDS"] == str(3 * 86400)
    assert {f"dynamodb:{a}" for grant in RETENTION_GRANTS.values() for a in grant} <= actions(statements)
    index_grants = [st for st in statements if "/index/ended" in str(st["Resource"])]
    assert index_grants and actions(index_grants) == {"dynamodb:Query"}

    (executions,) = [r["Properties"] for r in template["Resources"].values()
                     if r["Type"] == "AWS::DynamoDB::Table" and r["Properties"]["TableName"] == "durastate_executions"]
    assert executions["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert "ended" in {i["IndexName"] for i in executions["GlobalSecondaryIndexes"]}


def test_without_retention_nothing_is_purged(tmp_path_factory: pytest.TempPathFactory) -> None:
    env, statements = sweeper(synth(tmp_path_factory))
    assert "DURASTATE_RETENTION_SECONDS" not in env
    assert not [st for st in statements if "/index/ended" in str(st["Resource"])]
