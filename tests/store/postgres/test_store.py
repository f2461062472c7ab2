"""PostgresStore beyond the conformance suite: round trips, races, schema setup, connections, growth."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from durastate.engine.model import Event, Execution
from durastate.errors import StoreConflict, StoreUnavailable
from durastate.store.base import TimerOp
from durastate.store.postgres.sync import PostgresStore, connect_with_retry, split_schema

from .conftest import DSN, RoundTrips, connect, psycopg


@pytest.fixture
def store(dsn: str) -> Any:
    s = PostgresStore.from_dsn(dsn, connect_attempts=1)
    yield s
    s.close()


def _regclass(admin: Any, name: str) -> Any:
    return admin.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0]


# -- round trips ------------------------------------------------------------------------------------------
def test_fast_path_commit_is_one_round_trip(store: PostgresStore, tmp_path: Path) -> None:
    exe = Execution(definition_id="d")
    store.save(exe)
    with RoundTrips(store._conn, str(tmp_path / "trace")) as rt:
        store.commit(exe, [], processed_event_id="e1", trace={"event": "go"})
    assert rt.count == 1
    assert len(rt.statements) == 1  # one statement: SELECT durastate_commit_cas(…)
    assert store.is_processed(exe.id, "e1")
    assert store.read_trace(exe.id) == [{"event": "go", "index": 0}]


def test_first_save_takes_the_fast_path_too(store: PostgresStore, tmp_path: Path) -> None:
    with RoundTrips(store._conn, str(tmp_path / "trace")) as rt:
        store.save(Execution(definition_id="d"))
    assert rt.count == 1


def test_multi_statement_path_is_one_round_trip_whatever_it_carries(
    store: PostgresStore, tmp_path: Path
) -> None:
    exe = Execution(definition_id="d")
    store.save(exe)
    emits = [(f"t{i}", Event(name="ping")) for i in range(5)] + [(None, Event(name="note"))]
    with RoundTrips(store._conn, str(tmp_path / "trace")) as rt:
        store.commit(
            exe,
            emits,
            processed_event_id="e1",
            timers=[TimerOp("schedule", "a", 5.0), TimerOp("cancel", "b")],
            spawns=[("c1", "r1", {"k": 1}), ("c2", "r2", {})],
            trace={"step": 1},
        )
    assert rt.count == 1  # one pipeline: BEGIN, the CAS, every side effect, COMMIT
    assert len(store.pending_outbox()) == 6 and len(store.pending_spawns()) == 2


def test_reads_are_one_round_trip(store: PostgresStore, tmp_path: Path) -> None:
    exe = Execution(definition_id="d")
    store.commit(exe, [], processed_event_id="e1")
    with RoundTrips(store._conn, str(tmp_path / "trace")) as rt:
        loaded, seen = store.load_for_event(exe.id, "e1")
    assert rt.count == 1
    assert loaded == exe and seen
    assert store.load_for_event(exe.id, "other") == (exe, False)
    assert store.load_for_event("nope", "e1") == (None, False)


# -- the commit function and the CAS ----------------------------------------------------------------------
def test_the_function_returns_false_on_a_conflict_and_leaves_the_transaction_usable(
    store: PostgresStore, schema: str
) -> None:
    exe = Execution(definition_id="d")
    store.save(exe)
    with connect(autocommit=False) as conn:
        ok = conn.execute(
            f'SELECT "{schema}".durastate_commit_cas(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '
            "%s::double precision, %s::double precision, %s::text)",
            (exe.id, "d", exe.model_dump_json(), 7, "", "running", None, None, None, None, 0, False, 16, False,
             None, None, None),
        ).fetchone()[0]
        assert ok is False
        assert conn.execute("SELECT 1").fetchone() == (1,)  # not aborted: the function did not RAISE
        conn.rollback()


def test_a_stale_commit_conflicts_with_the_winning_version_and_restores_its_own(store: PostgresStore) -> None:
    exe = Execution(definition_id="d")
    store.save(exe)
    stale = store.load(exe.id)
    assert stale is not None
    store.commit(exe, [], processed_event_id="first")
    for emits in ([], [("x", Event(name="e"))]):  # the fast path and the multi-statement path
        with pytest.raises(StoreConflict) as info:
            store.commit(stale, emits, processed_event_id="late")
        assert (info.value.expected, info.value.found) == (1, 2)
        assert stale.version == 1
    assert not store.is_processed(exe.id, "late") and store.pending_outbox() == []


def test_a_commit_that_fails_midway_restores_the_version_and_writes_nothing(
    store: PostgresStore, schema: str, admin: Any
) -> None:
    exe = Execution(definition_id="d")
    store.save(exe)
    admin.execute(f"ALTER TABLE \"{schema}\".outbox ADD CONSTRAINT no_bad CHECK (target_id <> 'bad')")
    with pytest.raises(psycopg.errors.CheckViolation):
        store.commit(
            exe,
            [("ok", Event(name="x")), ("bad", Event(name="y"))],
            processed_event_id="e",
            timers=[TimerOp("schedule", "p", 1.0)],
        )
    assert exe.version == 1
    stored = store.load(exe.id)
    assert stored is not None and stored.version == 1
    assert not store.is_processed(exe.id, "e") and store.pending_outbox() == [] and store.due_timers(9) == []
    store.commit(exe, [("ok", Event(name="x"))], processed_event_id="e")  # the connection is still usable
    assert exe.version == 2


def test_two_first_saves_racing_one_wins_the_other_conflicts(dsn: str) -> None:
    stores = [PostgresStore.from_dsn(dsn, connect_attempts=1) for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def race(s: PostgresStore, with_emit: bool) -> None:
        exe = Execution(id="same", definition_id="d")
        barrier.wait()
        try:
            s.commit(exe, [("t", Event(name="x"))] if with_emit else [])
            outcomes.append("won")
        except StoreConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=race, args=(s, i == 0)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "won"]
    for s in stores:
        s.close()


def test_concurrent_writers_on_separate_connections_equal_serial_application(dsn: str) -> None:
    workers, per_worker = 4, 15
    seed = PostgresStore.from_dsn(dsn, connect_attempts=1)
    seed.save(Execution(id="counter", definition_id="d", context={"n": 0}))
    conflicts = 0
    lock = threading.Lock()

    def work(i: int) -> None:
        nonlocal conflicts
        s = PostgresStore.from_dsn(dsn, connect_attempts=1)
        for k in range(per_worker):
            while True:
                exe, seen = s.load_for_event("counter", f"w{i}-{k}")
                assert exe is not None and not seen
                exe.context["n"] += 1
                try:
                    s.commit(exe, [], processed_event_id=f"w{i}-{k}")
                    break
                except StoreConflict:
                    with lock:
                        conflicts += 1
        s.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = seed.load("counter")
    assert final is not None
    assert final.context["n"] == workers * per_worker
    assert final.version == 1 + workers * per_worker
    seed.close()


# -- connections ------------------------------------------------------------------------------------------
def test_an_injected_connection_outside_autocommit_ends_every_transaction(schema: str, admin: Any) -> None:
    conn = connect(autocommit=False)
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # a read left open would go stale
    store = PostgresStore(conn, schema=schema)
    other = PostgresStore(connect(), schema=schema, create_schema=False)
    exe = Execution(definition_id="d")
    store.save(exe)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert store.load(exe.id) == exe
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    moved = other.load(exe.id)
    assert moved is not None
    other.commit(moved, [("t", Event(name="x"))])
    reloaded = store.load(exe.id)
    assert reloaded is not None and reloaded.version == 2  # a fresh snapshot, not the old one
    store.commit(reloaded, [], processed_event_id="e")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    stale = reloaded.model_copy()
    store.commit(reloaded, [("t", Event(name="y"))], timers=[TimerOp("schedule", "p", 1.0)])
    with pytest.raises(StoreConflict):  # the multi-statement path, on a connection outside autocommit
        store.commit(stale, [("t", Event(name="z"))], processed_event_id="late")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert [e.event.name for e in store.pending_outbox()] == ["x", "y"] and not store.is_processed(
        exe.id, "late"
    )
    store.close()
    other.close()


def test_from_dsn_gives_up_with_a_typed_error_that_says_what_to_check() -> None:
    with pytest.raises(StoreUnavailable) as info:
        PostgresStore.from_dsn("postgresql://u:sekrit@127.0.0.1:1/db", connect_attempts=2, connect_interval=0)
    msg = str(info.value)
    assert "after 2 attempt(s)" in msg and "u@127.0.0.1:1/db" in msg and "Check that the server" in msg
    assert "sekrit" not in msg


def test_connect_with_retry_waits_for_a_late_server(monkeypatch: pytest.MonkeyPatch) -> None:
    real = psycopg.connect
    calls: list[int] = []
    sleeps: list[float] = []

    def flaky(dsn: str, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) < 3:
            raise psycopg.OperationalError("connection refused")
        return real(dsn, **kw)

    monkeypatch.setattr(psycopg, "connect", flaky)
    conn = connect_with_retry(DSN, attempts=5, interval=0.25, sleep=sleeps.append, autocommit=True)
    assert len(calls) == 3 and sleeps == [0.25, 0.25]
    conn.close()


def test_a_dropped_connection_is_typed_then_reconnected(store: PostgresStore, admin: Any) -> None:
    exe = Execution(definition_id="d")
    store.save(exe)
    admin.execute("SELECT pg_terminate_backend(%s)", (store._conn.info.backend_pid,))
    with pytest.raises(StoreUnavailable, match="reconnects"):
        store.load(exe.id)
    assert store.load(exe.id) == exe


# -- schema ---------------------------------------------------------------------------------------------
def test_the_schema_option_of_the_dsn_keeps_everything_in_that_schema(
    store: PostgresStore, schema: str, admin: Any
) -> None:
    for table in ("executions", "outbox", "processed_events", "timers", "spawns", "trace"):
        assert _regclass(admin, f'"{schema}".{table}') is not None
    assert split_schema("postgresql://h/db?schema=a&sslmode=disable") == (
        "postgresql://h/db?sslmode=disable",
        "a",
    )
    assert split_schema("host=h dbname=db", "b") == ("host=h dbname=db", "b")
    assert split_schema("postgresql://h/db")[1] == "public"


def _create(dsn: str, barrier: Any) -> None:
    from durastate.store.postgres.sync import PostgresStore
    from durastate.transport.postgres import PostgresTransport

    barrier.wait()
    PostgresStore.from_dsn(dsn, connect_attempts=3).close()
    PostgresTransport.from_dsn(dsn, connect_attempts=3).close()


def test_concurrent_schema_creation_by_several_processes_does_not_fail(
    dsn: str, schema: str, admin: Any
) -> None:
    ctx = multiprocessing.get_context("fork")  # the children import nothing new: a fast start
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_create, args=(dsn, barrier)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert _regclass(admin, f'"{schema}".executions') is not None
    assert _regclass(admin, f'"{schema}".inbox') is not None


def test_reopening_does_not_rewrite_an_unchanged_function(dsn: str, schema: str, admin: Any) -> None:
    def proc_xmin() -> Any:
        return admin.execute(
            "SELECT p.xmin::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname = 'durastate_commit_cas'",
            (schema,),
        ).fetchone()

    PostgresStore.from_dsn(dsn).close()
    before = proc_xmin()
    PostgresStore.from_dsn(dsn).close()
    assert before is not None and proc_xmin() == before


# -- growth ---------------------------------------------------------------------------------------------
def test_a_page_by_status_is_an_index_range_not_a_table_scan(
    store: PostgresStore, schema: str, admin: Any
) -> None:
    admin.execute(
        f'INSERT INTO "{schema}".executions (id, definition_id, version, status, data) '
        "SELECT lpad(i::text, 8, '0'), 'd', 1, CASE WHEN i % 100 = 0 THEN 'failed' ELSE 'finished' END, "
        "'{}' FROM generate_series(1, 20000) i"
    )
    admin.execute(f'ANALYZE "{schema}".executions')
    page = store.list_executions(status="failed", limit=10)
    assert [s.id for s in page.items] == [f"{i:08d}" for i in range(100, 1001, 100)]
    assert page.next_cursor is not None
    query = store._sql.list_executions(None, frozenset({"failed"}), False, None, 10)
    assert query is not None
    stmt, params = query
    plan = "\n".join(r[0] for r in admin.execute("EXPLAIN " + stmt, params).fetchall())
    assert "executions_status_id" in plan and "Seq Scan" not in plan, plan


@pytest.mark.parametrize("where, index", [
    ([("customer", "=", "c-17")], "search_text"),
    ([("customer", "=", "c-17"), ("total", ">", 100)], "search_text"),
    ([("total", ">=", 10)], "search_number"),
    ([("total", ">=", 10), ("total", "<", 20)], "search_number"),
])
def test_a_where_listing_is_an_index_range_not_a_table_scan(
    store: PostgresStore, schema: str, admin: Any, where: list[tuple[str, str, object]], index: str
) -> None:
    """What bench/results/search.md measures at 100,000 executions, checked on the plan of 20,000."""
    from durastate.engine.search import check_conditions

    admin.execute(
        f'INSERT INTO "{schema}".executions (id, definition_id, version, status, data) '
        "SELECT lpad(i::text, 8, '0'), 'cart', 1, 'running', '{}' FROM generate_series(1, 20000) i")
    admin.execute(
        f'INSERT INTO "{schema}".search (execution_id, name, text_value, num_value) '
        "SELECT lpad(i::text, 8, '0'), 'customer', 'c-' || (i % 1000), NULL FROM generate_series(1, 20000) i "
        "UNION ALL SELECT lpad(i::text, 8, '0'), 'total#n', NULL, i FROM generate_series(1, 20000) i")
    admin.execute(f'ANALYZE "{schema}".executions')
    admin.execute(f'ANALYZE "{schema}".search')
    conditions = check_conditions(where)
    assert store.list_executions(where=conditions, limit=10).items  # it answers
    query = store._sql.list_executions(None, None, False, None, 10, where=conditions)
    assert query is not None
    stmt, params = query
    plan = "\n".join(r[0] for r in admin.execute("EXPLAIN " + stmt, params).fetchall())
    assert index in plan and "Seq Scan" not in plan, plan


def test_a_schema_made_before_search_fields_gets_the_index(schema: str, admin: Any) -> None:
    """A schema without the ``search`` table (made before search fields) gets it when a store opens it; an
    execution stored before is found by its search values from its next commit on."""
    from durastate.engine.search import Condition

    where = [Condition("customer", "=", "c-17")]
    store = PostgresStore(connect(), schema=schema)
    store.save(Execution(id="old", definition_id="order", active_path="a", search={"customer": "c-17"}))
    store.close()
    admin.execute(f'DROP TABLE "{schema}".search')
    store = PostgresStore(connect(), schema=schema)
    try:
        assert store.list_executions(where=where).items == []
        old = store.load("old")
        assert old is not None
        store.commit(old, [])
        assert [s.id for s in store.list_executions(where=where).items] == ["old"]
    finally:
        store.close()
