"""The no-Docker stack's moto server: what it holds goes with it.

moto keeps its state per process, not per server: a second server started in the same process (the next
test's local stack, a second ``LocalStack`` in one program) would otherwise see the first one's tables,
queues and items — an execution left ``finished`` by an earlier stack answers the next stack's events as
stale, and its requests differ from a fresh deployment's.
"""

from __future__ import annotations

import pytest

from durastate.devstack.moto_server import MotoServer, endpoint_client

pytest.importorskip("moto.server")


def test_a_stopped_servers_resources_are_gone_from_the_next_one() -> None:
    first = MotoServer()
    url = first.start()
    try:
        endpoint_client("sqs", url, "us-east-1").create_queue(QueueName="left-behind")
        ddb = endpoint_client("dynamodb", url, "us-east-1")
        ddb.create_table(TableName="left_behind", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                         BillingMode="PAY_PER_REQUEST")
    finally:
        first.stop()
    second = MotoServer()
    url = second.start()
    try:
        assert endpoint_client("sqs", url, "us-east-1").list_queues().get("QueueUrls", []) == []
        assert endpoint_client("dynamodb", url, "us-east-1").list_tables()["TableNames"] == []
    finally:
        second.stop()
