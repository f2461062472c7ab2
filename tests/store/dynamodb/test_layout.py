"""The seven tables: names, key schemas, indexes; creating them is idempotent."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine.model import Execution
from durastate.engine.search import Condition
from durastate.errors import StoreUnavailable
from durastate.store.dynamodb.layout import TABLES, create_table_request
from durastate.store.dynamodb.sync import DynamoDBStore

from .conftest import make_store

KEYS = {
    "executions": [("id", "S", "HASH")],
    # beyond the seed (seq alone): a shard of seq, so the oldest entries come from Queries, not a Scan
    "outbox": [("shard", "S", "HASH"), ("seq", "N", "RANGE")],
    "spawns": [("shard", "S", "HASH"), ("seq", "N", "RANGE")],
    "timers": [("execution_id", "S", "HASH"), ("path", "S", "RANGE")],
    "processed": [("execution_id", "S", "HASH"), ("event_id", "S", "RANGE")],
    "counters": [("id", "S", "HASH")],
    "trace": [("execution_id", "S", "HASH"), ("idx", "N", "RANGE")],
}


def test_seven_prefixed_tables_with_their_key_schemas(ddb: Any) -> None:
    make_store(ddb, prefix="shop")
    names = sorted(n for n in ddb.list_tables()["TableNames"] if n.startswith("shop_"))
    assert names == sorted(f"shop_{n}" for n in KEYS)
    for name, keys in KEYS.items():
        desc = ddb.describe_table(TableName=f"shop_{name}")["Table"]
        types = {a["AttributeName"]: a["AttributeType"] for a in desc["AttributeDefinitions"]}
        got = [(k["AttributeName"], types[k["AttributeName"]], k["KeyType"]) for k in desc["KeySchema"]]
        assert got == keys, name
        assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_the_four_indexes(ddb: Any) -> None:
    make_store(ddb, prefix="ix")
    exe = ddb.describe_table(TableName="ix_executions")["Table"]["GlobalSecondaryIndexes"]
    assert [(i["IndexName"], [k["AttributeName"] for k in i["KeySchema"]], i["Projection"]) for i in exe] == [
        (
            "by_status",
            ["status", "id"],
            {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["definition_id", "parent_id"]},
        ),
        ("ended", ["ended_shard", "ended_at"], {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["definition_id"]}),
        ("by_search", ["term", "execution"], {"ProjectionType": "KEYS_ONLY"}),
    ]
    timers = ddb.describe_table(TableName="ix_timers")["Table"]["GlobalSecondaryIndexes"]
    assert [
        (i["IndexName"], [k["AttributeName"] for k in i["KeySchema"]], i["Projection"]) for i in timers
    ] == [("due", ["shard", "fire_at"], {"ProjectionType": "KEYS_ONLY"})]


def test_ensure_tables_is_idempotent(ddb: Any) -> None:
    make_store(ddb, prefix="again")
    store = make_store(ddb, prefix="again")  # every create answers ResourceInUseException: fine
    assert store.load("nothing") is None


def test_other_create_errors_are_real(rec: Any) -> None:
    from .conftest import client_error

    rec.fail["create_table"] = [client_error("ValidationException", "CreateTable")]
    store = DynamoDBStore(rec, prefix="invalid")
    with pytest.raises(Exception, match="ValidationException"):
        store.ensure_tables()


def test_no_right_to_create_tables_means_they_are_managed_elsewhere(rec: Any) -> None:
    from .conftest import client_error

    rec.fail["create_table"] = [client_error("AccessDeniedException", "CreateTable")]
    store = DynamoDBStore(rec, prefix="iac")
    store.ensure_tables()  # no error: the stack owns the tables
    assert rec.ops() == ["create_table"]


def test_an_existing_table_without_the_index_is_reported(ddb: Any) -> None:
    spec = next(s for s in TABLES if s.name == "timers")
    req = create_table_request("old", spec)
    del req["GlobalSecondaryIndexes"]
    req["AttributeDefinitions"] = [
        a for a in req["AttributeDefinitions"] if a["AttributeName"] in ("execution_id", "path")
    ]
    ddb.create_table(**req)
    with pytest.raises(StoreUnavailable, match="without the index 'due'"):
        make_store(ddb, prefix="old")


def test_an_executions_table_from_before_retention_gets_the_ended_and_search_indexes(ddb: Any) -> None:
    """The ``ended`` index came with retention, ``by_search`` with search fields: opening a store adds them
    to an existing table (UpdateTable)."""
    spec = next(s for s in TABLES if s.name == "executions")
    req = create_table_request("older", spec)
    req["GlobalSecondaryIndexes"] = [i for i in req["GlobalSecondaryIndexes"] if i["IndexName"] == "by_status"]
    req["AttributeDefinitions"] = [
        a for a in req["AttributeDefinitions"]
        if a["AttributeName"] not in ("ended_shard", "ended_at", "term", "execution")
    ]
    ddb.create_table(**req)
    store = make_store(ddb, prefix="older")
    table = ddb.describe_table(TableName="older_executions")["Table"]
    names = [i["IndexName"] for i in table["GlobalSecondaryIndexes"]]
    assert sorted(names) == ["by_search", "by_status", "ended"]
    store.commit(Execution(id="e1", definition_id="d", status="finished", updated_at=5.0), [])
    assert store.purge(10.0, now=20.0).ids == ("e1",)
    store.save(Execution(id="e2", definition_id="d", active_path="a", search={"customer": "c-1"}))
    assert [s.id for s in store.list_executions(where=[Condition("customer", "=", "c-1")]).items] == ["e2"]


def test_missing_tables_say_what_to_do(ddb: Any) -> None:
    store = DynamoDBStore(ddb, prefix="never")
    with pytest.raises(StoreUnavailable, match=r"does not exist.*create the tables"):
        store.load("x")


def test_a_queue_table_with_the_seed_key_is_reported(ddb: Any) -> None:
    """An outbox made by an older durastate (keyed by seq alone) cannot be queried by shard: say what to do."""
    ddb.create_table(
        TableName="seed_outbox",
        KeySchema=[{"AttributeName": "seq", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "seq", "AttributeType": "N"}],
        BillingMode="PAY_PER_REQUEST",
    )
    with pytest.raises(StoreUnavailable, match=r"seed_outbox exists keyed by .*drain it, then delete it"):
        make_store(ddb, prefix="seed")
