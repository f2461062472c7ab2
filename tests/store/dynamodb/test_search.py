"""The DynamoDB search index: entry items in the sparse ``by_search`` index, written in the commit that
changes a value and only then — a commit that changes none stays one PutItem — and read by a listing
with an equality filter instead of the status pages."""

from __future__ import annotations

from durastate.engine.model import Execution
from durastate.engine.search import Condition
from durastate.store.dynamodb.sync import DynamoDBStore

from .conftest import Recorder


def test_a_commit_writes_the_entries_of_the_values_it_changes(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="o-1", definition_id="order", active_path="a", search={"customer": "c-1", "total": 5.0})
    store.save(exe)
    rec.reset()
    exe.search = {"customer": "c-2", "total": 5.0}
    store.commit(exe, [])
    [(op, call)] = rec.calls
    assert op == "transact_write_items"
    entries = [t["Put"]["Item"] for t in call["TransactItems"][1:]]
    assert entries == [{"id": {"S": "~search~o-1~customer"}, "execution": {"S": "o-1"},
                        "term": {"S": "customer=c-2"}}]


def test_a_commit_that_changes_no_value_is_one_put(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="o-1", definition_id="order", active_path="a", search={"customer": "c-1"})
    store.save(exe)
    loaded = store.load("o-1")
    assert loaded is not None
    rec.reset()
    loaded.active_path = "b"
    store.commit(loaded, [])
    assert rec.ops() == ["put_item"]


def test_a_value_gone_leaves_the_index(store: DynamoDBStore, rec: Recorder) -> None:
    exe = Execution(id="o-1", definition_id="order", active_path="a", search={"customer": "c-1"})
    store.save(exe)
    exe.search = {"customer": None}
    store.commit(exe, [])
    rec.reset()
    assert store.list_executions(where=[Condition("customer", "=", "c-1")]).items == []
    queried = [call for op, call in rec.calls if op == "query"]
    assert [q["IndexName"] for q in queried] == ["by_search"]  # the index answers, not the status pages


def test_an_equality_listing_reads_the_index_page_by_page(store: DynamoDBStore, rec: Recorder) -> None:
    for n in range(30):
        store.save(Execution(id=f"e-{n:02d}", definition_id="order", active_path="a",
                             search={"customer": "c-17" if n % 10 == 0 else f"c-{100 + n}"}))
    rec.reset()
    page = store.list_executions(where=[Condition("customer", "=", "c-17")], limit=2)
    assert [s.id for s in page.items] == ["e-00", "e-10"]
    rest = store.list_executions(where=[Condition("customer", "=", "c-17")], limit=2, cursor=page.next_cursor)
    assert [s.id for s in rest.items] == ["e-20"]
    assert {call.get("IndexName") for op, call in rec.calls if op == "query"} == {"by_search"}
    read = sum(len(r.get("Items", [])) for op, r in rec.responses if op == "query")
    assert read <= 5  # the three entries of c-17 and a look past the page: not the 30 executions
