"""Fixtures of the DynamoDB store tests: moto in-process, a recording client proxy, injected sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from durastate.store.dynamodb.sync import DynamoDBStore
from tests._aws import boto3_client, unique_prefix


class Recorder:
    """A boto3 client proxy that records every API call (and its response) and can inject errors.

    ``fail[op]`` is a list of exceptions raised, one per call, before the real call happens.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self.meta = client.meta
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, list[BaseException]] = {}
        self.after: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            queue = self.fail.get(name)
            if queue:
                raise queue.pop(0)
            if name in self.after:
                return self.after[name](attr, kwargs)
            response = attr(**kwargs)
            self.responses.append((name, response))
            return response

        return call

    def ops(self) -> list[str]:
        return [op for op, _ in self.calls]

    def reset(self) -> None:
        self.calls.clear()
        self.responses.clear()


class Sleeps(list[float]):
    """An injected ``sleep`` that only records how long it was asked to wait."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def ddb() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        yield boto3_client("dynamodb")


@pytest.fixture
def rec(ddb: Any) -> Recorder:
    return Recorder(ddb)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make_store(client: Any, sleeps: Sleeps | None = None, **options: Any) -> DynamoDBStore:
    store = DynamoDBStore(
        client,
        prefix=options.pop("prefix", unique_prefix()),
        sleep=sleeps if sleeps is not None else Sleeps(),
        **options,
    )
    store.ensure_tables()
    if isinstance(client, Recorder):
        client.reset()
    return store


@pytest.fixture
def store(rec: Recorder, sleeps: Sleeps) -> DynamoDBStore:
    return make_store(rec, sleeps)


def client_error(
    code: str,
    op: str = "TransactWriteItems",
    reasons: list[str] | None = None,
    retried: int = 0,
    **extra: Any,
) -> Exception:
    """A botocore ClientError as DynamoDB returns it (with CancellationReasons for a transaction)."""
    from botocore.exceptions import ClientError

    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": f"simulated {code}"},
        "ResponseMetadata": {"RetryAttempts": retried},
        **extra,
    }
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    error: Exception = ClientError(response, op)
    return error
