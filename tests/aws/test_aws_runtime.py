"""The runtime built from the environment alone, as a Lambda cold start does — against moto's HTTP server,
so the standard ``AWS_ENDPOINT_URL_*`` variables are shown to reach boto3 without being passed by harel.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from harel.runtime import aws as harel_aws
from harel.runtime.lambda_invoker import FakeLambdaContext, queue_arn, sqs_event

from .conftest import REGION, receive_all
from .harness import COUNTER_YAML, PREFIX, function


def test_settings_from_env(tmp_path: Path) -> None:
    s = harel_aws.AwsSettings.from_env({"HAREL_TABLE_PREFIX": "p", "AWS_REGION": "eu-west-1",
                                        "HAREL_QUEUE_URL": "q", "HAREL_DLQ_URL": "d",
                                        "HAREL_EVENT_BUS_NAME": "b", "HAREL_SWEEP_LIMIT": "7"},
                                       default_definitions_dir=tmp_path)
    assert (s.table_prefix, s.region, s.queue_url, s.dlq_url, s.event_bus_name, s.sweep_limit,
            s.relay_budget, s.definitions_dir) == ("p", "eu-west-1", "q", "d", "b", 7, 500, tmp_path)
    assert harel_aws.AwsSettings.from_env({}).table_prefix == "harel"
    with pytest.raises(ValueError, match="HAREL_RELAY_BUDGET"):
        harel_aws.AwsSettings.from_env({"HAREL_RELAY_BUDGET": "0"})


def test_missing_definitions_folder_is_a_clear_error(tmp_path: Path) -> None:
    from harel.errors import DefinitionError

    with pytest.raises(DefinitionError, match="HAREL_DEFINITIONS_DIR"):
        harel_aws.build_runtime(harel_aws.AwsSettings(definitions_dir=tmp_path / "nope"))


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
    from harel.engine.store.dynamodb import DynamoDBStore

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
    monkeypatch.setenv("HAREL_TABLE_PREFIX", PREFIX)
    monkeypatch.setenv("HAREL_QUEUE_URL", q)
    monkeypatch.setenv("HAREL_DLQ_URL", dlq)
    monkeypatch.setenv("HAREL_DEFINITIONS_DIR", str(defs))
    harel_aws.set_runtime(None)
    try:
        rt = harel_aws.get_runtime()
        assert rt is harel_aws.get_runtime()  # cached for the container's lifetime
        assert rt.sqs.meta.endpoint_url == moto_server
        assert rt.store._db.meta.endpoint_url == moto_server
        bodies = [json.dumps({"target_id": "c1", "event": {"id": "c1:start", "name": "harel.start",
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
        harel_aws.set_runtime(None)


def test_on_lambda_harel_log_lines_carry_the_record_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import logging

    from .conftest import load_function

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "harel-worker")
    parent = logging.getLogger("harel")
    saved = (parent.handlers[:], parent.propagate, parent.level)
    try:
        worker = load_function("worker")  # a fresh cold start, as on Lambda
        buf = io.StringIO()
        worker.logger.registered_handler.setStream(buf)
        worker.logger.append_keys(execution_id="x1", event_id="e1")
        logging.getLogger("harel.runtime.aws").error("dead-lettered message m1: reason")
        line = json.loads(buf.getvalue().splitlines()[-1])
        assert (line["name"], line["execution_id"], line["event_id"], line["level"]) == (
            "harel.runtime.aws", "x1", "e1", "ERROR")
    finally:
        parent.handlers[:], parent.propagate = saved[0], saved[1]
        parent.setLevel(saved[2])
