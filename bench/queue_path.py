# ruff: noqa: RUF001, RUF002  (the en dashes and multiplication signs are the report's typography)
"""The queue path against the worker alone, and durastate against the other durable engine (``harel``).

**Queue path** — what ``durastate serve`` does with events that arrive in its durable inbox: ``n`` chart-1
events for ``m`` executions are *sent* (``transport.send``, in calls of 32 messages, or one call per
event), then ``LocalRuntime.run_until_idle`` claims, applies and acks them (rounds of 32: each claim
takes up to the round's remaining budget of heads in one statement, and the claimed messages are acked
together). The sending is inside the timing. Its reference is the **worker alone** on the same events
for the same executions (``Worker.handle`` per event: no queue at all). Target: the queue path at
≥ 60 % of the worker-only rate, on SQLite (NORMAL, FULL) and PostgreSQL.

**Peer** — the same chart-1 workload through ``harel`` (its latest release, in a virtualenv of its own:
``bench/harel_peer.py``), interleaved with durastate's runs, the same event counts: in memory, SQLite
NORMAL and FULL, PostgreSQL (one connection, a schema of its own) and the queue paths (harel's
``DistributedRunner.send`` per event, then its worker until idle). Target: durastate ≥ 2× on every path.

Behind the rates, a **breakdown** measured outside the timing: statements (SQLite) or client/server round
trips (PostgreSQL, from libpq's protocol trace) per event, and WAL written per event (SQLite pages,
PostgreSQL bytes), for the worker alone and for the queue path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import harel_peer
from bench._util import interleave, paired_ratio
from bench.peers import CHART1_CYCLE
from bench.stores import NOW, PG_DSN, _registry

SEND_BATCH = 32
"""Messages per ``send`` call in the headline queue row (as a producer that batches, or the relay)."""
ROUND = 32
"""``durastate serve``'s default ``--batch``: events per runtime round."""
WORKER, QUEUE, QUEUE_EACH, PEER = ("durastate worker alone", "durastate queue path (sends of 32)",
                                   "durastate queue path (a send per event)", "harel")
DURASTATE = "durastate"
PG_SCHEMA = f"durastate_qbench_{os.getpid()}"
PEER_SCHEMA = f"harel_qbench_{os.getpid()}"


def _messages(ids: list[str], per: int, tag: str) -> list[tuple[str, Any]]:
    """``per`` chart-1 events for each execution, one for each execution in turn (independent senders)."""
    from durastate.engine import Event

    seq = (CHART1_CYCLE * (per // len(CHART1_CYCLE) + 1))[:per]
    return [(eid, Event(id=f"{eid}-{tag}-{i}", name=name)) for i, name in enumerate(seq) for eid in ids]


def _start(eid: str) -> Any:
    from durastate.engine import Event

    return Event(id=f"{eid}:start", name="durastate.start", data={"definition_id": "toggle"})


def _check(store: Any, ids: list[str]) -> None:
    for eid in ids:
        exe = store.load(eid)
        if exe is None or exe.active_path != "idle":
            raise AssertionError(f"durastate: {eid} ends in {exe and exe.active_path}, not idle")


# -- durastate's contenders ------------------------------------------------------------------------------
class _Ours:
    """A store (and a queue) of one backend, opened for one contender; closed at the end."""

    def __init__(self, backend: str, folder: Path, name: str) -> None:
        self.backend = backend
        if backend == "memory":
            from durastate.store import DictStore

            self.store: Any = DictStore()
            self.queue: Any = None
        elif backend.startswith("sqlite"):
            from durastate.store.sqlite.sync import SqliteStore
            from durastate.transport.sqlite import SqliteTransport

            sync = backend.split()[1]
            self.store = SqliteStore(folder / f"{name}-{sync}.db", synchronous=sync)  # type: ignore[arg-type]
            self.queue = SqliteTransport(self.store, clock=lambda: NOW)
        else:
            from durastate.store.postgres.sync import PostgresStore
            from durastate.transport.postgres import PostgresTransport

            self.store = PostgresStore.from_dsn(PG_DSN, schema=PG_SCHEMA)
            self.queue = PostgresTransport.from_dsn(PG_DSN, schema=PG_SCHEMA, clock=lambda: NOW)

    def close(self) -> None:
        if self.queue is not None and hasattr(self.queue, "close"):
            self.queue.close()
        self.store.close()


def _worker_alone(ours: _Ours, n: int, m: int, tag: str) -> Callable[[], float]:
    from durastate.runtime.worker import Worker

    worker = Worker(ours.store, _registry(), clock=lambda: NOW)
    ids = [f"{tag}-w{j}" for j in range(m)]
    for eid in ids:
        worker.handle(eid, _start(eid))
    runs = [0]

    def run() -> float:
        runs[0] += 1
        msgs = _messages(ids, n // m, f"r{runs[0]}")
        t0 = time.perf_counter()
        for eid, ev in msgs:
            worker.handle(eid, ev)
        elapsed = time.perf_counter() - t0
        _check(ours.store, ids)
        return len(msgs) / elapsed

    run.ours = ours  # type: ignore[attr-defined]
    run.ids = ids  # type: ignore[attr-defined]
    return run


def _queue_path(ours: _Ours, n: int, m: int, tag: str, send_batch: int) -> Callable[[], float]:
    from durastate.runtime import LocalRuntime

    rt = LocalRuntime(ours.store, _registry(), ours.queue, clock=lambda: NOW, batch_size=ROUND)
    ids = [f"{tag}-q{j}" for j in range(m)]
    ours.queue.send([(eid, _start(eid)) for eid in ids])
    rt.run_until_idle()
    runs = [0]

    def run() -> float:
        runs[0] += 1
        msgs = _messages(ids, n // m, f"r{runs[0]}")
        t0 = time.perf_counter()
        for k in range(0, len(msgs), send_batch):
            ours.queue.send(msgs[k:k + send_batch])
        stats = rt.run_until_idle()
        elapsed = time.perf_counter() - t0
        if stats.applied != len(msgs):
            raise AssertionError(f"durastate queue path applied {stats.applied} of {len(msgs)} events")
        _check(ours.store, ids)
        return len(msgs) / elapsed

    run.ours = ours  # type: ignore[attr-defined]
    return run


# -- the breakdown (outside the timing) -------------------------------------------------------------------
@contextlib.contextmanager
def _sqlite_statements(conn: sqlite3.Connection) -> Iterator[list[str]]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def _sqlite_breakdown(folder: Path, n: int, m: int) -> dict[str, dict[str, float]]:
    """Statements and WAL pages per event, worker alone vs queue path (sends of 32), SQLite NORMAL."""
    out: dict[str, dict[str, float]] = {}
    for name, make in ((WORKER, lambda o: _worker_alone(o, n, m, "bw")),
                       (QUEUE, lambda o: _queue_path(o, n, m, "bq", SEND_BATCH))):
        ours = _Ours("sqlite NORMAL", folder, f"breakdown-{len(out)}")
        runner = make(ours)
        runner()  # warm: fills the trace ring, so its trimming is counted
        conn = ours.store.db.conn
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wal = Path(str(ours.store.db.path) + "-wal")
        with _sqlite_statements(conn) as seen:
            runner()
        pages = max(0, (wal.stat().st_size if wal.exists() else 0) - 32) / (4096 + 24)
        kinds: dict[str, int] = {}
        for s in seen:
            word = s.lstrip().split(None, 1)[0].upper() if s.strip() else "?"
            kinds[word] = kinds.get(word, 0) + 1
        out[name] = {"statements": len(seen) / n, "wal_pages": pages / n,
                     **{f"{k} statements": v / n for k, v in sorted(kinds.items())}}
        ours.close()
    return out


class _RoundTrips:
    """Round trips on one psycopg connection, from libpq's protocol trace (one ``ReadyForQuery`` each)."""

    def __init__(self, conn: Any, path: Path) -> None:
        self.conn, self.path, self.count = conn, path, 0

    def __enter__(self) -> _RoundTrips:
        self._file = open(self.path, "w")
        self.conn.pgconn.trace(self._file.fileno())
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.pgconn.untrace()
        self._file.close()
        self.count = sum(1 for ln in self.path.read_text().splitlines() if "\tReadyForQuery" in ln)


def _lsn() -> int:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        return int(row[0]) if row else 0


def _pg_breakdown(folder: Path, n: int, m: int) -> dict[str, dict[str, float]]:
    """Round trips (store and queue connections) and WAL bytes per event, worker alone vs queue path."""
    out: dict[str, dict[str, float]] = {}
    for name, make in ((WORKER, lambda o: _worker_alone(o, n, m, f"pbw{os.getpid()}")),
                       (QUEUE, lambda o: _queue_path(o, n, m, f"pbq{os.getpid()}", SEND_BATCH))):
        ours = _Ours("postgres", folder, "pg")
        runner = make(ours)
        runner()
        with _RoundTrips(ours.store._conn, folder / "store.trace") as store_rt, \
                _RoundTrips(ours.queue._conn, folder / "queue.trace") as queue_rt:
            runner()
        wals = []
        for _ in range(3):  # the server's WAL position moves with every session: the least of 3 runs
            lsn = _lsn()
            runner()
            wals.append((_lsn() - lsn) / n)
        wal = min(wals)
        out[name] = {"round trips": (store_rt.count + queue_rt.count) / n,
                     "store round trips": store_rt.count / n, "queue round trips": queue_rt.count / n,
                     "WAL bytes": wal}
        ours.close()
    return out


# -- the peer's contenders ---------------------------------------------------------------------------------
def _pg_schemas(*names: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{name}"')


def _drop_schemas(*names: str) -> None:
    with contextlib.suppress(Exception):
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


PATHS = ("memory", "sqlite NORMAL", "sqlite FULL", "postgres", "queue sqlite NORMAL", "queue sqlite FULL",
         "queue postgres")


def run(sizes: dict[str, int], m: int = 8, repeats: int = 5, warmup: bool = True, peer: bool | str = True,
        paths: tuple[str, ...] = PATHS, breakdown_events: int = 160, log: Any = print) -> dict[str, Any]:
    """``sizes``: events per run for each path (the queue paths' are rounded down to whole chart-1 cycles
    per execution); ``m``: executions of the queue paths. ``peer``: True installs harel's virtualenv if
    it is missing, ``"installed"`` uses it only if it is there (the smoke test), False leaves harel out."""
    from bench.stores import pg_available

    why_no_pg = pg_available()
    if peer == "installed":
        why_no_peer = (None if harel_peer.installed_version() == harel_peer.HAREL_VERSION
                       else f"harel {harel_peer.HAREL_VERSION} is not installed in {harel_peer.VENV}")
    else:
        why_no_peer = harel_peer.ensure_peer(log) if peer else "not asked for"
    out: dict[str, Any] = {"m": m, "send_batch": SEND_BATCH, "round": ROUND, "peer_version": harel_peer.HAREL_VERSION,
                           "peer_skipped": why_no_peer, "paths": {}}
    folder = Path(tempfile.mkdtemp(prefix="durastate-qbench-"))
    cycle = len(CHART1_CYCLE)
    try:
        if why_no_pg is None:
            _pg_schemas(PG_SCHEMA, PEER_SCHEMA)
        for path in paths:
            if "postgres" in path and why_no_pg is not None:
                out["paths"][path] = {"skipped": f"PostgreSQL not reachable at {PG_DSN}: {why_no_pg}"}
                continue
            queue = path.startswith("queue ")
            backend = path.removeprefix("queue ")
            n = sizes[path]
            n = max(m * cycle, n - n % (m * cycle)) if queue else n
            tag = path.replace(" ", "-").lower()
            runners: dict[str, Callable[[], float]] = {}
            opened: list[_Ours] = []

            def own(name: str, backend: str = backend, tag: str = tag, opened: list[_Ours] = opened) -> _Ours:
                o = _Ours(backend, folder, f"{tag}-{len(opened)}-{name}")
                opened.append(o)
                return o

            if queue:
                runners[WORKER] = _worker_alone(own("w"), n, m, f"{tag}-w")
                runners[QUEUE] = _queue_path(own("q"), n, m, f"{tag}-q", SEND_BATCH)
                runners[QUEUE_EACH] = _queue_path(own("e"), n, m, f"{tag}-e", 1)
            else:
                runners[DURASTATE] = _worker_alone(own("d"), n, 1, f"{tag}-d")
            peer_proc = None
            if why_no_peer is None:
                cfg: dict[str, Any] = {"kind": ("queue-" if queue else "") + backend.split()[0], "n": n, "m": m}
                if backend.startswith("sqlite"):
                    cfg |= {"path": str(folder / f"harel-{tag}.db"), "sync": backend.split()[1]}
                elif backend == "postgres":
                    cfg |= {"dsn": PG_DSN, "schema": PEER_SCHEMA}
                try:
                    peer_proc = harel_peer.PeerProcess(**cfg)
                    runners[PEER] = peer_proc
                except Exception as exc:  # the peer's failure is reported; durastate's rows still run
                    out.setdefault("peer_errors", {})[path] = str(exc).splitlines()[0]
            log(f"[bench]   {path}: {n} events × {repeats} repeats")
            try:
                series = interleave(runners, repeats, warmup=warmup)
            finally:
                if peer_proc is not None:
                    peer_proc.close()
                for o in opened:
                    o.close()
            res: dict[str, Any] = {"events": n, "repeats": repeats, "series": series}
            ours_name = QUEUE if queue else DURASTATE
            if queue:
                res["ratio_queue"] = paired_ratio(series[QUEUE], series[WORKER])
                res["ratio_queue_each"] = paired_ratio(series[QUEUE_EACH], series[WORKER])
            if PEER in series:
                res["ratio_peer"] = paired_ratio(series[ours_name], series[PEER])
                if queue:
                    res["ratio_peer_each"] = paired_ratio(series[QUEUE_EACH], series[PEER])
            out["paths"][path] = res
        if breakdown_events:
            n = max(m * cycle, breakdown_events - breakdown_events % (m * cycle))
            out["breakdown"] = {"events": n, "sqlite NORMAL": _sqlite_breakdown(folder, n, m)}
            if why_no_pg is None:
                out["breakdown"]["postgres"] = _pg_breakdown(folder, n, m)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if why_no_pg is None:
            _drop_schemas(PG_SCHEMA, PEER_SCHEMA)
    return out


# -- the report ----------------------------------------------------------------------------------------------
INTRO = (
    "**Queue path**: chart-1 events for {m} executions are sent into the durable inbox (`send` calls of "
    "{send_batch} messages, or one call per event), then `LocalRuntime` runs until idle as `durastate serve` "
    "does (rounds of {round}: each claim takes up to the round's remaining budget of heads in one statement, "
    "least recently served first, and its messages are acked together). Sending is inside the timing. "
    "The reference is the **worker alone** (`Worker.handle` per event on the same executions and events, "
    "no queue). **harel** {version} (the other durable statechart engine on the package index) runs the same "
    "workload in a virtualenv of its own, interleaved with durastate's runs, the same event counts: "
    "`DurableRunner(execution=\"inline\")` per event (its fastest sync mode) in memory, on SQLite (its "
    "`SqliteStore`, WAL, `synchronous` set on its connection) and on PostgreSQL (a schema of its own); on the "
    "queue paths, `DistributedRunner.send` per event (it has no batch send) then its worker's `step()` until "
    "idle, store and queue on the same file or server. Every run checks each execution processed every "
    "event it was sent and ends in idle, on both engines.")


def _pct(r: tuple[float, float, float]) -> str:
    return f"{r[0] * 100:.0f} % ({r[1] * 100:.0f}–{r[2] * 100:.0f})"


def _x(r: tuple[float, float, float]) -> str:
    return f"{r[0]:.2f}× ({r[1]:.2f}–{r[2]:.2f})"


def report_md(res: dict[str, Any] | None, targets: list[list[str]]) -> str:
    """The section of ``bench/results/README.md``; appends its rows to ``targets``."""
    from bench._util import fmt_series, table

    if res is None or "error" in res:
        why = "not run" if res is None else f"failed — `{res['error']}`"
        targets.append(["Queue path ≥ 60 % of the worker alone; ≥ 2× harel on every path", "n/a", why])
        return f"_queue: {why}._"
    out = [INTRO.format(m=res["m"], send_batch=res["send_batch"], round=res["round"], version=res["peer_version"])]
    if res.get("peer_skipped"):
        out.append(f"_harel skipped: {res['peer_skipped']}._")
    for path, why in (res.get("peer_errors") or {}).items():
        out.append(f"_harel on {path} failed: {why}._")
    rows = []
    for path, r in res["paths"].items():
        if "skipped" in r:
            rows.append([path, "skipped", r["skipped"], "", "", ""])
            continue
        s = r["series"]
        peer = fmt_series(s[PEER]) if PEER in s else "—"
        if path.startswith("queue "):
            rows.append([f"**{path}**", fmt_series(s[WORKER]), f"{fmt_series(s[QUEUE])}; {_pct(r['ratio_queue'])}",
                         f"{fmt_series(s[QUEUE_EACH])}; {_pct(r['ratio_queue_each'])}", peer,
                         f"{_x(r['ratio_peer'])}; a send per event: {_x(r['ratio_peer_each'])}"
                         if "ratio_peer" in r else "—"])
            backend = path.removeprefix("queue ")
            targets.append([f"Queue path {backend}: ≥ 60 % of the worker alone (sends of {res['send_batch']})",
                            "**met**" if r["ratio_queue"][0] >= 0.6 else "**not met**",
                            f"{_pct(r['ratio_queue'])}; a send per event {_pct(r['ratio_queue_each'])}"])
        else:
            rows.append([f"**{path}**", fmt_series(s[DURASTATE]), "", "", peer,
                         _x(r["ratio_peer"]) if "ratio_peer" in r else "—"])
        if "ratio_peer" in r:
            met = "**met**" if r["ratio_peer"][0] >= 2 else "**not met**"
            targets.append([f"vs harel, {path}: durastate ≥ 2×", met, _x(r["ratio_peer"])])
    out.append(table(["path (events × repeats below)", "durastate (worker alone) events/s",
                      "queue path, sends of 32: events/s; ÷ worker alone",
                      "queue path, a send per event; ÷ worker alone",
                      "harel events/s", "durastate ÷ harel, per repeat"], rows))
    out.append("Events × repeats: " + ", ".join(f"{p} {r['events']} × {r['repeats']}"
                                                  for p, r in res["paths"].items() if "events" in r) + ".")
    b = res.get("breakdown") or {}
    if b:
        brows = []
        for backend, per in b.items():
            if backend == "events":
                continue
            for name, d in per.items():
                if backend.startswith("sqlite"):
                    detail = ", ".join(f"{k.split()[0]} {v:.2f}" for k, v in d.items() if k.endswith(" statements"))
                    brows.append([backend, name, f"{d['statements']:.2f} statements ({detail})",
                                  f"{d['wal_pages']:.2f} pages"])
                else:
                    brows.append([backend, name, f"{d['round trips']:.2f} round trips (store "
                                  f"{d['store round trips']:.2f}, queue {d['queue round trips']:.2f})",
                                  f"{d['WAL bytes']:.0f} bytes"])
        out.append(f"Per event, measured outside the timing ({b['events']} events for {res['m']} executions; "
                   "sends of 32; SQLite statements from its trace callback, PostgreSQL round trips from "
                   "libpq's protocol trace of the store's and the queue's connections, its WAL the least "
                   "of three runs, as the server's WAL position also moves with other sessions):")
        out.append(table(["backend", "contender", "requests per event", "WAL per event"], brows))
    return "\n\n".join(out)
