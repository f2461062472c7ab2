"""A commit that leaves the context alone does not write it (``ContextKeepingStore``: the SQL stores).

``commit(..., context_unchanged=True)`` is the caller vouching that the context is the one stored at the
version the commit replaces; the store then neither serialises nor writes it
(:func:`durastate.store.sql.context_apart`). What a store must do either way: a commit that says the context
is unchanged leaves what is stored exactly as it was, one that does not writes the context it is given, and
``load`` / ``load_for_event`` return the whole context, whichever form the row holds.

Behaviour runs on the four SQL backends (sync and async); where the rows are looked at (which form holds the
context), on the sync ones, whose connection the test can query.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine.model import Execution
from durastate.store import sql as family
from durastate.store.base import ExecutionStore
from durastate.store.sqlite.sync import SqliteStore

from .backends import Backend
from .conftest import MakeStore

LARGE = {f"line{i:04d}": {"sku": f"SKU-{i:07d}", "qty": i, "note": "x" * 40} for i in range(400)}
"""About 30 KB of JSON: kept apart from ``data`` by both stores."""
SMALL = {"count": 1, "name": "small"}
"""Kept in ``data`` by SQLite (up to ``CONTEXT_INLINE_MAX``), apart by PostgreSQL."""


SQL_BACKENDS = {"sqlite", "async-sqlite", "postgres", "async-postgres"}


@pytest.fixture
def keeping(backend: Backend, make_store: MakeStore) -> ExecutionStore:
    if backend.name not in SQL_BACKENDS:
        pytest.skip("keeping an unchanged context apart is the SQL stores' layout")
    store = make_store()
    assert getattr(store, "commit_keeps_context", False)  # what tells a worker to vouch
    return store


def commit(store: ExecutionStore, exe: Execution, event_id: str, *, unchanged: bool) -> None:
    keeping: Any = store  # the sync protocol's commit has no context_unchanged (the adapter passes it on)
    keeping.commit(exe, [], processed_event_id=event_id, context_unchanged=unchanged)


def stored(store: ExecutionStore, execution_id: str) -> tuple[str, str | None] | None:
    """The row's (``data``, context apart or ``None``), or ``None`` for an async store (no connection here)."""
    row: Any
    if isinstance(store, SqliteStore):
        row = store.db.cur.execute(
            "SELECT e.data, c.context FROM executions e LEFT JOIN contexts c ON c.id = e.id WHERE e.id = ?",
            (execution_id,)).fetchone()
        return row[0], row[1]
    if hasattr(store, "_conn") and hasattr(store, "schema"):
        row = store._conn.cursor().execute(
            f'SELECT data, context FROM "{store.schema}".executions WHERE id = %s', (execution_id,)).fetchone()
        return row[0], row[1]
    return None


def started(store: ExecutionStore, context: dict[str, Any], eid: str = "x") -> Execution:
    exe = Execution(id=eid, definition_id="d", active_path="a", context=context)
    store.commit(exe, [], processed_event_id=f"{eid}:start")
    loaded = store.load(eid)
    assert loaded is not None and loaded.context == context
    return loaded


def test_a_commit_that_says_the_context_is_unchanged_leaves_it_exactly_as_stored(keeping: ExecutionStore) -> None:
    exe = started(keeping, LARGE)
    before = stored(keeping, "x")
    exe.active_path = "b"
    commit(keeping, exe, "e1", unchanged=True)
    after = stored(keeping, "x")
    if before is not None and after is not None:
        assert after[1] == before[1] is not None  # the context apart: the very text stored, not written again
        assert '"context"' not in after[0] and '"active_path":"b"' in after[0]
    # Proof it was not written: a value changed behind the caller's word stays as stored.
    exe.context = {**exe.context, "line0000": "changed"}
    commit(keeping, exe, "e2", unchanged=True)
    loaded, seen = keeping.load_for_event("x", "e3")
    assert loaded is not None and not seen
    assert loaded.context == LARGE and loaded.active_path == "b" and loaded.version == 3


def test_a_commit_that_changes_the_context_writes_it(keeping: ExecutionStore) -> None:
    exe = started(keeping, LARGE)
    exe.context = {**exe.context, "line0001": {**exe.context["line0001"], "qty": -1}, "added": [1, 2]}
    commit(keeping, exe, "e1", unchanged=False)
    loaded = keeping.load("x")
    assert loaded is not None and loaded.context["line0001"]["qty"] == -1 and loaded.context["added"] == [1, 2]
    assert loaded.context == exe.context
    commit(keeping, loaded, "e2", unchanged=True)  # and left alone again: still the whole, changed context
    assert (again := keeping.load("x")) is not None and again.context == exe.context and again.version == 3


@pytest.mark.parametrize("sizes", [(SMALL, LARGE, SMALL), (LARGE, SMALL, LARGE)], ids=["grows", "shrinks"])
def test_a_context_that_grows_or_shrinks_moves_between_the_forms(
    keeping: ExecutionStore, sizes: tuple[dict[str, Any], ...]
) -> None:
    exe = started(keeping, sizes[0])
    for i, context in enumerate(sizes[1:]):
        exe.context = dict(context)
        commit(keeping, exe, f"e{i}", unchanged=False)
        commit(keeping, exe, f"e{i}-again", unchanged=True)
        loaded = keeping.load("x")
        assert loaded is not None and loaded.context == context
        row = stored(keeping, "x")
        if isinstance(keeping, SqliteStore) and row is not None:  # SQLite: a small context stays in data
            assert (row[1] is None) == (context is SMALL)
            assert ('"context"' in row[0]) == (context is SMALL)


def test_each_execution_keeps_its_own_context(keeping: ExecutionStore) -> None:
    a = started(keeping, LARGE, "a")
    b = started(keeping, {**LARGE, "who": "b"}, "b")
    commit(keeping, a, "a1", unchanged=True)
    b.context = {"who": "b only"}
    commit(keeping, b, "b1", unchanged=False)
    assert (la := keeping.load("a")) is not None and la.context == LARGE
    assert (lb := keeping.load("b")) is not None and lb.context == {"who": "b only"}


def test_a_purged_execution_leaves_its_context_with_its_tombstone(keeping: ExecutionStore) -> None:
    exe = started(keeping, LARGE)
    exe.status, exe.updated_at = "finished", 100.0
    commit(keeping, exe, "end", unchanged=True)
    assert keeping.purge(1_000.0, now=2_000.0).ids == ("x",)
    tomb = keeping.load("x")
    assert tomb is not None and tomb.status == "purged" and tomb.context == {}
    row = stored(keeping, "x")
    if row is not None:
        assert row[1] is None  # the tombstone's data is whole; its context went
    # (the kit's tombstone checks cover what a late event does to it)


def test_the_inline_bound_is_what_sqlite_keeps_in_the_row() -> None:
    assert not family.context_apart(family.SQLITE, "x" * family.CONTEXT_INLINE_MAX)
    assert family.context_apart(family.SQLITE, "x" * (family.CONTEXT_INLINE_MAX + 1))
    assert family.context_apart(family.POSTGRES, "{}")
