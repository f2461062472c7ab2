"""Durable stores: events per second through durastate's worker against a raw write loop on the same settings.

- **SQLite** (WAL; ``synchronous`` NORMAL and FULL): durastate's ``Worker.handle`` per event on a
  ``SqliteStore`` — one read (execution + dedupe check) and one write transaction (CAS update, dedupe
  mark, trace step) — against a raw loop of ``BEGIN IMMEDIATE; UPDATE … WHERE id = ?; COMMIT`` on a
  one-row table in a file with the same pragmas, writing a payload as large as durastate's execution JSON.
- **PostgreSQL** (127.0.0.1, a schema of our own): durastate's worker on ``PostgresStore`` against a raw
  psycopg loop of ``UPDATE …`` + ``conn.commit()`` (a default, non-autocommit connection), at 1 and 8
  connections. 8 connections are 8 *processes* (one connection each, one execution each, started
  together behind a barrier): threads would measure the GIL, not the database. The raw loop in
  autocommit (the UPDATE is its own transaction, one round trip) is reported too, as the floor.

Both sides of every comparison run interleaved within each repeat, on the same chart-1 event sequence.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._util import Series, interleave, paired_ratio
from bench.peers import CHART1_CYCLE

DEFS = Path(__file__).parent / "defs"
PG_DSN = os.environ.get("DURASTATE_BENCH_PG", "host=127.0.0.1 port=5432 dbname=test user=postgres")
NOW = 1_700_000_000.0
KEEP = 64
"""``keep_committed`` of the "keep" rows (``durastate serve --exclusive``): the worker is the only one for its
executions, so it commits each next event on the copy it kept, without reading it back."""
DURASTATE, DURASTATE_KEEP = "durastate SqliteStore", "durastate SqliteStore, keep_committed"
DURASTATE_SERVE = "durastate serve (rounds of 32, one transaction each)"
DURASTATE_NOTRACE = "durastate SqliteStore, trace off"
"""The default worker with ``trace=False`` (``durastate serve --no-trace``): no trace step with a commit."""
PG_DURASTATE, PG_DURASTATE_KEEP = "durastate PostgresStore", "durastate PostgresStore, keep_committed"
DURASTATE_BEFORE = "durastate SqliteStore, before (read first, a mark row per event)"
PG_DURASTATE_BEFORE = "durastate PostgresStore, before (read first, a mark row per event)"
"""The worker as it was before the recent ids moved into the row and kept copies became the default —
``keep_committed=0`` on a store with ``recent_events=0`` — measured in the same run as the rows above.
The default rows (``DURASTATE``, ``PG_DURASTATE``) are ``Worker``'s defaults: kept copies, each checked
with one version read before stepping; the "keep_committed" rows are ``exclusive=True`` (no such read)."""
PG_DURASTATE_ROWS = "durastate PostgresStore, a mark row per event (recent_events=0)"
"""Today's worker on a PostgreSQL store that writes a ``processed_events`` row per event, the store's
default before the recent ids moved into the row there too."""
MODES = {"default": {}, "exclusive": {"keep_committed": KEEP, "exclusive": True},
         "before": {"keep_committed": 0}, "default, trace off": {"trace": False},
         "default, marks as rows": {}}
"""Worker options of each way of running it (``before`` and ``marks as rows`` also open their store with
``recent_events=0``: a ``processed_events`` row per event)."""


def _recent(mode: str) -> dict[str, int]:
    """The store's ``recent_events`` for ``mode`` (nothing: the store's default)."""
    if mode in ("before", "default, marks as rows"):
        return {"recent_events": 0}
    return {}


def _registry() -> Any:
    from durastate.engine import DefinitionRegistry, load_definition

    reg = DefinitionRegistry()
    reg.register(load_definition(DEFS / "toggle.yaml"))
    return reg


def _payload_size() -> int:
    """Bytes of durastate's stored execution JSON for chart 1 (the raw loops write as much)."""
    from durastate.engine import Event, step
    from durastate.engine.model import Execution

    reg = _registry()
    exe = Execution(id="x", definition_id="toggle")
    step(reg.get("toggle"), exe, Event(id="s", name="durastate.start"), NOW)
    exe.version = 42
    return len(exe.model_dump_json())


def _events(n: int, tag: str) -> list[Any]:
    from durastate.engine import Event

    seq = (CHART1_CYCLE * (n // len(CHART1_CYCLE) + 1))[:n]
    return [Event(id=f"{tag}-{i}", name=name) for i, name in enumerate(seq)]


# -- SQLite ---------------------------------------------------------------------------------------------
def _sqlite_durastate(path: Path, sync: str, n: int, mode: str = "default") -> Callable[[], float]:
    from durastate.engine import Event
    from durastate.runtime.worker import Worker
    from durastate.store.sqlite.sync import SqliteStore

    reg = _registry()
    store = SqliteStore(path, synchronous=sync,  # type: ignore[arg-type]
                        **_recent(mode))
    worker = Worker(store, reg, clock=lambda: NOW, **MODES[mode])  # type: ignore[arg-type]
    worker.handle("x", Event(id="x:start", name="durastate.start", data={"definition_id": "toggle"}))
    runs = [0]

    def run() -> float:
        runs[0] += 1
        events = _events(n, f"r{runs[0]}")
        t0 = time.perf_counter()
        for ev in events:
            worker.handle("x", ev)
        return n / (time.perf_counter() - t0)

    run.close = store.close  # type: ignore[attr-defined]
    return run


def _sqlite_serve(path: Path, sync: str, n: int) -> Callable[[], float]:
    """What ``durastate serve`` does with ``n`` queued events: ``LocalRuntime`` rounds over the durable inbox
    (``SqliteTransport`` on the store's connection), each round of up to 32 events — claims, commits and
    acks — in one transaction. Queuing the events (another process's ``durastate send``) is not timed."""
    from durastate.engine import Event
    from durastate.runtime import LocalRuntime
    from durastate.store.sqlite.sync import SqliteStore
    from durastate.transport.sqlite import SqliteTransport

    store = SqliteStore(path, synchronous=sync)  # type: ignore[arg-type]
    transport = SqliteTransport(store, clock=lambda: NOW)
    rt = LocalRuntime(store, _registry(), transport, clock=lambda: NOW, batch_size=32)
    transport.send([("x", Event(id="x:start", name="durastate.start", data={"definition_id": "toggle"}))])
    rt.run_until_idle()
    runs = [0]

    def run() -> float:
        runs[0] += 1
        transport.send([("x", ev) for ev in _events(n, f"s{runs[0]}")])
        t0 = time.perf_counter()
        stats = rt.run_until_idle()
        elapsed = time.perf_counter() - t0
        if stats.applied != n:
            raise AssertionError(f"durastate serve applied {stats.applied} of {n} events")
        return n / elapsed

    run.close = store.close  # type: ignore[attr-defined]
    return run


def _sqlite_raw(path: Path, sync: str, n: int, size: int) -> Callable[[], float]:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {sync}")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                 "data TEXT NOT NULL) WITHOUT ROWID")
    conn.execute("INSERT OR IGNORE INTO t VALUES ('x', 0, '')")
    payload = "x" * size
    cur = conn.cursor()

    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            cur.execute("BEGIN IMMEDIATE")
            cur.execute("UPDATE t SET data = ?, version = version + 1 WHERE id = ?", (payload, "x"))
            cur.execute("COMMIT")
        return n / (time.perf_counter() - t0)

    run.close = conn.close  # type: ignore[attr-defined]
    return run


def _wal_pages_per_event(folder: Path, size: int, n: int = 150) -> dict[str, float]:
    """WAL frames (4 KB pages) one event appends, for durastate and the raw loop, in steady state.

    Fresh files; each side first runs long enough to fill durastate's trace ring (so its trimming is
    counted), then the WAL is checkpointed to empty and ``n`` more events are run — few enough that no
    automatic checkpoint (every 1000 pages) restarts the WAL in between.
    """
    out = {}
    makers: dict[str, Callable[[Path], Callable[[], float]]] = {
        f"durastate SqliteStore, {mode}": (lambda p, m=mode: _sqlite_durastate(p, "NORMAL", n, m)) for mode in MODES
    }
    makers["raw UPDATE loop"] = lambda p: _sqlite_raw(p, "NORMAL", n, size)
    for i, (name, make) in enumerate(makers.items()):
        path = folder / f"wal-{i}.db"
        runner = make(path)
        runner()
        runner()
        conn = sqlite3.connect(str(path), isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        runner()
        wal = Path(str(path) + "-wal")
        out[name] = max(0, (wal.stat().st_size if wal.exists() else 0) - 32) / (4096 + 24) / n
        runner.close()  # type: ignore[attr-defined]
    return out


def run_sqlite(n_normal: int = 3000, n_full: int = 200, repeats: int = 5, warmup: bool = True,
               wal_events: int = 150) -> dict[str, Any]:
    """``wal_events``: events run to count WAL pages per event (0 skips that diagnostic)."""
    size = _payload_size()
    tmp = Path(tempfile.mkdtemp(prefix="durastate-bench-"))
    out: dict[str, Any] = {"payload_bytes": size}
    try:
        for sync, n in (("NORMAL", n_normal), ("FULL", n_full)):
            runners = {
                DURASTATE: _sqlite_durastate(tmp / f"durastate-{sync}.db", sync, n),
                DURASTATE_BEFORE: _sqlite_durastate(tmp / f"before-{sync}.db", sync, n, "before"),
                DURASTATE_KEEP: _sqlite_durastate(tmp / f"keep-{sync}.db", sync, n, "exclusive"),
                DURASTATE_SERVE: _sqlite_serve(tmp / f"serve-{sync}.db", sync, n),
                DURASTATE_NOTRACE: _sqlite_durastate(tmp / f"notrace-{sync}.db", sync, n, "default, trace off"),
                "raw UPDATE loop": _sqlite_raw(tmp / f"raw-{sync}.db", sync, n, size),
            }
            series = interleave(runners, repeats, warmup=warmup)
            # what each commit writes (the same at FULL, where the fsync dominates)
            pages = _wal_pages_per_event(tmp, size, wal_events) if sync == "NORMAL" and wal_events else {}
            if sync == "NORMAL" and wal_events:
                out["wal_breakdown"] = sqlite_wal_breakdown(wal_events)
            for r in runners.values():
                r.close()  # type: ignore[attr-defined]
            out[sync] = {"events": n, "repeats": repeats, "series": series, "wal_pages_per_event": pages,
                         "ratio": paired_ratio(series[DURASTATE], series["raw UPDATE loop"]),
                         "ratio_keep": paired_ratio(series[DURASTATE_KEEP], series["raw UPDATE loop"]),
                         "ratio_before": paired_ratio(series[DURASTATE_BEFORE], series["raw UPDATE loop"]),
                         "ratio_serve": paired_ratio(series[DURASTATE_SERVE], series["raw UPDATE loop"]),
                         "ratio_notrace": paired_ratio(series[DURASTATE_NOTRACE], series["raw UPDATE loop"])}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# -- PostgreSQL -----------------------------------------------------------------------------------------
def pg_available() -> str | None:
    """``None`` if the benchmark database answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # the section is skipped with the reason, never fails the whole run
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None


SCHEMA = f"durastate_bench_{os.getpid()}"
"""Our own schema (per process, so a smoke test and a benchmark run never share one); dropped at the end."""


def _pg_reset(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".raw (id text PRIMARY KEY, version bigint NOT NULL, '
                     "data text NOT NULL)")


def _pg_worker_proc(kind: str, tag: str, n: int, size: int, barrier: Any, results: Any) -> None:
    """One connection's loop (in its own process for the multi-connection runs)."""
    import psycopg

    if kind.startswith("durastate"):
        from durastate.engine import Event
        from durastate.runtime.worker import Worker
        from durastate.store.postgres.sync import PostgresStore

        mode = kind.removeprefix("durastate-") if kind != "durastate" else "default"
        store = PostgresStore.from_dsn(PG_DSN, schema=SCHEMA, **_recent(mode))
        worker = Worker(store, _registry(), clock=lambda: NOW, **MODES[mode])  # type: ignore[arg-type]
        worker.handle(tag, Event(id=f"{tag}:start", name="durastate.start", data={"definition_id": "toggle"}))
        events = _events(n, tag)

        def loop() -> None:
            for ev in events:
                worker.handle(tag, ev)

        close: Callable[[], None] = store.close
    else:
        conn = psycopg.connect(PG_DSN, autocommit=(kind == "raw-autocommit"))
        with conn.cursor() as cur:
            cur.execute(f'INSERT INTO "{SCHEMA}".raw VALUES (%s, 0, %s) ON CONFLICT DO NOTHING', (tag, ""))
        conn.commit()
        payload = "x" * size
        sql = f'UPDATE "{SCHEMA}".raw SET data = %s, version = version + 1 WHERE id = %s'

        def loop() -> None:
            for _ in range(n):
                with conn.cursor() as cur:
                    cur.execute(sql, (payload, tag))
                conn.commit()

        close = conn.close
    if barrier is not None:
        barrier.wait()
    lsn = _lsn() if barrier is None else None
    t0 = time.time()
    loop()
    t1 = time.time()
    wal = (_lsn() - lsn) / n if lsn is not None else None
    close()
    results.put((t0, t1, n, wal))


def _lsn() -> int:
    """The server's current WAL position in bytes (to measure WAL written per event)."""
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        return int(row[0]) if row else 0


_tags = iter(range(10**9))
_WAL: dict[str, list[float]] = {}
"""WAL bytes per event of each single-connection run, by kind (min over runs: others' noise excluded)."""


def _pg_runner(kind: str, conns: int, n: int, size: int) -> Callable[[], float]:
    def run() -> float:
        base = f"{kind}-{conns}-{next(_tags)}"
        if conns == 1:
            q: Any = _ListQueue()
            _pg_worker_proc(kind, base, n, size, None, q)
            t0, t1, k, wal = q.items[0]
            _WAL.setdefault(kind, []).append(wal)
            return k / (t1 - t0)
        ctx = mp.get_context("fork")
        barrier = ctx.Barrier(conns)
        results = ctx.Queue()
        procs = [ctx.Process(target=_pg_worker_proc, args=(kind, f"{base}-{i}", n, size, barrier, results))
                 for i in range(conns)]
        for p in procs:
            p.start()
        got = [results.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        start = min(g[0] for g in got)
        end = max(g[1] for g in got)
        return sum(g[2] for g in got) / (end - start)

    return run


class _ListQueue:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def put(self, item: Any) -> None:
        self.items.append(item)


def run_postgres(n1: int = 300, n8: int = 150, repeats: int = 5, many: int = 8,
                 warmup: bool = True) -> dict[str, Any]:
    """``many``: the multi-connection run's connection count (8; the smoke test uses fewer)."""
    size = _payload_size()
    _pg_reset(SCHEMA)
    from durastate.store.postgres.sync import PostgresStore

    PostgresStore.from_dsn(PG_DSN, schema=SCHEMA).close()  # create the tables once, outside the timing
    out: dict[str, Any] = {"payload_bytes": size}
    with contextlib.suppress(Exception):
        import psycopg

        with psycopg.connect(PG_DSN) as conn:
            row = conn.execute("SELECT current_setting('synchronous_commit'), current_setting('fsync'), "
                               "version()").fetchone()
            out["server"] = {"synchronous_commit": row[0], "fsync": row[1],
                             "version": row[2].split(" on ")[0]}
    out["many"] = many
    for conns, n in ((1, n1), (many, n8)):
        runners = {
            PG_DURASTATE: _pg_runner("durastate", conns, n, size),
            PG_DURASTATE_KEEP: _pg_runner("durastate-exclusive", conns, n, size),
            PG_DURASTATE_BEFORE: _pg_runner("durastate-before", conns, n, size),
            PG_DURASTATE_ROWS: _pg_runner("durastate-default, marks as rows", conns, n, size),
            "raw UPDATE+commit": _pg_runner("raw", conns, n, size),
            "raw UPDATE, autocommit": _pg_runner("raw-autocommit", conns, n, size),
        }
        series: dict[str, Series] = interleave(runners, repeats, warmup=warmup)
        out[conns] = {"events_per_conn": n, "repeats": repeats, "series": series,
                      "ratio": paired_ratio(series[PG_DURASTATE], series["raw UPDATE+commit"]),
                      "ratio_keep": paired_ratio(series[PG_DURASTATE_KEEP], series["raw UPDATE+commit"]),
                      "ratio_before": paired_ratio(series[PG_DURASTATE_BEFORE], series["raw UPDATE+commit"]),
                      "ratio_rows": paired_ratio(series[PG_DURASTATE_ROWS], series["raw UPDATE+commit"]),
                      "ratio_autocommit": paired_ratio(series["durastate PostgresStore"],
                                                       series["raw UPDATE, autocommit"])}
    for _ in range(repeats):  # the trace-off deployment's WAL (not timed: the trace ring is what it saves)
        _pg_runner("durastate-default, trace off", 1, n1, size)()
    with contextlib.suppress(Exception):  # pg_walinspect: bytes per event by relation, others' WAL left out
        out["wal_breakdown"] = pg_wal_breakdown(n1)
    out["wal_bytes_per_event"] = {k: min(v) for k, v in _WAL.items() if v}
    with contextlib.suppress(Exception):
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    return out


def pg_wal_breakdown(n: int = 400, modes: tuple[str, ...] = (
        "raw", "before", "default", "default, trace off", "default, marks as rows")) -> dict[str, Any]:
    """Where each event's WAL goes on PostgreSQL, per worker mode: ``pg_walinspect`` over the records of
    ``n`` events, attributed to the relation each record touches (the execution row, a dedupe mark, the
    trace ring, their indexes) and the commit records; bytes per event.

    Each mode runs in a fresh schema after a ``CHECKPOINT``-free warm-up of the same length (so the
    full-page images of first touches are mostly behind it); records of other sessions on a shared server
    are left out (they touch none of the schema's relations), except commit records, which carry no
    relation: those are counted as one per event — each event is one transaction — from the run's own.
    """
    import psycopg

    out: dict[str, Any] = {}
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        for mode in modes:
            schema = f"durastate_walx_{os.getpid()}"
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            from durastate.engine import Event
            from durastate.runtime.worker import Worker
            from durastate.store.postgres.sync import PostgresStore

            step: Callable[[Any], Any]
            if mode == "raw":  # the raw UPDATE+commit loop, on a table of its own in the same schema
                admin.execute(f'CREATE SCHEMA "{schema}"')
                admin.execute(f'CREATE TABLE "{schema}".raw (id text PRIMARY KEY, version bigint NOT NULL, '
                              "data text NOT NULL)")
                conn = psycopg.connect(PG_DSN)
                conn.execute(f'INSERT INTO "{schema}".raw VALUES (%s, 0, %s)', ("w", ""))
                conn.commit()
                payload = "x" * _payload_size()

                def step(_: Any, conn: Any = conn, payload: str = payload, schema: str = schema) -> None:
                    conn.execute(f'UPDATE "{schema}".raw SET data = %s, version = version + 1 WHERE id = %s',
                                 (payload, "w"))
                    conn.commit()

                close: Callable[[], None] = conn.close
            else:
                store = PostgresStore.from_dsn(PG_DSN, schema=schema, **_recent(mode))
                worker = Worker(store, _registry(), clock=lambda: NOW, **MODES[mode])  # type: ignore[arg-type]
                worker.handle("w", Event(id="w:start", name="durastate.start", data={"definition_id": "toggle"}))
                step = lambda ev, worker=worker: worker.handle("w", ev)  # noqa: E731
                close = store.close
            for ev in _events(n, "warm"):
                step(ev)
            rels = dict(admin.execute(
                "SELECT c.relfilenode::text, c.relname FROM pg_class c JOIN pg_namespace s "
                "ON s.oid = c.relnamespace WHERE s.nspname = %s AND c.relfilenode <> 0", (schema,)).fetchall())
            start = admin.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]  # type: ignore[index]
            for ev in _events(n, "run"):
                step(ev)
            end = admin.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]  # type: ignore[index]
            close()
            rows = admin.execute(
                "SELECT resource_manager, record_type, record_length, fpi_length, block_ref "
                "FROM pg_get_wal_records_info(%s, %s)", (start, end)).fetchall()
            by: dict[str, float] = {}
            for rmgr, rtype, length, fpi, block_ref in rows:
                found = [rels[r] for r in rels if block_ref and f"/{r} " in f"{block_ref} ".replace(" fork", " ")]
                if not found:
                    continue
                key = f"{found[0]}: {rmgr} {rtype}" + (" (full-page image)" if fpi else "")
                by[key] = by.get(key, 0.0) + length / n
            commit = [r[2] for r in rows if r[0] == "Transaction" and r[1].startswith("COMMIT")]
            if commit:
                by["commit record (one per event)"] = sorted(commit)[len(commit) // 2]
            out[mode] = {"total": sum(by.values()), "records": dict(sorted(by.items(), key=lambda kv: -kv[1]))}
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return out


def sqlite_wal_breakdown(n: int = 150, modes: tuple[str, ...] = ("before", "default", "default, trace off")
                         ) -> dict[str, dict[str, float]]:
    """Which table's (or index's) pages each event appends to the SQLite WAL, per worker mode: the WAL's
    frame headers name each page, ``dbstat`` names each page's table; pages per event, in steady state
    (measured as :func:`_wal_pages_per_event` does)."""
    import struct

    out: dict[str, dict[str, float]] = {}
    folder = Path(tempfile.mkdtemp(prefix="durastate-walx-"))
    try:
        for i, mode in enumerate(modes):
            path = folder / f"walx-{i}.db"
            runner = _sqlite_durastate(path, "NORMAL", n, mode)
            runner()
            runner()
            conn = sqlite3.connect(str(path), isolation_level=None)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            runner()
            owner = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
            wal = Path(str(path) + "-wal").read_bytes()
            by: dict[str, float] = {}
            for off in range(32, len(wal) - 24, 4096 + 24):
                (page,) = struct.unpack(">I", wal[off:off + 4])
                name = owner.get(page, "free or new page")
                by[name] = by.get(name, 0.0) + 1 / n
            conn.close()
            runner.close()  # type: ignore[attr-defined]
            out[mode] = dict(sorted(by.items(), key=lambda kv: -kv[1]))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out
