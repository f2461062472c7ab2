"""Production code never imports the dev stack: ``durastate.devstack`` emulates Lambda, it does not run in it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = [ROOT / "durastate" / "runtime", ROOT / "durastate" / "functions"]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_production_module_imports_the_dev_stack() -> None:
    files = [f for folder in PRODUCTION for f in sorted(folder.rglob("*.py"))]
    assert files
    offenders = {str(f.relative_to(ROOT)): sorted(n for n in _imports(f) if n.startswith("durastate.devstack"))
                 for f in files}
    assert {f: n for f, n in offenders.items() if n} == {}


def test_importing_the_runtime_loads_nothing_of_the_dev_stack() -> None:
    modules = sorted(f"durastate.runtime.{p.stem}" for p in (ROOT / "durastate" / "runtime").glob("*.py")
                     if p.stem != "__init__")
    code = ("import importlib, sys\n"
            f"for m in {['durastate.runtime', *modules]!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.startswith('durastate.devstack')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"
