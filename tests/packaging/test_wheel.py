"""The distribution as a user gets it: build the sdist and the wheel, install the wheel into a clean venv.

Slow (a build in an isolated environment, a fresh virtualenv, two pip installs; ~30 s), so marked ``slow``;
``make test`` runs it. What it guards:

* the wheel and the sdist carry every module of every subpackage and ``py.typed``, and the web console's
  templates and static files (``durastate/ui``; the package reads no other data file at run time: the SQL
  lives in ``durastate/store/sql.py``);
* the metadata: name ``durastate``, the console script, the licence, and a core that needs only pydantic and
  PyYAML, every client library behind an extra;
* the installed wheel works away from this checkout: the core alone runs an execution on SQLite; with the
  ``cli`` extra, ``durastate --help`` and the demo run (what ``make demo`` installs).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from .support import NAME, ROOT, VERSION, run

pytestmark = pytest.mark.slow

#: What `pip install durastate` may bring: the core's two dependencies and theirs (pip/setuptools come with
#: the venv itself).
CORE_CLOSURE = {"durastate", "pydantic", "pydantic-core", "annotated-types", "typing-extensions",
                "typing-inspection", "pyyaml", "pip", "setuptools"}
#: What the `cli` extra adds on top.
CLI_CLOSURE = CORE_CLOSURE | {"typer", "rich", "click", "shellingham", "markdown-it-py", "mdurl", "pygments",
                              "annotated-doc", "colorama"}
EXTRAS = {"cli", "png", "postgres", "dynamodb", "aio-dynamodb", "aws", "cdk", "ui"}
def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def package_files() -> set[str]:
    """Every file of the package in this checkout, as a path relative to the repository root."""
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "durastate").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")}


def test_wheel_carries_the_whole_package_and_nothing_else(dists: tuple[Path, Path]) -> None:
    _, wheel = dists
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = package_files() - names
    assert not missing, f"the wheel lacks {sorted(missing)} (package-data in pyproject.toml?)"
    assert "durastate/py.typed" in names
    for package in {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "durastate").rglob("*.py")}:
        assert any(n.startswith(package + "/") for n in names), f"subpackage {package} is not in the wheel"
    tops = {n.split("/")[0] for n in names}
    assert tops == {"durastate", f"{NAME}-{VERSION}.dist-info"}, f"unexpected top-level entries: {sorted(tops)}"
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]


def test_wheel_metadata(dists: tuple[Path, Path]) -> None:
    _, wheel = dists
    with zipfile.ZipFile(wheel) as zf:
        meta = Parser().parsestr(zf.read(f"{NAME}-{VERSION}.dist-info/METADATA").decode())
        entry_points = zf.read(f"{NAME}-{VERSION}.dist-info/entry_points.txt").decode()
    assert meta["Name"] == "durastate" and meta["Version"] == VERSION
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "durastate" in (meta.get_payload() or "")  # the README is the long description
    assert "Typing :: Typed" in meta.get_all("Classifier", [])
    requires = meta.get_all("Requires-Dist", [])
    core = {normalize(re.split(r"[ \[<>=!~;(]", r, maxsplit=1)[0]) for r in requires if "extra ==" not in r}
    assert core == {"pydantic", "pyyaml", "tzdata"}, f"the core install would pull {sorted(core)}"
    # tzdata only where the system has no zone database (Windows): its marker keeps it off Linux and macOS
    [tzdata] = [Requirement(r) for r in requires if r.startswith("tzdata")]
    assert tzdata.marker is not None and not tzdata.marker.evaluate({"sys_platform": "linux"})
    assert tzdata.marker.evaluate({"sys_platform": "win32"})
    assert set(meta.get_all("Provides-Extra", [])) >= EXTRAS
    assert re.search(r"^\[console_scripts\]\s*\ndurastate\s*=\s*durastate\.cli:main\s*$", entry_points, re.M), \
        entry_points


def test_sdist_carries_the_sources(dists: tuple[Path, Path]) -> None:
    sdist, _ = dists
    prefix = f"{NAME}-{VERSION}/"
    with tarfile.open(sdist) as tf:
        names = {m.name.removeprefix(prefix) for m in tf.getmembers() if m.isfile()}
    missing = (package_files() | {"pyproject.toml", "README.md", "PKG-INFO"}) - names
    assert not missing, f"the sdist lacks {sorted(missing)}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def installed(python: Path, cwd: Path) -> set[str]:
    listing = run([python, "-m", "pip", "list", "--format=json"], cwd=cwd).stdout
    return {normalize(d["name"]) for d in json.loads(listing)}


def test_the_installed_wheel_works(dists: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = dists
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    python, pip = venv / "bin" / "python", [venv / "bin" / "python", "-m", "pip", "install", "-q"]
    constraints = ["-c", ROOT / "constraints.txt"]
    away = tmp_path / "elsewhere"  # a working directory without this checkout's durastate/ in it
    away.mkdir()

    # The core alone: pydantic and PyYAML, and enough to run an execution embedded on SQLite.
    run([*pip, *constraints, wheel], cwd=away)
    extra = installed(python, away) - CORE_CLOSURE
    assert not extra, f"`pip install durastate` also installed {sorted(extra)}"
    core_smoke = f"""
import pathlib, durastate
import durastate.engine, durastate.store, durastate.store.memory, durastate.store.sqlite
import durastate.transport, durastate.transport.sqlite, durastate.runtime, durastate.client, durastate.viz
here = pathlib.Path(durastate.__file__).parent
assert str(here).startswith({str(venv)!r}), here
assert (here / "py.typed").is_file()
assert durastate.__version__ == {VERSION!r}
examples = pathlib.Path({str(ROOT / "examples")!r})
registry = durastate.DefinitionRegistry([examples / "order.yaml", examples / "payment.yaml"])
runtime = durastate.LocalRuntime(durastate.open_store("sqlite:///" + str(pathlib.Path("core.db").resolve())),
                                 registry)
exe_id = runtime.start("order", {{"customer": "ada"}}, execution_id="o-1")
runtime.send(exe_id, durastate.Event(name="add_item", data={{"price": 3}}))
runtime.run_until_idle()
exe = runtime.get(exe_id)
assert exe is not None and exe.status == "running", exe
print("core ok")
"""
    assert "core ok" in run([python, "-c", core_smoke], cwd=away).stdout

    # With the `cli` extra (what `make demo` installs): the command and the demo, nothing else pulled in.
    run([*pip, *constraints, f"{wheel}[cli]"], cwd=away)
    extra = installed(python, away) - CLI_CLOSURE
    assert not extra, f"`pip install durastate[cli]` also installed {sorted(extra)}"
    assert "Usage: durastate" in run([venv / "bin" / "durastate", "--help"], cwd=away).stdout
    assert run([venv / "bin" / "durastate", "--version"], cwd=away).stdout.strip() == f"durastate {VERSION}"
    shutil.copytree(ROOT / "examples", away / "examples")  # the demo reads the checkout's examples/
    demo = run([python, "-m", "durastate.demo"], cwd=away, timeout=180).stdout
    for line in ("✓ o-1001: fulfilled", "✓ o-1002: payment_failed", "✓ o-1003: payment_failed",
                 "✓ o-1004: abandoned"):
        assert line in demo, demo
