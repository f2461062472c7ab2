"""``large_contexts``: the context bucket of the claim check — private, encrypted, SSL only, cdk-nag clean —
and exactly the object actions each function's code calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from durastate.cdk import DurastateEngine
from durastate.cdk.construct import CONTEXT_GRANTS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def synth(tmp: pytest.TempPathFactory, **props: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    layer = tmp.mktemp("layer")
    (layer / "python").mkdir()
    (layer / "python" / "placeholder.txt").write_text("stand-in layer\n")
    out = tmp.mktemp("out")
    app = cdk.App(outdir=str(out))
    stack = cdk.Stack(app, "Large")
    DurastateEngine(stack, "Engine", definitions_dir=ROOT / "examples", layer_code=lambda_.Code.from_asset(str(layer)),
                    build_root=tmp.mktemp("build"), **props)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
    template = dict(Template.from_stack(stack).to_json())
    report = out / "validation-report.json"
    return template, json.loads(report.read_text()) if report.exists() else {}


def function_statements(template: dict[str, Any], name: str) -> list[dict[str, Any]]:
    resources = template["Resources"]
    (fn,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"
             and r["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME") == f"durastate-{name}"]
    role = fn["Role"]["Fn::GetAtt"][0]
    return [st for r in resources.values()
            if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
            for st in r["Properties"]["PolicyDocument"]["Statement"]]


def s3_actions(statements: list[dict[str, Any]]) -> set[str]:
    acts = {a for st in statements for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])}
    return {a for a in acts if a.startswith("s3:")}


def test_the_context_bucket_is_private_encrypted_and_granted_per_function(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    template, report = synth(tmp_path_factory, large_contexts=True, retention=cdk.Duration.days(30),
                            claim_check_bytes=100_000)
    (bucket,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "AES256"}
    assert bucket["LifecycleConfiguration"]["Rules"]
    (policy,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::S3::BucketPolicy"]
    assert any(st["Effect"] == "Deny" and st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for st in policy["PolicyDocument"]["Statement"])
    for name, actions in CONTEXT_GRANTS.items():
        assert s3_actions(function_statements(template, name)) == {f"s3:{a}" for a in actions}, name
    sweeper = function_statements(template, "sweeper")
    assert s3_actions(sweeper) == {"s3:GetObject", "s3:DeleteObject", "s3:ListBucket"}
    resources = template["Resources"]
    env = [r["Properties"]["Environment"]["Variables"] for r in resources.values()
           if r["Type"] == "AWS::Lambda::Function" and "Environment" in r["Properties"]
           and "POWERTOOLS_SERVICE_NAME" in r["Properties"]["Environment"]["Variables"]]
    assert env and all("DURASTATE_CONTEXT_BUCKET" in e and e["DURASTATE_CLAIM_CHECK_BYTES"] == "100000"
                       for e in env)
    assert report, "the AwsSolutions pack did not run"
    assert [v for r in report["pluginReports"] for v in r.get("violations", [])] == []


def test_without_large_contexts_there_is_no_bucket(tmp_path_factory: pytest.TempPathFactory) -> None:
    template, _ = synth(tmp_path_factory)
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    assert s3_actions(function_statements(template, "worker")) == set()
