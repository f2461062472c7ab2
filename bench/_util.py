# ruff: noqa: RUF001, RUF002  (the en dashes and multiplication signs are the report's typography)
"""Shared helpers of the benchmarks: interleaved timing, medians and ratios, machine description.

The machine these run on is shared and noisy, so nothing here trusts one timing: every section runs its
contenders *interleaved* within each repeat (A, B, C, then B, C, A, ...), reports the median and the
min–max over repeats, and computes ratios *per repeat* (both sides measured within seconds of each other)
before taking their median.
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

Runner = Callable[[], float]
"""Runs one measured batch and returns its rate (events per second)."""


@dataclass
class Series:
    """Rates measured for one contender, one per repeat."""

    name: str
    rates: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    @property
    def lo(self) -> float:
        return min(self.rates) if self.rates else 0.0

    @property
    def hi(self) -> float:
        return max(self.rates) if self.rates else 0.0


def interleave(contenders: dict[str, Runner], repeats: int, warmup: bool = True) -> dict[str, Series]:
    """Run every contender once per repeat, rotating the order each repeat; rates per contender."""
    names = list(contenders)
    out = {n: Series(n) for n in names}
    if warmup:
        for n in names:
            contenders[n]()
    for r in range(repeats):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            gc.collect()
            out[n].rates.append(contenders[n]())
    return out


def paired_ratio(a: Series, b: Series) -> tuple[float, float, float]:
    """Median, min and max of a/b over repeats (each pair measured in the same repeat)."""
    ratios = [x / y for x, y in zip(a.rates, b.rates, strict=True) if y > 0]
    if not ratios:
        return 0.0, 0.0, 0.0
    return statistics.median(ratios), min(ratios), max(ratios)


def rate(n: int, fn: Callable[[], object]) -> float:
    """Events per second of ``fn`` doing ``n`` events."""
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    return n / dt if dt > 0 else float("inf")


def fmt_rate(x: float) -> str:
    if x >= 100_000:
        return f"{x / 1000:,.0f}k"
    if x >= 10_000:
        return f"{x / 1000:,.1f}k"
    return f"{x:,.0f}"


def fmt_series(s: Series) -> str:
    return f"{fmt_rate(s.median)} ({fmt_rate(s.lo)}–{fmt_rate(s.hi)})"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


PACKAGES = ("durastate", "pydantic", "pydantic-core", "transitions", "python-statemachine", "sismic", "psycopg",
            "boto3", "botocore", "moto", "matplotlib")


def machine_info() -> dict[str, str]:
    info = {
        "date (UTC)": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "CPU": cpu_model(),
        "cores": str(os.cpu_count()),
        "load average at start (1/5/15 min)": load_average(),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0] + f" ({platform.python_implementation()})",
    }
    sqlite_version = __import__("sqlite3").sqlite_version
    info["SQLite"] = sqlite_version
    for pkg in PACKAGES:
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[pkg] = "not installed"
    return info


def measure_with_package(code: str, module: str, call: str) -> dict[str, Any]:
    """``bench.<module>.<call>`` (a JSON-returning measurement) in a subprocess whose ``durastate`` is the
    package in the checkout ``code``: the before half of a before/after, with this bench driving both."""
    package = Path(code).resolve() / "durastate"
    if not (package / "__init__.py").is_file():
        raise FileNotFoundError(f"no durastate package in {code}")
    with tempfile.TemporaryDirectory() as shim:
        os.symlink(package, Path(shim) / "durastate")
        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([shim, str(root)])}
        script = f"import json, sys; from bench import {module} as d; json.dump(d.{call}, sys.stdout)"
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                              check=False, cwd=shim)
    if proc.returncode != 0:
        raise RuntimeError(f"the baseline run failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result
