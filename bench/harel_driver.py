"""Drives the other durable-statechart engine (the ``harel`` package) through chart 1, in its own virtualenv.

Run by ``bench/harel_peer.py`` with that virtualenv's Python — never imported by durastate or the rest of
``bench`` (it needs only the standard library and ``harel``). It reads one JSON line of settings, builds
the contender, answers ``ready``, then measures one batch per ``run`` line it reads and answers each with
one JSON line (``{"rate": events_per_second}`` or ``{"error": "..."}``); ``quit`` ends it.

Every batch is verified: each execution must have processed exactly the events sent to it (harel's
``processed_events`` counter) and be back in ``Idle`` — an engine that dropped events fails instead of
winning.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
import traceback
from typing import Any

CHART1 = """
event Go {}
event Toggle {}
event Stop {}

machine toggle {
  initial Idle
  state Idle {}
  state Active {
    no history
    initial A
    state A {}
    state B {}
    from A to B on Toggle
    from B to A on Toggle
  }
  from Idle to Active on Go
  from Active to Idle on Stop
}
"""
CYCLE = ["Go", "Toggle", "Toggle", "Toggle", "Stop"]
"""Chart 1's cycle (durastate's go, toggle x3, stop): ends where it started, in Idle."""


def _sqlite_pragma(store_or_transport: Any, sync: str) -> None:
    """harel's SQLite classes take no ``synchronous`` option: set it on their connection."""
    conn: sqlite3.Connection = store_or_transport._conn
    conn.execute(f"PRAGMA synchronous = {sync}")


def _pg_connect(dsn: str, schema: str) -> Any:
    import psycopg

    conn = psycopg.connect(dsn, options=f"-c search_path={schema}")
    return conn


class Contender:
    def __init__(self, cfg: dict[str, Any]) -> None:
        from harel import DictStore, DurableRunner, definition_from_dsl

        self.cfg = cfg
        self.kind: str = cfg["kind"]
        self.n: int = cfg["n"]
        self.m: int = cfg.get("m", 1)
        self.defn = definition_from_dsl(CHART1, "toggle")
        defs = {self.defn.id: self.defn}
        self.processed: dict[str, int] = {}
        if self.kind in ("memory", "sqlite", "postgres"):
            if self.kind == "memory":
                store: Any = DictStore()
            elif self.kind == "sqlite":
                from harel import SqliteStore

                store = SqliteStore(cfg["path"])
                _sqlite_pragma(store, cfg["sync"])
            else:
                from harel.engine.store.postgres import PostgresStore

                store = PostgresStore(_pg_connect(cfg["dsn"], cfg["schema"]))
            self.store = store
            # inline: in this thread, no event loop — harel's fastest sync mode
            self.runner = DurableRunner(store, defs, execution="inline")
            exe = self.runner.create(self.defn.id)
            self.ids = [exe.id]
            self.processed[exe.id] = exe.processed_events
        else:  # the queue path: a sender publishes, a worker claims, applies and acks
            from harel.engine.distributed import DistributedRunner

            if self.kind == "queue-sqlite":
                from harel import SqliteStore
                from harel.engine.transport.sqlite import SqliteTransport

                store = SqliteStore(cfg["path"])
                transport: Any = SqliteTransport(cfg["path"])
                _sqlite_pragma(store, cfg["sync"])
                _sqlite_pragma(transport, cfg["sync"])
            else:
                from harel.engine.store.postgres import PostgresStore
                from harel.engine.transport.postgres import PostgresTransport

                store = PostgresStore(_pg_connect(cfg["dsn"], cfg["schema"]))
                transport = PostgresTransport(_pg_connect(cfg["dsn"], cfg["schema"]))
            self.store = store
            self.runner = DistributedRunner(store, transport, defs, execution="inline")
            self.worker = self.runner.worker(visibility=30.0)
            self.ids = [self.runner.create(self.defn.id).id for _ in range(self.m)]
            while self.worker.step():
                pass
            for eid in self.ids:
                self.processed[eid] = self._load(eid).processed_events

    def _load(self, eid: str) -> Any:
        exe = self.store.load(eid)
        if exe is None:
            raise AssertionError(f"execution {eid} missing")
        return exe

    def run(self) -> float:
        from harel import Event

        per = self.n // len(self.ids)
        seq = (CYCLE * (per // len(CYCLE) + 1))[:per]
        if self.kind in ("memory", "sqlite", "postgres"):
            eid = self.ids[0]
            t0 = time.perf_counter()
            for kind in seq:
                self.runner.process(eid, Event(kind=kind))
            elapsed = time.perf_counter() - t0
        else:
            t0 = time.perf_counter()
            for kind in seq:  # one event for each execution in turn, as independent senders would
                for eid in self.ids:
                    self.runner.send(eid, Event(kind=kind))
            while self.worker.step():
                pass
            elapsed = time.perf_counter() - t0
        for eid in self.ids:
            exe = self._load(eid)
            done = exe.processed_events - self.processed[eid]
            if done != per or exe.active_path != "Idle":
                raise AssertionError(f"harel {self.kind}: {eid} processed {done} of {per} events, ends in "
                                     f"{exe.active_path}")
            self.processed[eid] = exe.processed_events
        return per * len(self.ids) / elapsed


def main() -> int:
    cfg = json.loads(sys.stdin.readline())
    try:
        contender = Contender(cfg)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}),
              flush=True)
        return 1
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        try:
            print(json.dumps({"rate": contender.run()}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
