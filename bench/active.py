# ruff: noqa: RUF001  (the en dashes and multiplication signs are the report's typography)
"""Executions active at once: does one worker's cost per event grow with how many executions it takes turns on?

    python -m bench.active            # 64, 65, 100, 1,000 and 10,000 executions; 3 repeats
    python -m bench.active --quick    # 1 repeat, fewer events

A worker on SQLite (NORMAL, a temp file per run) applies ``inc`` events round-robin over N executions started
beforehand (the starts are not timed), so every next event of an execution comes N events after its last one.
Two contenders in the same run: the worker as it ships (kept copies bounded by a memory budget, ``keep_bytes``)
and ``keep_committed=64`` (a count of 64, the bound kept copies had before the budget). Each is reported as a
ratio: its time per event at N over its own time per event at 64 executions, the median of the repeats — a
ratio, not a rate, because the machine is shared. Time is the process's CPU time (``time.process_time``:
the worker's own work and the SQLite calls it makes, not the time it waits for a core on a loaded machine;
NORMAL syncs no file per commit). A cliff shows as the ratio jumping past 64.

Writes ``bench/results/active.json`` and ``bench/results/active.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._util import machine_info, table
from durastate.engine import DefinitionRegistry, Event
from durastate.runtime.worker import Worker
from durastate.store import SqliteStore

SIZES = (64, 65, 100, 1_000, 10_000)
BASE = 64
MODES: dict[str, dict[str, Any]] = {"memory budget (default)": {}, "keep_committed=64 (before)": {"keep_committed": 64}}
COUNTER = {
    "id": "counter", "initial": "idle", "context": {"count": 0},
    "states": {"idle": {"on": {"inc": {"actions": [{"assign": {"count": {"add": ["$context.count", 1]}}}]}}}},
}


def per_event(n: int, events: int, options: dict[str, Any]) -> float:
    """CPU seconds per event for ``events`` events round-robin over ``n`` executions started beforehand."""
    registry = DefinitionRegistry()
    registry.register(COUNTER)
    with tempfile.TemporaryDirectory(prefix="durastate-bench-active-") as tmp, \
            SqliteStore(Path(tmp) / "active.db") as store:
        w = Worker(store, registry, lambda: 1_700_000_000.0, **options)
        ids = [f"x{i}" for i in range(n)]
        for eid in ids:
            w.handle(eid, Event(id=f"{eid}:start", name="durastate.start", data={"definition_id": "counter"}))
        rounds = max(1, events // n)
        t0 = time.process_time()
        for r in range(rounds):
            for eid in ids:
                w.handle(eid, Event(id=f"{eid}:{r}", name="inc"))
        return (time.process_time() - t0) / (rounds * n)


def run(events: int = 10_000, repeats: int = 3, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    times: dict[str, dict[int, list[float]]] = {m: {n: [] for n in sizes} for m in MODES}
    for _ in range(repeats):  # the modes and sizes interleaved, so a noisy moment hits them all
        for n in sizes:
            for mode, options in MODES.items():
                times[mode][n].append(per_event(n, events, options))
    ratios = {mode: {n: [t / base for t, base in zip(by_n[n], by_n[BASE], strict=True)] for n in sizes}
              for mode, by_n in times.items()}
    return {"events": events, "repeats": repeats, "sizes": list(sizes),
            "ratio_to_64": {m: {str(n): statistics.median(r[n]) for n in sizes} for m, r in ratios.items()},
            "ratio_range": {m: {str(n): [min(r[n]), max(r[n])] for n in sizes} for m, r in ratios.items()}}


def markdown(res: dict[str, Any], command: str, info: dict[str, str]) -> str:
    sizes = res["sizes"]
    rows = [[mode] + [f"{res['ratio_to_64'][mode][str(n)]:.2f}× ({lo:.2f}–{hi:.2f})"
                      for n in sizes for lo, hi in [res["ratio_range"][mode][str(n)]]]
            for mode in res["ratio_to_64"]]
    return (f"# Executions active at once: time per event on one worker, ÷ its time at 64\n\n"
            f"`{command}` ({info['date (UTC)']} UTC; {info['CPU']}, {info['cores']} cores, load "
            f"{info['load average at start (1/5/15 min)']}; SQLite {info['SQLite']}) — SQLite NORMAL, `inc` events "
            f"round-robin over N executions started beforehand, about {res['events']:,} events per run, CPU time "
            f"per event, median of "
            f"{res['repeats']} (range). Goal: no cliff up to 10,000 active executions.\n\n"
            + table(["worker"] + [f"{n:,} active" for n in sizes], rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.active", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repeat, fewer events")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"), help="output folder")
    args = ap.parse_args(argv)
    info = machine_info()
    res = run(events=5_000, repeats=1) if args.quick else run()
    command = "python -m bench.active" + (" --quick" if args.quick else "")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "active.json").write_text(json.dumps({"command": command, "info": info, **res}, indent=1) + "\n",
                                     encoding="utf-8")
    text = markdown(res, command, info)
    (out / "active.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
