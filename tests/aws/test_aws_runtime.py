"""The runtime built from the environment alone, as a Lambda cold start does — against moto's HTTP server,
so the standard ``AWS_ENDPOINT_URL_*`` variables are shown to reach boto3 without being passed by durastate.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from durastate.devstack import FakeLambdaContext, queue_arn, sqs_event
from durastate.runtime import aws as durastate_aws

from .conftest import REGION, receive_all
from .harness import COUNTER_YAML, PREFIX, function


def test_settings_from_env(tmp_path: Path) -> None:
    s = durastate_aws.AwsSettings.from_env({"DURASTATE_TABLE_PREFIX": "p", "AWS_REGION": "eu-west-1",
                                        "DURASTATE_QUEUE_URL": "q", "DURASTATE_DLQ_URL": "d",
                                        "DURASTATE_EVENT_BUS_NAME": "b", "DURASTATE_SWEEP_LIMIT": "7"},
                                       default_definitions_dir=tmp_path)
    assert (s.table_prefix, s.region, s.queue_url, s.dlq_url, s.event_bus_name, s.sweep_limit,
            s.relay_budget, s.definitions_dir) == ("p", "eu-west-1", "q", "d", "b", 7, 500, tmp_path)
    assert durastate_aws.AwsSettings.from_env({}).table_prefix == "durastate"
    assert durastate_aws.AwsSettings.from_env({}).history is False
    assert durastate_aws.AwsSettings.from_env({"DURASTATE_HISTORY": "1"}).history is True
    with pytest.raises(ValueError, match="DURASTATE_RELAY_BUDGET"):
        durastate_aws.AwsSettings.from_env({"DURASTATE_RELAY_BUDGET": "0"})


def test_missing_definitions_folder_is_a_clear_error(tmp_path: Path) -> None:
    from durastate.errors import DefinitionError

    with pytest.raises(DefinitionError, match="DURASTATE_DEFINITIONS_DIR"):
        durastate_aws.build_runtime(durastate_aws.AwsSettings(definitions_dir=tmp_path / "nope"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_cold_start_from_env_uses_the_standard_endpoint_variables(moto_server: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from durastate.store.dynamodb.sync import DynamoDBStore

    DynamoDBStore.create(prefix=PREFIX, endpoint_url=moto_server, region=REGION).close()  # the stack's tables
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server)
    dlq = sqs.create_queue(QueueName="d.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    q = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    defs = tmp_path / "definitions"
    defs.mkdir()
    (defs / "counter.yaml").write_text(COUNTER_YAML)
    # Only the environment: separate per-service variables, as a deployment would set them.
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", moto_server)
    monkeypatch.setenv("DURASTATE_TABLE_PREFIX", PREFIX)
    monkeypatch.setenv("DURASTATE_QUEUE_URL", q)
    monkeypatch.setenv("DURASTATE_DLQ_URL", dlq)
    monkeypatch.setenv("DURASTATE_DEFINITIONS_DIR", str(defs))
    durastate_aws.set_runtime(None)
    try:
        rt = durastate_aws.get_runtime()
        assert rt is durastate_aws.get_runtime()  # cached for the container's lifetime
        assert rt.sqs.meta.endpoint_url == moto_server
        assert rt.store._db.meta.endpoint_url == moto_server
        bodies = [json.dumps({"target_id": "c1", "event": {"id": "c1:start", "name": "durastate.start",
                                                           "data": {"definition_id": "counter"}}}),
                  json.dumps({"target_id": "c1", "event": {"id": "i1", "name": "inc"}}), "not json"]
        for i, body in enumerate(bodies):
            sqs.send_message(QueueUrl=q, MessageBody=body, MessageGroupId="c1", MessageDeduplicationId=str(i))
        msgs: list[dict[str, Any]] = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10,
                                                         MessageSystemAttributeNames=["All"])["Messages"]
        worker = function("worker")
        resp = worker.handler(sqs_event(msgs, queue_arn(q, REGION), REGION), FakeLambdaContext())
        assert resp["batchItemFailures"] == []
        exe = rt.store.load("c1")
        assert exe is not None and exe.context["count"] == 1
        [letter] = receive_all(sqs, dlq)
        assert letter["Body"] == "not json"
    finally:
        durastate_aws.set_runtime(None)


def test_on_lambda_durastate_log_lines_carry_the_record_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import logging

    from .conftest import load_function

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "durastate-worker")
    parent = logging.getLogger("durastate")
    saved = (parent.handlers[:], parent.propagate, parent.level)
    try:
        worker = load_function("worker")  # a fresh cold start, as on Lambda
        buf = io.StringIO()
        worker.logger.registered_handler.setStream(buf)
        worker.logger.append_keys(execution_id="x1", event_id="e1")
        logging.getLogger("durastate.runtime.aws").error("dead-lettered message m1: reason")
        line = json.loads(buf.getvalue().splitlines()[-1])
        assert (line["name"], line["execution_id"], line["event_id"], line["level"]) == (
            "durastate.runtime.aws", "x1", "e1", "ERROR")
    finally:
        parent.handlers[:], parent.propagate = saved[0], saved[1]
        parent.setLevel(saved[2])


def test_the_context_bucket_from_env_claim_checks_what_the_worker_commits(
        moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from durastate.store.dynamodb.sync import DynamoDBStore

    DynamoDBStore.create(prefix=PREFIX, endpoint_url=moto_server, region=REGION).close()
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_server)
    s3.create_bucket(Bucket="contexts")
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server)
    q = sqs.create_queue(QueueName="claim.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    defs = tmp_path / "definitions"
    defs.mkdir()
    (defs / "counter.yaml").write_text(COUNTER_YAML)
    for name, value in {"AWS_ENDPOINT_URL_DYNAMODB": moto_server, "AWS_ENDPOINT_URL_SQS": moto_server,
                        "AWS_ENDPOINT_URL_S3": moto_server, "DURASTATE_TABLE_PREFIX": PREFIX,
                        "DURASTATE_QUEUE_URL": q, "DURASTATE_DEFINITIONS_DIR": str(defs),
                        "DURASTATE_CONTEXT_BUCKET": "contexts", "DURASTATE_CLAIM_CHECK_BYTES": "1"}.items():
        monkeypatch.setenv(name, value)
    durastate_aws.set_runtime(None)
    try:
        rt = durastate_aws.get_runtime()
        body = json.dumps({"target_id": "big1", "event": {"id": "big1:start", "name": "durastate.start",
                                                        "data": {"definition_id": "counter"}}})
        sqs.send_message(QueueUrl=q, MessageBody=body, MessageGroupId="big1", MessageDeduplicationId="0")
        msgs = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])
        resp = function("worker").handler(sqs_event(msgs["Messages"], queue_arn(q, REGION), REGION),
                                          FakeLambdaContext())
        assert resp["batchItemFailures"] == []
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="contexts", Prefix="contexts/big1/")["Contents"]]
        assert len(keys) == 1
        exe = rt.store.load("big1")
        assert exe is not None and exe.definition_id == "counter"
    finally:
        durastate_aws.set_runtime(None)
