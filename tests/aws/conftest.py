"""Fixtures of the AWS tests: moto in-process, a FIFO queue with its FIFO DLQ, an event bus, and the
Lambda handler modules loaded from ``durastate/functions/`` exactly as Lambda imports them.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "durastate" / "functions"
REGION = "us-east-1"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials, one region, Powertools quiet and without X-Ray; no real endpoint can leak in."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB",
                 "AWS_ENDPOINT_URL_EVENTBRIDGE", "AWS_PROFILE", "DURASTATE_QUEUE_URL", "DURASTATE_DLQ_URL",
                 "DURASTATE_EVENT_BUS_NAME", "DURASTATE_DEFINITIONS_DIR", "DURASTATE_TABLE_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "durastate")
    monkeypatch.setenv("POWERTOOLS_DEV", "false")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")


@pytest.fixture(autouse=True)
def no_metrics_left_over() -> None:
    """Start each test with Powertools' metric set empty. It is shared by every ``Metrics`` instance of the
    process (class attributes), and a handler run with ``POWERTOOLS_METRICS_DISABLED`` (the in-process local
    stack's tests, earlier in the same test process) keeps what it added, so this test's first flush would
    print it: one Lambda container never switches that setting, a test process does."""
    from aws_lambda_powertools import Metrics

    Metrics().clear_metrics()


@pytest.fixture
def moto() -> Iterator[None]:
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture
def sqs(moto: None) -> Any:
    import boto3

    return boto3.client("sqs", region_name=REGION)


@pytest.fixture
def queues(sqs: Any) -> tuple[str, str]:
    """(queue_url, dlq_url): a FIFO queue whose redrive policy moves a message after 5 receives."""
    dlq = sqs.create_queue(QueueName="durastate-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    q = sqs.create_queue(QueueName="durastate-events.fifo", Attributes={
        "FifoQueue": "true", "VisibilityTimeout": "60",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})})["QueueUrl"]
    return q, dlq


def receive_all(sqs: Any, url: str, limit: int = 100) -> list[dict[str, Any]]:
    """Consume every message of ``url``: receive, then delete (so FIFO groups unlock as it goes)."""
    out: list[dict[str, Any]] = []
    while len(out) < limit:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"],
                                  MessageAttributeNames=["All"], VisibilityTimeout=300).get("Messages", [])
        if not got:
            break
        out.extend(got)
        for m in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return out


def load_function(name: str) -> ModuleType:
    """Import ``durastate/functions/<name>.py`` as Lambda does (a top-level module), fresh for each test module."""
    mod_name = f"durastate_fn_{name}"
    spec = importlib.util.spec_from_file_location(mod_name, FUNCTIONS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module
