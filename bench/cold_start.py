"""Cold import time of each Lambda handler, from a layer built for this machine.

What a cold start pays before the first event: importing the handler module (Powertools, pydantic, the
engine, the runtime). Measured as Lambda would load it: a fresh interpreter with no site packages and no
byte-code writes (``-S -B``: ``/opt`` is read-only in Lambda, so a layer without ``.pyc`` files compiles
every module on every cold start) whose ``sys.path`` holds only the layer, the handlers' folder and the
runtime-provided boto3. CPU time, not wall time, so that a busy machine does not blur it; the median of a
few runs per handler.

``python -m bench.cold_start [LAYER_PYTHON_DIR FUNCTIONS_DIR]``: without arguments it builds (or reuses)
the layer for this machine's architecture and Python version with ``durastate.cdk.layer`` (byte code
included, as on Lambda when the build runs on the target's version) and measures ``durastate/functions/``.
"""

from __future__ import annotations

import importlib.util
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HANDLERS = ("worker", "relay", "sweeper")
ROOT = Path(__file__).resolve().parent.parent


def measure(layer_python: Path, functions: Path, repeats: int = 7) -> dict[str, dict[str, float]]:
    """Median / min / max CPU milliseconds of ``import <handler>`` for each handler."""
    spec = importlib.util.find_spec("boto3")
    if spec is None or spec.origin is None:
        raise RuntimeError("boto3 is needed (the Lambda runtime provides it; here: pip install boto3)")
    boto3_home = Path(spec.origin).parents[1]
    out: dict[str, dict[str, float]] = {}
    for handler in HANDLERS:
        code = (f"import sys, time; sys.path[:0] = [{str(layer_python)!r}, {str(functions)!r}]; "
                f"sys.path.append({str(boto3_home)!r}); t = time.process_time(); import {handler}; "
                "print((time.process_time() - t) * 1000)")
        runs = [float(subprocess.run([sys.executable, "-S", "-B", "-c", code], capture_output=True, text=True,
                                     check=True, cwd=str(layer_python)).stdout) for _ in range(repeats)]
        out[handler] = {"median_ms": statistics.median(runs), "min_ms": min(runs), "max_ms": max(runs)}
    return out


def main(argv: list[str]) -> int:
    if argv:
        layer, functions = Path(argv[0]), Path(argv[1])
    else:
        sys.path.insert(0, str(ROOT))
        from durastate.cdk.layer import build_layer

        arch = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine()]
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        layer = build_layer(architecture=arch, python_version=version) / "python"
        functions = ROOT / "durastate" / "functions"
    for handler, t in measure(layer, functions).items():
        print(f"{handler:8s} {t['median_ms']:6.0f} ms CPU (min {t['min_ms']:.0f}, max {t['max_ms']:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
