"""The CancellationReasons classifier and the bounded retries of throttling and transaction conflicts."""

from __future__ import annotations

import pytest

from durastate.engine.model import Event, Execution
from durastate.errors import StoreConflict, StoreThrottled, StoreUnavailable
from durastate.store.dynamodb.errors import classify, classify_reasons

from .conftest import Recorder, Sleeps, client_error, make_store


@pytest.mark.parametrize(
    ("reasons", "verdict"),
    [
        (["ConditionalCheckFailed", "None", "None"], "conflict"),
        (["ConditionalCheckFailed", "TransactionConflict", "ThrottlingError"], "conflict"),
        (["ConditionalCheckFailed", "ValidationError"], "conflict"),
        (["None", "TransactionConflict"], "retry"),
        (["TransactionConflict", "None", "ProvisionedThroughputExceeded", "ThrottlingError"], "retry"),
        (["None", "RequestLimitExceeded"], "retry"),
        (["None", "TransactionConflict", "ValidationError"], "fatal"),
        (["None", "ItemCollectionSizeLimitExceeded", "ThrottlingError"], "fatal"),
        (["None", "ConditionalCheckFailed"], "fatal"),  # only item 0 carries a condition
        (["None", "None"], "fatal"),
        ([None, "TransactionConflict"], "retry"),
        ([], "conflict"),  # no reasons at all (old emulators): the seed's reading
    ],
)
def test_reason_classifier(reasons: list[str | None], verdict: str) -> None:
    assert classify_reasons(reasons) == verdict


def test_classify_client_errors() -> None:
    assert classify(client_error("ConditionalCheckFailedException", "PutItem")) == "conflict"
    assert classify(client_error("ProvisionedThroughputExceededException", "GetItem")) == "retry"
    assert classify(client_error("ThrottlingException", "Query")) == "retry"
    assert classify(client_error("TransactionConflictException", "PutItem")) == "retry"
    assert classify(client_error("ValidationException", "PutItem")) == "fatal"
    assert classify(ValueError("not a client error")) == "fatal"
    mixed = client_error("TransactionCanceledException", reasons=["None", "TransactionConflict", "None"])
    assert classify(mixed) == "retry"


def commit_with_emit(store: object, exe: Execution) -> None:
    store.commit(exe, [("t", Event(id="out", name="x"))], processed_event_id="ev")  # type: ignore[attr-defined]


def test_transaction_conflicts_are_retried_with_backoff(rec: Recorder, sleeps: Sleeps) -> None:
    store = make_store(rec, sleeps, backoff_base=0.1, backoff_cap=1.0)
    exe = Execution(id="e1", definition_id="order")
    rec.fail["transact_write_items"] = [
        client_error("TransactionCanceledException", reasons=["None", "TransactionConflict", "None"]),
        client_error("TransactionCanceledException", reasons=["ThrottlingError", "None", "None"]),
    ]
    commit_with_emit(store, exe)
    assert exe.version == 1 and rec.ops().count("transact_write_items") == 3
    assert len(sleeps) == 2 and 0.05 <= sleeps[0] <= 0.1 and 0.1 <= sleeps[1] <= 0.2
    assert [e.event.id for e in store.pending_outbox()] == ["out"]


def test_persistent_throttling_ends_in_a_typed_error(rec: Recorder, sleeps: Sleeps) -> None:
    store = make_store(rec, sleeps, max_retries=4, backoff_base=0.5, backoff_cap=2.0)
    exe = Execution(id="e1", definition_id="order")
    rec.fail["transact_write_items"] = [
        client_error("TransactionCanceledException", reasons=["TransactionConflict", "None", "None"])
        for _ in range(10)
    ]
    with pytest.raises(StoreThrottled, match="refused 5 times") as err:
        commit_with_emit(store, exe)
    assert isinstance(err.value, StoreUnavailable)
    assert len(sleeps) == 4 and max(sleeps) <= 2.0  # bounded
    assert exe.version == 0 and store.load("e1") is None


def test_fatal_reasons_re_raise_untouched(rec: Recorder, sleeps: Sleeps) -> None:
    store = make_store(rec, sleeps)
    exe = Execution(id="e1", definition_id="order")
    boom = client_error(
        "TransactionCanceledException", reasons=["None", "ValidationError", "TransactionConflict"]
    )
    rec.fail["transact_write_items"] = [boom]
    with pytest.raises(Exception) as err:
        commit_with_emit(store, exe)
    assert err.value is boom and sleeps == [] and exe.version == 0


def test_condition_failure_on_the_execution_is_the_conflict(rec: Recorder, sleeps: Sleeps) -> None:
    store = make_store(rec, sleeps)
    exe = Execution(id="e1", definition_id="order")
    rec.fail["transact_write_items"] = [
        client_error(
            "TransactionCanceledException", reasons=["ConditionalCheckFailed", "TransactionConflict", "None"]
        )
    ]
    with pytest.raises(StoreConflict) as err:
        commit_with_emit(store, exe)
    assert (err.value.expected, err.value.found) == (0, None) and sleeps == []


def test_throttled_reads_are_retried(rec: Recorder, sleeps: Sleeps) -> None:
    store = make_store(rec, sleeps)
    rec.fail["get_item"] = [client_error("ProvisionedThroughputExceededException", "GetItem")] * 2
    assert store.load("nothing") is None
    assert len(sleeps) == 2


def test_unprocessed_batch_keys_are_fetched_again(rec: Recorder, sleeps: Sleeps) -> None:
    store = make_store(rec, sleeps, recent_events=0)  # the seed layout reads execution + mark in a batch
    exe = Execution(id="e1", definition_id="order")
    store.commit(exe, [], processed_event_id="ev")
    real_batch = rec._client.batch_get_item
    first = True

    def partial(real: object, kwargs: dict[str, object]) -> object:
        nonlocal first
        if first:  # DynamoDB answered nothing and handed every key back: throttled
            first = False
            return {"Responses": {}, "UnprocessedKeys": kwargs["RequestItems"]}
        return real_batch(**kwargs)

    rec.after["batch_get_item"] = partial
    loaded, seen = store.load_for_event("e1", "ev")
    assert loaded is not None and seen and len(sleeps) == 1
