"""The operator policy in docs/aws-deploy.md is the one the grant tables generate (and the construct creates)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from durastate.cdk.construct import (
    OPERATOR_INDEX_GRANTS,
    OPERATOR_QUEUE_GRANTS,
    OPERATOR_TABLE_GRANTS,
    operator_policy,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "aws-deploy.md"


def test_the_documented_operator_policy_is_the_generated_one() -> None:
    section = DOC.read_text().split("### The operator policy", 1)[1]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None, "the operator policy's JSON block is missing from docs/aws-deploy.md"
    assert json.loads(block.group(1)) == operator_policy("durastate", "REGION", "ACCOUNT")


def test_the_operator_policy_names_its_resources_exactly() -> None:
    policy = operator_policy("shop", "eu-west-1", "111122223333")
    resources = [st["Resource"] for st in policy["Statement"]]
    assert all("*" not in r for r in resources)
    assert "arn:aws:dynamodb:eu-west-1:111122223333:table/shop_executions/index/ended" in resources
    assert "arn:aws:sqs:eu-west-1:111122223333:shop-events-dlq.fifo" in resources
    assert len(resources) == len(OPERATOR_TABLE_GRANTS) + len(OPERATOR_INDEX_GRANTS) + len(OPERATOR_QUEUE_GRANTS)
    assert not any("CreateTable" in a for st in policy["Statement"] for a in st["Action"])
