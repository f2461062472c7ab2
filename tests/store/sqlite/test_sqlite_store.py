"""SqliteStore beyond the conformance suite: the file, WAL, reopening, several processes, the async twin."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import sqlite3
import threading
from pathlib import Path

import pytest

from durastate.engine.model import Event, Execution
from durastate.errors import StoreConflict, StoreUnavailable
from durastate.store import open_store
from durastate.store.base import AsyncExecutionStore, ExecutionStore, TimerOp
from durastate.store.sqlite.sync import SqliteStore

from . import _procs

SPAWN = mp.get_context("spawn")


def test_is_an_execution_store(tmp_path: Path) -> None:
    from durastate.store.sqlite.aio import AsyncSqliteStore

    with SqliteStore(tmp_path / "a.db") as store:
        assert isinstance(store, ExecutionStore)
    astore = AsyncSqliteStore(tmp_path / "b.db")
    assert isinstance(astore, AsyncExecutionStore)
    asyncio.run(astore.close())


def test_open_store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///sub/h.db")
    assert isinstance(store, SqliteStore) and (tmp_path / "sub" / "h.db").exists()
    store.close()
    store = open_store(f"sqlite:///{tmp_path / 'abs.db'}")
    assert isinstance(store, SqliteStore) and store.path == tmp_path / "abs.db"
    store.close()


@pytest.mark.parametrize(("sync", "code"), [("NORMAL", 1), ("FULL", 2)])
def test_wal_and_synchronous(tmp_path: Path, sync: str, code: int) -> None:
    store = SqliteStore(tmp_path / "h.db", synchronous=sync)  # type: ignore[arg-type]
    assert store.db.cur.execute("PRAGMA synchronous").fetchone()[0] == code
    store.save(Execution(id="e1", definition_id="d"))
    other = sqlite3.connect(tmp_path / "h.db")
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file
    assert (tmp_path / "h.db-wal").exists()
    other.close()
    store.close()


def test_bad_synchronous(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteStore(tmp_path / "h.db", synchronous="SOMETIMES")  # type: ignore[arg-type]


def test_reopen_after_close_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    store = SqliteStore(path)
    exe = Execution(id="e1", definition_id="order", context={"n": 1}, status="running", active_path="a")
    store.commit(exe, [("t", Event(id="o1", name="x")), (None, Event(id="o2", name="y"))],
                 processed_event_id="ev-1", timers=[TimerOp("schedule", "a", 12.5)],
                 spawns=[("e1.1", "fork.r1", {"k": [1]})], trace={"step": 0})
    store.append_trace("e1", {"step": 1})
    seqs = [e.seq for e in store.pending_outbox()]
    store.close()
    store.close()  # idempotent

    again = SqliteStore(path)
    loaded = again.load("e1")
    assert loaded == exe and loaded is not exe
    assert [(e.target_id, e.event.id) for e in again.pending_outbox()] == [("t", "o1"), (None, "o2")]
    assert again.is_processed("e1", "ev-1")
    assert again.due_timers(100) == [("e1", "a", 12.5)]
    assert [(s.child_id, s.context) for s in again.pending_spawns()] == [("e1.1", {"k": [1]})]
    assert [t["index"] for t in again.read_trace("e1")] == [0, 1]
    for seq in seqs:
        again.ack_outbox(seq)
    assert loaded is not None
    again.commit(loaded, [("t", Event(name="z"))])
    [entry] = again.pending_outbox()
    assert entry.seq > max(seqs)  # never reused, even across reopen
    assert [s.version for s in again.list_executions().items] == [2]
    again.close()


def test_schema_from_the_future_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreUnavailable, match="upgrade durastate"):
        SqliteStore(path)


def test_unopenable_path(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreUnavailable):
        SqliteStore(tmp_path / "dir.db")


def test_locked_writer_times_out_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    store = SqliteStore(path, busy_timeout=0.05)
    exe = Execution(id="e1", definition_id="d")
    store.save(exe)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            store.commit(exe, [(None, Event(name="x"))], processed_event_id="p")
        assert exe.version == 1
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.pending_outbox() == [] and not store.is_processed("e1", "p")
    store.commit(exe, [])
    assert exe.version == 2
    store.close()


def test_shared_between_threads(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "h.db")
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            for n in range(20):
                exe = Execution(id=f"t{k}-{n}", definition_id="d")
                store.commit(exe, [(None, Event(name="x"))], processed_event_id="p", trace={"n": n})
                assert store.load(exe.id) == exe
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.list_executions(limit=1000).items) == 80
    assert len(store.pending_outbox()) == 80
    store.close()


# -- several processes on one file --------------------------------------------------------------------


@pytest.mark.slow
def test_stale_commit_from_another_process_conflicts(tmp_path: Path) -> None:
    path = str(tmp_path / "h.db")
    store = SqliteStore(path)
    exe = Execution(id="e1", definition_id="d")
    store.save(exe)
    loaded, go, out = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    proc = SPAWN.Process(target=_procs.commit_stale, args=(path, loaded, go, out))
    proc.start()
    try:
        assert loaded.wait(60)
        exe.context["parent"] = True
        store.commit(exe, [])  # the parent wins: version 2
        go.set()
        result = out.get(timeout=60)
    finally:
        proc.join(60)
    assert result == ("conflict", 1, 2, 1)
    final = store.load("e1")
    assert final is not None and final.context == {"parent": True} and final.version == 2
    assert store.pending_outbox() == [] and not store.is_processed("e1", "child-ev")
    store.close()


@pytest.mark.slow
def test_processes_racing_one_execution_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "h.db")
    store = SqliteStore(path)
    store.save(Execution(id="counter", definition_id="d", context={"n": 0}))
    workers, rounds = 3, 150
    start, out = SPAWN.Event(), SPAWN.Queue()
    procs = [SPAWN.Process(target=_procs.bump_counter, args=(path, w, rounds, start, out))
             for w in range(workers)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    exe = store.load("counter")
    assert exe is not None
    assert exe.context["n"] == workers * rounds  # no lost update
    assert exe.version == workers * rounds + 1
    outbox = store.pending_outbox()
    assert len(outbox) == workers * rounds
    assert {e.event.id for e in outbox} == {f"w{w}-{n}" for w in range(workers) for n in range(rounds)}
    assert all(store.is_processed("counter", f"w{w}-{n}") for w in range(workers) for n in range(rounds))
    total = workers * rounds
    assert [t["index"] for t in store.read_trace("counter")] == list(range(total - 200, total))
    assert store.db.cur.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert sorted(w for w, _ in results) == list(range(workers))
    store.close()


# -- the async twin -----------------------------------------------------------------------------------


async def test_async_store_concurrent_commits(tmp_path: Path) -> None:
    from durastate.store.sqlite.aio import AsyncSqliteStore

    path = tmp_path / "h.db"
    store = AsyncSqliteStore(path, synchronous="FULL")
    exes = [Execution(id=f"e{n}", definition_id="d") for n in range(20)]
    await asyncio.gather(*(store.commit(e, [(None, Event(name="x"))], processed_event_id="p",
                                        timers=iter([TimerOp("schedule", "a", float(n))]))
                           for n, e in enumerate(exes)))
    assert all(e.version == 1 for e in exes)
    stale = exes[0].model_copy(deep=True)
    await store.commit(exes[0], [])
    with pytest.raises(StoreConflict):
        await store.commit(stale, [])
    assert stale.version == 1
    await store.close()
    await store.close()
    with SqliteStore(path) as sync:
        assert len(sync.list_executions().items) == 20
        assert len(sync.due_timers(100)) == 20


@pytest.mark.slow
def test_processes_creating_one_file_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh.db")
    start, out = SPAWN.Event(), SPAWN.Queue()
    procs = [SPAWN.Process(target=_procs.open_fresh_and_commit, args=(path, w, start, out)) for w in range(3)]
    for p in procs:
        p.start()
    start.set()
    assert sorted(out.get(timeout=120) for _ in procs) == [0, 1, 2]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with SqliteStore(path) as store:
        assert len(store.list_executions(limit=100).items) == 30
        assert store.db.cur.execute("SELECT COUNT(*) FROM inbox").fetchone()[0] == 30
        assert store.db.cur.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("this is not SQLite " * 100)
    with pytest.raises(StoreUnavailable, match="SQLite database"):
        SqliteStore(tmp_path / "notes.db")


def test_the_trace_ring_is_trimmed_in_batches_and_reads_show_the_newest_steps(tmp_path: Path) -> None:
    from durastate.store.sql import TRIM_EVERY

    with SqliteStore(tmp_path / "ring.db", trace_max=5) as store:
        exe = Execution(id="r", definition_id="d")
        for n in range(3 * TRIM_EVERY + 3):
            store.commit(exe, [], trace={"n": n})
            stored = store.db.cur.execute("SELECT count(*) FROM trace WHERE execution_id = 'r'").fetchone()[0]
            assert stored < 5 + TRIM_EVERY  # the table never holds more than the ring plus one batch
            assert [s["n"] for s in store.read_trace("r")] == list(range(max(0, n - 4), n + 1))


def test_a_contexts_row_left_without_its_execution_is_never_read_with_a_new_one(tmp_path: Path) -> None:
    """A row of ``contexts`` whose execution was deleted outside durastate (or an expired tombstone's) goes
    when an execution of that id is created, whichever form its context takes."""
    with SqliteStore(tmp_path / "stray.db") as store:
        for eid, context in (("small", {"n": 1}), ("large", {"k": "x" * 5000})):
            store.db.cur.execute("INSERT INTO contexts (id, context) VALUES (?, ?)", (eid, '{"stray": true}'))
            store.save(Execution(id=eid, definition_id="d", context=context))
            loaded = store.load(eid)
            assert loaded is not None and loaded.context == context
