"""The in-memory store answers a ``where`` listing from its search index: it reads the executions it
returns (and those the index selects but another filter drops), never the unrelated ones it holds."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine.model import Execution
from durastate.engine.search import Condition
from durastate.store.memory import DictStore


class CountingDict(dict[str, Execution]):
    """The store's executions by id, counting every execution read and every walk over all of them."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.reads = 0
        self.walks = 0

    def __getitem__(self, key: str) -> Execution:
        self.reads += 1
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)

    def __iter__(self) -> Any:
        self.walks += 1
        return super().__iter__()

    def keys(self) -> Any:
        self.walks += 1
        return super().keys()

    def values(self) -> Any:
        self.walks += 1
        return super().values()

    def items(self) -> Any:
        self.walks += 1
        return super().items()


@pytest.fixture
def store() -> tuple[DictStore, CountingDict]:
    """2,000 executions: customer c-0 … c-99 (20 each), total 0 … 1,999."""
    s = DictStore()
    for n in range(2000):
        s.save(Execution(id=f"e-{n:05d}", definition_id="order", active_path="a",
                         search={"customer": f"c-{n % 100}", "total": float(n)}))
    counted = CountingDict(s._by_id)
    s._by_id = counted
    return s, counted


@pytest.mark.parametrize(("where", "returned"), [
    ([Condition("customer", "=", "c-17")], 20),
    ([Condition("total", ">=", 100.0), Condition("total", "<", 110.0)], 10),
    ([Condition("total", ">", 1989.0)], 10),
    ([Condition("total", "<", 5.0)], 5),
])
def test_a_where_listing_reads_only_what_the_index_selects(
        store: tuple[DictStore, CountingDict], where: list[Condition], returned: int) -> None:
    s, counted = store
    page = s.list_executions(where=where, limit=100)
    assert len(page.items) == returned and page.next_cursor is None
    assert counted.walks == 0, "the listing walked every execution"
    assert counted.reads == returned


def test_a_range_page_reads_its_page_and_one_more(store: tuple[DictStore, CountingDict]) -> None:
    """The cursor resumes the range where the last page ended: page 3 of 10 reads 11, not 31."""
    s, counted = store
    where = [Condition("total", ">=", 500.0)]
    cursor = None
    for _ in range(3):
        counted.reads = 0
        page = s.list_executions(where=where, limit=10, cursor=cursor)
        cursor = page.next_cursor
    assert [i.id for i in page.items] == [f"e-{n:05d}" for n in range(520, 530)]
    assert counted.reads == 11 and counted.walks == 0


def test_a_commit_and_a_purge_keep_the_index(store: tuple[DictStore, CountingDict]) -> None:
    s, _ = store
    exe = s.load("e-00017")
    assert exe is not None
    exe.search = {"customer": "c-x", "total": 5000.0}
    exe.status = "finished"
    s.commit(exe, [])
    assert [i.id for i in s.list_executions(where=[Condition("customer", "=", "c-x")]).items] == ["e-00017"]
    assert "e-00017" not in {i.id for i in s.list_executions(where=[Condition("customer", "=", "c-17")]).items}
    assert [i.id for i in s.list_executions(where=[Condition("total", ">", 4000.0)]).items] == ["e-00017"]
    # A purge tombstones it, and a later one (past the tombstone's expiry) deletes it: gone from the index.
    s.purge(ended_before=float("inf"), now=0.0, tombstone_ttl=1.0)
    s.purge(ended_before=float("inf"), now=10.0, tombstone_ttl=1.0)
    assert s.load("e-00017") is None
    assert s.list_executions(where=[Condition("total", ">", 4000.0)]).items == []
    assert s.list_executions(where=[Condition("customer", "=", "c-x")]).items == []
