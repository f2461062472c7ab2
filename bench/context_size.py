# ruff: noqa: RUF001, RUF002  (the en dashes and multiplication signs are the report's typography)
"""Context size: does an event cost what it changes, or what the execution holds?

    python -m bench.context_size            # memory, SQLite and PostgreSQL; 5 repeats
    python -m bench.context_size --quick    # 1 repeat, fewer events
    python -m bench.context_size --stores memory,sqlite

A worker applies ``ping`` events, one after another, to one execution whose context holds a ``blob`` of about
1 KB or about 100 KB (many small keys, as an order's line items would be) that the chart never reads or
writes: the event only moves between two states. Each store runs the worker as it ships. Each row is a
ratio — the time per event with the 100 KB context over the time per event with the 1 KB context, measured
interleaved in the same repeat (the machine is shared, so only ratios count) — the median of the repeats
(range). Time is the process's CPU time (``time.process_time``: the worker's own work and the store calls it
makes in this process; on PostgreSQL the server's work on the row is not counted, see the wall-clock row).
Goal: ≤ 1.5× on every store.

Writes ``bench/results/context_size.json`` and ``bench/results/context_size.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._util import machine_info, table
from durastate.engine import DefinitionRegistry, Event
from durastate.runtime.worker import Worker

SIZES = (1_000, 100_000)
STORES = ("memory", "sqlite", "postgres")
PINGPONG = {
    "id": "pingpong", "initial": "a", "context": {},
    "states": {"a": {"on": {"ping": "b"}}, "b": {"on": {"ping": "a"}}},
}


def blob(size: int) -> dict[str, Any]:
    """About ``size`` bytes of JSON: items of ~100 bytes each, under one key the chart never touches."""
    item = {"sku": "SKU-0000000", "qty": 1, "price": 12.5, "note": "x" * 40}
    per = len(json.dumps(item)) + 12
    return {f"line{i:05d}": dict(item, sku=f"SKU-{i:07d}") for i in range(max(1, size // per))}


@contextmanager
def open_store(kind: str) -> Iterator[Any]:
    if kind == "memory":
        from durastate.store import DictStore

        yield DictStore()
    elif kind == "sqlite":
        from durastate.store import SqliteStore

        with tempfile.TemporaryDirectory(prefix="durastate-bench-context-") as tmp, \
                SqliteStore(Path(tmp) / "context.db") as store:
            yield store
    elif kind == "postgres":
        import psycopg

        from bench.stores import PG_DSN
        from durastate.store.postgres.sync import PostgresStore

        schema = f"durastate_bench_context_{os.getpid()}"  # runs side by side do not share it
        with psycopg.connect(PG_DSN, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        store = PostgresStore.from_dsn(PG_DSN, schema=schema)
        try:
            yield store
        finally:
            store.close()
            with psycopg.connect(PG_DSN, autocommit=True) as c:
                c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        raise ValueError(kind)


def per_event(kind: str, size: int, events: int, clock: Callable[[], float] = time.process_time) -> float:
    """Seconds (of ``clock``) per event for ``events`` pings on one execution with a context of ``size`` bytes."""
    registry = DefinitionRegistry()
    registry.register(PINGPONG)
    with open_store(kind) as store:
        w = Worker(store, registry, lambda: 1_700_000_000.0)
        w.handle("x", Event(id="x:start", name="durastate.start",
                            data={"definition_id": "pingpong", "context": {"blob": blob(size)}}))
        for i in range(min(20, events)):  # warm: the kept copy, the statements' caches
            w.handle("x", Event(id=f"x:w{i}", name="ping"))
        t0 = clock()
        for i in range(events):
            w.handle("x", Event(id=f"x:{i}", name="ping"))
        return (clock() - t0) / events


def run(events: dict[str, int] | None = None, repeats: int = 5, stores: tuple[str, ...] = STORES) -> dict[str, Any]:
    events = {"memory": 2000, "sqlite": 1000, "postgres": 300, **(events or {})}
    cpu: dict[str, dict[int, list[float]]] = {k: {s: [] for s in SIZES} for k in stores}
    wall: dict[str, dict[int, list[float]]] = {k: {s: [] for s in SIZES} for k in stores}
    for _ in range(repeats):  # the stores and sizes interleaved, so a noisy moment hits them all
        for kind in stores:
            for size in SIZES:
                cpu[kind][size].append(per_event(kind, size, events[kind]))
                wall[kind][size].append(per_event(kind, size, events[kind], time.perf_counter))

    def summary(times: dict[str, dict[int, list[float]]]) -> dict[str, Any]:
        big, small = SIZES[-1], SIZES[0]
        ratios = {k: [b / s for b, s in zip(t[big], t[small], strict=True)] for k, t in times.items()}
        return {k: {"ratio": statistics.median(r), "range": [min(r), max(r)],
                    "us_per_event": {str(s): statistics.median(times[k][s]) * 1e6 for s in SIZES},
                    "us_per_kb": (statistics.median(times[k][big]) - statistics.median(times[k][small]))
                    * 1e6 / ((big - small) / 1000)}
                for k, r in ratios.items()}

    return {"events": events, "repeats": repeats, "sizes": list(SIZES), "cpu": summary(cpu), "wall": summary(wall)}


def markdown(res: dict[str, Any], command: str, info: dict[str, str]) -> str:
    def rows(which: str) -> list[list[str]]:
        out = []
        for kind, r in res[which].items():
            us = r["us_per_event"]
            out.append([kind, f"{r['ratio']:.2f}× ({r['range'][0]:.2f}–{r['range'][1]:.2f})",
                        f"{us[str(SIZES[0])]:.0f} µs", f"{us[str(SIZES[-1])]:.0f} µs", f"{r['us_per_kb']:.2f} µs"])
        return out

    head = ["store", "100 KB ÷ 1 KB", "1 KB context", "100 KB context", "per extra KB"]
    return (f"# Context size: time per event, 100 KB context ÷ 1 KB, the chart never reading it\n\n"
            f"`{command}` ({info['date (UTC)']} UTC; {info['CPU']}, {info['cores']} cores, load "
            f"{info['load average at start (1/5/15 min)']}; SQLite {info['SQLite']}) — the worker as it ships, "
            f"one execution, `ping` events moving between two states; median of {res['repeats']} interleaved "
            f"repeats (range). Goal: ≤ 1.5× on every store.\n\n"
            f"CPU time of this process per event (the worker and the store's client side):\n\n"
            + table(head, rows("cpu"))
            + "\n\nWall-clock time per event (includes the PostgreSQL server's work and a loaded machine's waits):\n\n"
            + table(head, rows("wall")) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.context_size", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repeat, fewer events")
    ap.add_argument("--stores", default=",".join(STORES), help=f"comma-separated subset of {STORES}")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"), help="output folder")
    args = ap.parse_args(argv)
    stores = tuple(s.strip() for s in args.stores.split(",") if s.strip())
    info = machine_info()
    res = (run({"memory": 300, "sqlite": 200, "postgres": 60}, repeats=1, stores=stores) if args.quick
           else run(stores=stores))
    command = "python -m bench.context_size" + (" --quick" if args.quick else "") + (
        f" --stores {args.stores}" if set(stores) != set(STORES) else "")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "context_size.json").write_text(json.dumps({"command": command, "info": info, **res}, indent=1) + "\n",
                                           encoding="utf-8")
    text = markdown(res, command, info)
    (out / "context_size.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
