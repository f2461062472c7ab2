"""The claim check: executions past the item limit live in S3, named by execution and content hash.

moto in-process for both DynamoDB and S3 (``mock_aws``); the DynamoDB client is the recording proxy, so
a crash between the S3 put and the commit is an injected failure of the commit's write.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine.model import Event, Execution
from durastate.errors import DurastateError, ExecutionTooLarge
from durastate.store.base import TimerOp
from durastate.store.control import terminate
from durastate.store.dynamodb.claim_check import DATA_REF, context_prefix
from durastate.store.dynamodb.sync import DynamoDBStore
from tests._aws import boto3_client

from .conftest import Recorder, client_error, make_store

BUCKET = "contexts-test"
FIVE_MB = 5 * 1024 * 1024


@pytest.fixture
def s3(ddb: Any) -> Any:  # ``ddb`` keeps mock_aws active
    client = boto3_client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def big_store(rec: Recorder, s3: Any) -> DynamoDBStore:
    return make_store(rec, context_bucket=BUCKET, s3=s3, clock=lambda: 1000.0)


def objects(s3: Any, execution_id: str = "e1") -> list[str]:
    resp = s3.list_objects_v2(Bucket=BUCKET, Prefix=context_prefix(execution_id))
    return [o["Key"] for o in resp.get("Contents", [])]


def stored_item(store: DynamoDBStore, rec: Recorder, execution_id: str = "e1") -> dict[str, Any]:
    item: dict[str, Any] = rec._client.get_item(
        TableName=store.table("executions"), Key={"id": {"S": execution_id}}, ConsistentRead=True
    )["Item"]
    return item


def large(n: int = FIVE_MB, fill: str = "x") -> dict[str, Any]:
    return {"doc": fill * n}


def test_a_5mb_context_round_trips_through_s3(big_store: DynamoDBStore, rec: Recorder, s3: Any) -> None:
    exe = Execution(id="e1", definition_id="order", context=large())
    big_store.save(exe)
    item = stored_item(big_store, rec)
    assert "data" not in item and item[DATA_REF]["S"] in objects(s3)
    assert item["status"]["S"] == "running" and item["definition_id"]["S"] == "order"  # listings still work
    fresh = make_store(rec, prefix=big_store.prefix, context_bucket=BUCKET, s3=s3)  # nothing cached
    loaded = fresh.load("e1")
    assert loaded is not None and loaded.context == exe.context and loaded.version == 1
    page = fresh.list_executions(definition_id="order")
    assert [s.id for s in page.items] == ["e1"]


def test_edits_replace_the_object_and_a_small_context_moves_back_inline(
    big_store: DynamoDBStore, rec: Recorder, s3: Any
) -> None:
    exe = Execution(id="e1", definition_id="order", context=large())
    big_store.save(exe)
    first = objects(s3)
    exe.context = large(fill="y")
    big_store.commit(exe, [(None, Event(id="out", name="done"))], processed_event_id="ev1")  # a transaction
    second = objects(s3)
    assert len(second) == 1 and second != first  # the superseded object is gone
    loaded = big_store.load("e1")
    assert loaded is not None and loaded.context == large(fill="y") and loaded.version == 2
    exe.context = {"doc": "small"}
    big_store.save(exe)
    assert objects(s3) == [] and stored_item(big_store, rec)["data"]["S"]
    assert (big_store.load("e1") or exe).context == {"doc": "small"}


def test_a_crash_between_the_put_and_the_commit_loses_nothing_and_shows_no_orphan(
    big_store: DynamoDBStore, rec: Recorder, s3: Any
) -> None:
    exe = Execution(id="e1", definition_id="order", context=large())
    big_store.save(exe)
    committed = objects(s3)
    exe.context = large(fill="z")
    rec.fail["transact_write_items"] = [client_error("InternalServerError")]
    with pytest.raises(Exception, match="InternalServerError"):
        big_store.commit(exe, [], timers=[TimerOp("cancel", "a.b", 0.0)])
    assert exe.version == 1
    loaded = big_store.load("e1")  # the stored execution is the last committed one, whole
    assert loaded is not None and loaded.context == large() and loaded.version == 1
    assert stored_item(big_store, rec)[DATA_REF]["S"] == committed[0]
    # the retry writes the same JSON, hence the same key: it reuses the object the crash left
    big_store.commit(exe, [], timers=[TimerOp("cancel", "a.b", 0.0)])
    assert objects(s3) == [stored_item(big_store, rec)[DATA_REF]["S"]]
    assert (big_store.load("e1") or exe).context == large(fill="z")


def test_an_orphan_of_an_abandoned_commit_is_removed_by_the_purge(
    big_store: DynamoDBStore, rec: Recorder, s3: Any
) -> None:
    exe = Execution(id="e1", definition_id="order", context=large(400_000))
    big_store.save(exe)
    exe.context = large(400_000, fill="q")
    rec.fail["put_item"] = [client_error("InternalServerError", "PutItem")]
    with pytest.raises(Exception, match="InternalServerError"):
        big_store.save(exe)
    assert len(objects(s3)) == 2  # the abandoned one is named by no item: no read can see it
    loaded = big_store.load("e1")
    assert loaded is not None and loaded.context == large(400_000)
    loaded.status = "finished"
    big_store.save(loaded)  # ended at the store's clock, 1000
    result = big_store.purge(ended_before=2000.0, now=2000.0)
    assert result.purged == 1 and objects(s3) == []
    tomb = big_store.load("e1")
    assert tomb is not None and tomb.status == "purged"


def test_control_commits_read_and_write_the_whole_context(big_store: DynamoDBStore, s3: Any) -> None:
    exe = Execution(id="e1", definition_id="order", context=large(1_000_000))
    big_store.save(exe)
    ended = terminate(big_store, "e1", "enough", clock=lambda: 100.0)
    assert ended.status == "terminated" and ended.context == large(1_000_000)
    assert (big_store.load("e1") or exe).context == large(1_000_000)


def test_a_reader_of_a_superseded_version_reads_again(rec: Recorder, s3: Any) -> None:
    writer = make_store(rec, context_bucket=BUCKET, s3=s3)
    s3_rec = Recorder(s3)
    reader = make_store(rec, prefix=writer.prefix, context_bucket=BUCKET, s3=s3_rec)
    exe = Execution(id="e1", definition_id="order", context=large(300_000))
    writer.save(exe)

    def commit_first(get: Any, kwargs: dict[str, Any]) -> Any:
        del s3_rec.after["get_object"]
        exe.context = large(300_000, fill="n")
        writer.save(exe)  # lands between the reader's item read and its object read
        return get(**kwargs)

    s3_rec.after["get_object"] = commit_first
    loaded = reader.load("e1")
    assert loaded is not None and loaded.version == 2 and loaded.context == large(300_000, fill="n")
    assert s3_rec.ops() == ["get_object", "get_object"]  # the first object was gone: item read again


def test_without_a_bucket_a_large_execution_is_refused_before_any_request(
    store: DynamoDBStore, rec: Recorder
) -> None:
    exe = Execution(id="e1", definition_id="order", context=large(500_000))
    with pytest.raises(ExecutionTooLarge, match="context_bucket"):
        store.save(exe)
    assert rec.calls == [] and store.load("e1") is None


def test_what_still_cannot_fit_stays_a_typed_refusal(big_store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="e1", definition_id="order", context=large(500_000))
    with pytest.raises(ExecutionTooLarge, match="event 'huge'"):
        big_store.commit(exe, [(None, Event(id="huge", name="x", data=large(500_000)))])
    assert rec.calls == []


def test_a_store_without_the_bucket_says_how_to_read_a_claim_checked_execution(
    big_store: DynamoDBStore, rec: Recorder, s3: Any
) -> None:
    big_store.save(Execution(id="e1", definition_id="order", context=large(300_000)))
    plain = make_store(rec, prefix=big_store.prefix)
    with pytest.raises(DurastateError, match="context_bucket=NAME"):
        plain.load("e1")


def test_prefixes_of_executions_never_overlap(big_store: DynamoDBStore, s3: Any) -> None:
    big_store.save(Execution(id="a/b", definition_id="order", context=large(300_000)))
    assert objects(s3, "a") == [] and len(objects(s3, "a/b")) == 1
    assert context_prefix("a/b") == "contexts/a%2Fb/"


def test_the_threshold_is_configurable_and_checked(rec: Recorder, s3: Any) -> None:
    store = make_store(rec, context_bucket=BUCKET, s3=s3, claim_check_bytes=1_000)
    store.save(Execution(id="e1", definition_id="order", context=large(2_000)))
    assert len(objects(s3)) == 1
    with pytest.raises(ValueError, match="claim_check_bytes"):
        DynamoDBStore(rec, context_bucket=BUCKET, s3=s3, claim_check_bytes=500_000)
    with pytest.raises(ValueError, match="S3 client"):
        DynamoDBStore(rec, context_bucket=BUCKET)
