"""DynamoDBStore and AsyncDynamoDBStore in the conformance suite.

- ``dynamodb-moto``: the sync store over moto in-process (``mock_aws``).
- ``dynamodb-server``: the sync store over moto's HTTP server (boto3's real HTTP path).
- ``async-dynamodb-server``: the async store over moto's HTTP server (aiobotocore's real HTTP path;
  ``mock_aws`` cannot intercept aiohttp).

Each store gets its own table prefix and its own S3 bucket for executions past the item limit (the
claim check); the server is one per session (see ``tests/_aws.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from durastate.store.base import AsyncExecutionStore, ExecutionStore
from tests._aws import boto3_client, shared_moto_server, shared_server_client

from .backends import BackendRequest, register

_aio_session: Any = None


def _bucket(s3: Any, req: BackendRequest) -> str:
    """A fresh bucket of this store's for claim-checked executions."""
    s3.create_bucket(Bucket=req.unique)
    return req.unique


@register("dynamodb-moto", durable=True)
@contextlib.contextmanager
def _dynamodb_moto(req: BackendRequest) -> Iterator[ExecutionStore]:
    from moto import mock_aws

    from durastate.store.dynamodb.sync import DynamoDBStore

    with mock_aws():
        store = DynamoDBStore(boto3_client("dynamodb"), prefix=req.unique, trace_max=req.trace_max,
                              context_bucket=_bucket(boto3_client("s3"), req), s3=boto3_client("s3"))
        store.ensure_tables()
        try:
            yield store
        finally:
            store.close()


@register("dynamodb-server", durable=True)
@contextlib.contextmanager
def _dynamodb_server(req: BackendRequest) -> Iterator[ExecutionStore]:
    from durastate.store.dynamodb.sync import DynamoDBStore

    # One boto3 client for the session (building one costs more than a test); create() itself is
    # exercised by the async backend below and by tests/store/dynamodb.
    s3 = shared_server_client("s3")
    store = DynamoDBStore(shared_server_client("dynamodb"), prefix=req.unique, trace_max=req.trace_max,
                          context_bucket=_bucket(s3, req), s3=s3)
    store.ensure_tables()
    try:
        yield store
    finally:
        store.close()


@register("async-dynamodb-server", durable=True, is_async=True)
@contextlib.asynccontextmanager
async def _async_dynamodb_server(req: BackendRequest) -> AsyncIterator[AsyncExecutionStore]:
    from durastate.store.dynamodb.aio import AsyncDynamoDBStore

    global _aio_session
    from aiobotocore.session import AioSession

    _aio_session = _aio_session or AioSession()  # clients bind to a loop; a session does not
    server = shared_moto_server()
    store = await AsyncDynamoDBStore.create(
        prefix=req.unique,
        endpoint_url=server.url,
        region="us-east-1",
        trace_max=req.trace_max,
        session=_aio_session,
        context_bucket=_bucket(shared_server_client("s3"), req),
    )
    try:
        yield store
    finally:
        await store.close()
