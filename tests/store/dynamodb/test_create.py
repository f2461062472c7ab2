"""create(): the client it builds, waiting for a late endpoint, and what it says when there is none."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durastate.engine.model import Execution
from durastate.errors import StoreUnavailable
from durastate.store import open_store
from durastate.store.dynamodb.aio import AsyncDynamoDBStore
from durastate.store.dynamodb.sync import DynamoDBStore
from tests._aws import free_port, late_server, shared_moto_server, unique_prefix

from .conftest import Sleeps


@pytest.fixture
def no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No credentials, no region, no endpoint from the environment or ~/.aws."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def roundtrip(store: DynamoDBStore) -> None:
    exe = Execution(id="e1", definition_id="order", context={"n": 1})
    store.commit(exe, [], processed_event_id="ev")
    assert store.load_for_event("e1", "ev") == (exe, True)


def test_create_waits_for_an_endpoint_that_comes_up_late(no_aws_config: None) -> None:
    port = free_port()
    with late_server(port) as (go, up, _server):
        asked: list[float] = []

        def sleep(seconds: float) -> None:  # the first failed probe starts the server
            asked.append(seconds)
            go.set()
            assert up.wait(timeout=30)

        store = DynamoDBStore.create(
            prefix=unique_prefix(),
            endpoint_url=f"http://127.0.0.1:{port}",
            connect_attempts=5,
            connect_delay=0.25,
            sleep=sleep,
        )
        try:
            assert asked == [0.25]
            roundtrip(store)
        finally:
            store.close()


def test_create_gives_up_saying_what_to_check(no_aws_config: None) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    sleeps = Sleeps()
    with pytest.raises(StoreUnavailable) as err:
        DynamoDBStore.create(endpoint_url=url, connect_attempts=3, connect_delay=2.0, sleep=sleeps)
    assert sleeps == [2.0, 2.0]
    message = str(err.value)
    assert url in message and "after 3 attempts" in message and "check that it is running" in message


def test_create_uses_dummy_credentials_and_a_region_for_a_local_endpoint(no_aws_config: None) -> None:
    store = DynamoDBStore.create(prefix=unique_prefix(), endpoint_url=shared_moto_server().url)
    try:
        config = store._db.meta.config
        assert config.retries == {"mode": "standard", "total_max_attempts": 5}
        assert (config.connect_timeout, config.read_timeout) == (5.0, 10.0)
        assert store._db.meta.region_name == "us-east-1"
        roundtrip(store)
    finally:
        store.close()


def test_real_aws_without_a_region_is_refused_before_any_call(no_aws_config: None) -> None:
    with pytest.raises(StoreUnavailable, match="no AWS region"):
        DynamoDBStore.create()


def test_open_store_url(no_aws_config: None) -> None:
    prefix = unique_prefix()
    store = open_store(f"dynamodb://{prefix}?endpoint_url={shared_moto_server().url}&region=eu-west-1")
    try:
        assert isinstance(store, DynamoDBStore) and store.table("outbox") == f"{prefix}_outbox"
        roundtrip(store)
    finally:
        store.close()


def test_close_releases_only_an_owned_client(ddb: Any) -> None:
    injected = DynamoDBStore(ddb, prefix="mine")
    injected.ensure_tables()
    injected.close()
    assert ddb.list_tables()["TableNames"]  # the caller's client still works


# -- the async twin ------------------------------------------------------------------------------------


async def test_async_create_roundtrip_and_close(no_aws_config: None) -> None:
    store = await AsyncDynamoDBStore.create(prefix=unique_prefix(), endpoint_url=shared_moto_server().url)
    try:
        exe = Execution(id="e1", definition_id="order")
        await store.commit(exe, [], processed_event_id="ev")
        assert await store.load_for_event("e1", "ev") == (exe, True)
        assert (await store.list_executions()).items[0].id == "e1"
    finally:
        await store.close()
    await store.close()  # idempotent


async def test_async_create_waits_for_a_late_endpoint(no_aws_config: None) -> None:
    port = free_port()
    with late_server(port) as (go, up, _server):
        asked: list[float] = []

        async def sleep(seconds: float) -> None:
            asked.append(seconds)
            go.set()
            assert await asyncio.to_thread(up.wait, 30)

        store = await AsyncDynamoDBStore.create(
            prefix=unique_prefix(),
            endpoint_url=f"http://127.0.0.1:{port}",
            connect_attempts=5,
            connect_delay=0.25,
            sleep=sleep,
        )
        try:
            assert asked == [0.25]
            await store.save(Execution(id="e1", definition_id="order"))
            assert await store.load("e1") is not None
        finally:
            await store.close()


async def test_async_create_gives_up(no_aws_config: None) -> None:
    async def no_wait(seconds: float) -> None:
        return None

    with pytest.raises(StoreUnavailable, match="after 2 attempts"):
        await AsyncDynamoDBStore.create(
            endpoint_url=f"http://127.0.0.1:{free_port()}", connect_attempts=2, sleep=no_wait
        )


async def test_async_injected_client_stays_the_callers(no_aws_config: None) -> None:
    from aiobotocore.session import AioSession

    async with AioSession().create_client(
        "dynamodb",
        endpoint_url=shared_moto_server().url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    ) as client:
        store = AsyncDynamoDBStore(client, prefix=unique_prefix())
        await store.ensure_tables()
        await store.close()
        assert (await client.list_tables())["TableNames"]


async def test_async_store_runs_concurrent_commits_on_one_client(no_aws_config: None) -> None:
    store = await AsyncDynamoDBStore.create(prefix=unique_prefix(), endpoint_url=shared_moto_server().url)
    try:
        exes = [Execution(id=f"e{n}", definition_id="order") for n in range(12)]
        await asyncio.gather(*(store.commit(e, [], processed_event_id="start") for e in exes))
        await asyncio.gather(*(store.commit(e, [], processed_event_id="next") for e in exes))
        loaded = await asyncio.gather(*(store.load_for_event(e.id, "next") for e in exes))
        assert all(exe is not None and exe.version == 2 and seen for exe, seen in loaded)
    finally:
        await store.close()
