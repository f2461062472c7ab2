"""``python -m bench`` (= ``make bench``): every benchmark section, then ``bench/results/README.md`` + plots.

    python -m bench            # the full run (5-10 minutes on a 2-core machine)
    python -m bench --quick    # small sizes, a minute or two (also what the smoke test exercises)
    python -m bench --only engine,stores --out /tmp/results

``--only`` re-runs some sections and keeps the others' last results (from ``results.pickle`` in the
output folder, or the committed ``results.json`` on a fresh clone), so one section can be re-measured
after a change; each section records its command.

A section that cannot run (no PostgreSQL reachable, say) is reported as skipped with the reason; the
others still run.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import report

SECTIONS = ("engine", "stores", "dynamo", "dynamo_local", "growth", "queue", "telemetry")

FULL = {
    "engine": {"cycles": 800, "repeats": 9},
    "sqlite": {"n_normal": 5000, "n_full": 800, "repeats": 9},
    "postgres": {"n1": 800, "n8": 300, "repeats": 7},
    "dynamo": {"n": 10},
    "dynamo_local": {"scale": 1.0},
    "growth_pg": (10_000, 100_000),
    "growth_dynamo": (1_000, 10_000, 100_000),
    "queue": {"sizes": {"memory": 2000, "sqlite NORMAL": 2000, "sqlite FULL": 400, "postgres": 400,
                        "queue sqlite NORMAL": 2000, "queue sqlite FULL": 400, "queue postgres": 320},
              "repeats": 5},
    "telemetry": {"events": 2000, "repeats": 9},
}
QUICK = {
    "engine": {"cycles": 60, "repeats": 5},
    "sqlite": {"n_normal": 800, "n_full": 40, "repeats": 5},
    "postgres": {"n1": 60, "n8": 30, "repeats": 3},
    "dynamo": {"n": 3},
    "dynamo_local": {"scale": 0.25},
    "growth_pg": (1_000, 10_000),
    "growth_dynamo": (500, 5_000),
    "queue": {"sizes": {"memory": 400, "sqlite NORMAL": 400, "sqlite FULL": 80, "postgres": 80,
                        "queue sqlite NORMAL": 400, "queue sqlite FULL": 80, "queue postgres": 80},
              "repeats": 3},
    "telemetry": {"events": 400, "repeats": 5},
}
TINY = {  # the smoke test: every code path, no meaningful numbers
    "engine": {"cycles": 2, "repeats": 1, "warmup": False},
    "sqlite": {"n_normal": 20, "n_full": 3, "repeats": 1, "warmup": False, "wal_events": 5},
    "postgres": {"n1": 5, "n8": 3, "repeats": 1, "many": 2, "warmup": False},
    "dynamo": {"n": 1},
    "dynamo_local": {"scale": 0.05, "warmup": 10},
    "growth_pg": (50, 100),
    "growth_dynamo": (30, 60),
    "queue": {"sizes": dict.fromkeys(("memory", "sqlite NORMAL", "sqlite FULL", "postgres", "queue sqlite NORMAL",
                                      "queue sqlite FULL", "queue postgres"), 10),
              "m": 2, "repeats": 1, "warmup": False, "peer": "installed", "breakdown_events": 10},
    "telemetry": {"events": 5, "repeats": 1, "warmup": False},
}


def run(sizes: dict[str, Any], only: tuple[str, ...] = SECTIONS, log: Any = print) -> dict[str, Any]:
    """Run the selected sections; each result (or its error) lands under its name."""
    from bench import dynamo_cost, dynamo_cost_local, engine, growth, queue_path, stores, telemetry

    results: dict[str, Any] = {}

    def section(name: str, fn: Any) -> None:
        t0 = time.perf_counter()
        log(f"[bench] {name} ...")
        try:
            results[name] = fn()
        except Exception as exc:  # a section's failure is reported, not fatal to the others
            results[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            log(f"[bench] {name} FAILED: {exc}")
        results.setdefault("_seconds", {})[name] = time.perf_counter() - t0
        log(f"[bench] {name} done in {time.perf_counter() - t0:.1f}s")

    if "engine" in only:
        section("engine", lambda: engine.run(**sizes["engine"]))
    if "stores" in only:
        section("sqlite", lambda: stores.run_sqlite(**sizes["sqlite"]))
        why = stores.pg_available()
        if why is None:
            section("postgres", lambda: stores.run_postgres(**sizes["postgres"]))
        else:
            results["postgres"] = {"skipped": f"PostgreSQL not reachable at {stores.PG_DSN}: {why}"}
    if "dynamo" in only:
        section("dynamo", lambda: dynamo_cost.run(**sizes["dynamo"]))
    if "dynamo_local" in only:
        section("dynamo_local", lambda: dynamo_cost_local.run_local(**sizes["dynamo_local"]))
    if "growth" in only:
        section("growth_dynamo", lambda: growth.run_dynamo(sizes["growth_dynamo"]))
        if stores.pg_available() is None:
            section("growth_pg", lambda: growth.run_postgres(sizes["growth_pg"]))
        else:
            results["growth_pg"] = {"skipped": f"PostgreSQL not reachable at {stores.PG_DSN}"}
    if "queue" in only:
        section("queue", lambda: queue_path.run(**sizes["queue"], log=log))
    if "telemetry" in only:
        section("telemetry", lambda: telemetry.run(**sizes["telemetry"]))
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a minute or two)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"), help="output folder")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite the report and plots from the last results (results.pickle, else results.json)")
    args = ap.parse_args(argv)
    if args.render:
        out = Path(args.out)
        results = _previous(out)
        commands = sorted(set((results.get("_commands") or {}).values()))
        _write(out, results, results["_info"], commands[0].split("  (")[0] if commands else "python -m bench")
        return 0
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(only) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) {sorted(unknown)}; choose from {SECTIONS}")
    command = "python -m bench" + (" --quick" if args.quick else "") + (
        f" --only {args.only}" if set(only) != set(SECTIONS) else "")
    from bench._util import machine_info

    info = machine_info()
    t0 = time.perf_counter()
    results = run(QUICK if args.quick else FULL, only)
    results["_total_seconds"] = time.perf_counter() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = f"{command}  ({info['date (UTC)']} UTC)"
    results["_commands"] = {k: stamp for k in results if not k.startswith("_")}
    saved = out / "results.pickle"
    if set(only) != set(SECTIONS) and (saved.exists() or (out / "results.json").exists()):
        previous = _previous(out)
        for key, value in previous.items():
            if key not in results:
                results[key] = value
            elif key in ("_commands", "_seconds"):
                results[key] = {**value, **results[key]}
        info = previous.get("_info", info)
    results["_info"] = info
    saved.write_bytes(pickle.dumps(results))
    text = _write(out, results, info, command)
    print(text)
    print(f"\n[bench] wrote {out / 'README.md'} in {results['_total_seconds']:.0f}s", file=sys.stderr)
    return 0


def _previous(out: Path) -> dict[str, Any]:
    """The last results: the pickle this machine wrote, else the committed ``results.json`` (a fresh clone)."""
    saved = out / "results.pickle"
    if saved.exists():
        loaded: dict[str, Any] = pickle.loads(saved.read_bytes())
        return loaded
    restored: dict[str, Any] = report.from_jsonable(json.loads((out / "results.json").read_text(encoding="utf-8")))
    return restored


def _write(out: Path, results: dict[str, Any], info: dict[str, str], command: str) -> str:
    """The report, the plots, results.json, and (for the default folder) the README's section."""
    text = report.write(out, results, info, command)
    default_out = Path(__file__).parent / "results"
    if out.resolve() == default_out.resolve():
        docs = Path(__file__).parent.parent / "docs" / "benchmarks.md"
        if docs.parent.exists():
            summary = report.summary_md(results, "../bench/results/README.md", "../bench/results/engine.png")
            docs.write_text(summary.replace("## Benchmarks", "# Benchmarks", 1), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(report.jsonable(results), indent=1, default=str) + "\n")
    return text


if __name__ == "__main__":
    raise SystemExit(main())
