"""Build the Lambda layer that carries the ``durastate`` engine and its runtime dependencies — without Docker.

Why no Docker: the layer's only compiled dependencies (pydantic-core, PyYAML, wrapt) publish manylinux wheels
for both Lambda architectures, so ``pip`` can fetch the right binaries for the *target* platform
(``--platform manylinux… --python-version 3.12 --only-binary=:all:``) from any host. That keeps
``cdk synth`` working on machines without a container runtime.

Why it is reproducible: every distribution is pinned to the exact version in ``layer-pins.txt`` (shipped
next to this module; equal to the project's ``constraints.txt`` pins) and installed with ``--no-deps`` from
an explicit closure (no resolver decisions), and without the console scripts pip would write with this
machine's interpreter path. CDK zips assets with
fixed timestamps, so the same inputs give the same layer.

Why it ships byte code, and only what the handlers import (cold starts): ``/opt`` is read-only in Lambda,
so a layer without ``.pyc`` files compiles every module it imports from source on *every* cold start.
When the build runs on the layer's Python version, every module is compiled with
``PycInvalidationMode.UNCHECKED_HASH``: the ``.pyc`` holds a hash of its source instead of a build-time
mtime (reproducible), and the importer never re-checks it (no source read at import). The sources stay
next to it, for tracebacks. A build on another Python version cannot make byte code the target would
load, so it ships none (the cache key says which). And the ``durastate`` parts no handler imports — the
CLI, the dev stack, the web console, the pictures, the SQL stores and queues
(:data:`DURASTATE_EXCLUDED`) — are left out: less to unzip and nothing to scan.

Why it builds from the installed package: a user's own CDK app (``pip install "durastate[cdk]"``) has no
checkout. The ``durastate`` files come from the folder that holds the imported package (a checkout's root
or ``site-packages``), the pins from ``layer-pins.txt``, the wheels of the closure from the package index.

Why it is cached: downloaded wheels live in ``<build root>/wheels/`` and each finished layer in
``<build root>/layer-<arch>-<hash>/``, keyed by a hash of the pins, the platform and the ``durastate``
sources. A second build — a second ``cdk synth``, a test run — reuses them and needs no network. The build
root is ``DURASTATE_CDK_BUILD_DIR`` if set, else ``layers/build`` in a checkout, else the user's cache
(``$XDG_CACHE_HOME/durastate/cdk``, default ``~/.cache/durastate/cdk``): see :func:`default_build_root`.

boto3/botocore are deliberately *not* in the layer: the Lambda Python runtime ships them, and bundling
them would add ~80 MB unzipped for no behaviour ``durastate`` needs from a newer release.

Usage: ``python -m durastate.cdk.layer [--arch arm64|x86_64] [--python 3.12]`` prints the layer directory
(the folder that contains ``python/``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The complete closure of what ``durastate`` needs at run time in Lambda (besides the runtime's boto3).
#: Kept explicit so the build never depends on a resolver; ``tests/infra`` checks it is closed.
LAYER_DISTRIBUTIONS: tuple[str, ...] = (
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-extensions",
    "typing-inspection",
    "pyyaml",
    "tzdata",
    "aws-lambda-powertools",
    "jmespath",
    "aws-xray-sdk",
    "wrapt",
)

#: Parts of the ``durastate`` package no Lambda handler imports (paths relative to the package): the CLI and
#: the dev stack (they need typer/rich and moto, which the layer does not carry), the web console, the
#: pictures, the demo, test helpers, and the SQLite/PostgreSQL stores, queues and plumbing. The importers
#: ship: the handlers load a definitions folder's ``.scxml`` and ``.xstate.json`` files through them (imported
#: only when the folder holds one, so they cost a folder of YAML no cold-start time).
#: ``tests/infra/test_layer.py`` imports the four handlers and the AWS runtime's lazy imports from a layer.
DURASTATE_EXCLUDED: tuple[str, ...] = (
    "cli/", "devstack/", "ui/", "render/", "testing/", "db/", "store/postgres/", "store/sqlite/",
    "store/sql.py", "transport/postgres.py", "transport/sqlite.py", "demo.py", "viz.py",
    "cdk/", "functions/",
)

#: Distributions the AWS Lambda Python runtime already provides (boto3 and its dependencies).
RUNTIME_PROVIDED: tuple[str, ...] = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3",
                                     "python-dateutil", "six")

_MACHINE = {"arm64": "aarch64", "x86_64": "x86_64"}
#: Lambda's Python 3.12+ runtimes run on Amazon Linux 2023 (glibc 2.34): any of these wheels loads there.
_MANYLINUX = ("manylinux2014", "manylinux_2_28", "manylinux_2_34")
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds the ``durastate`` package: a checkout's root, or ``site-packages``."""
PINS_FILE = Path(__file__).resolve().with_name("layer-pins.txt")
"""The layer's pinned closure (``name==version`` lines), shipped with the package."""
BUILD_DIR_ENV = "DURASTATE_CDK_BUILD_DIR"


class LayerBuildError(RuntimeError):
    """The layer could not be built; the message says what to do."""


@dataclass(frozen=True)
class LayerSpec:
    """What a layer build depends on: the inputs of its cache key."""

    architecture: str
    python_version: str
    pins: tuple[tuple[str, str], ...]
    sources: tuple[tuple[str, str], ...]  # (relative path, sha256) of every durastate file the layer ships
    durastate_version: str
    bytecode: bool = False
    """Whether the layer ships ``.pyc`` files (only a build on the layer's own Python version can)."""

    @property
    def digest(self) -> str:
        payload = json.dumps(
            {
                "architecture": self.architecture,
                "python": self.python_version,
                "pins": self.pins,
                "sources": self.sources,
                "version": self.durastate_version,
                "manylinux": _MANYLINUX,
                "bytecode": self.bytecode,
                "excluded": DURASTATE_EXCLUDED,
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    @property
    def platforms(self) -> list[str]:
        machine = _MACHINE[self.architecture]
        return [f"{tag}_{machine}" for tag in _MANYLINUX]


def normalize(name: str) -> str:
    """PEP 503 name normalisation (``PyYAML`` and ``pyyaml`` are one distribution)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(constraints: Path, names: Iterable[str] = LAYER_DISTRIBUTIONS) -> tuple[tuple[str, str], ...]:
    """Exact versions for ``names`` from a pip constraints file (``name==version`` lines)."""
    found: dict[str, str] = {}
    for raw in constraints.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if "==" not in line:
            continue
        name, version = line.split("==", 1)
        found[normalize(name.split("[", 1)[0])] = version.strip()
    wanted = [normalize(n) for n in names]
    missing = [n for n in wanted if n not in found]
    if missing:
        raise LayerBuildError(f"{constraints} pins no version for {', '.join(missing)}; add `name==version` "
                              "lines so the layer is reproducible")
    return tuple((n, found[n]) for n in wanted)


def durastate_sources(project_root: Path) -> tuple[tuple[str, str], ...]:
    """Every file of the ``durastate`` package the layer ships (no caches, nothing of
    :data:`DURASTATE_EXCLUDED`), with its content hash, in a stable order."""
    package = project_root / "durastate"
    if not (package / "__init__.py").is_file():
        raise LayerBuildError(f"no durastate package at {package}")
    out = []
    for path in sorted(package.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        inside = path.relative_to(package).as_posix()
        if any(inside == x or (x.endswith("/") and inside.startswith(x)) for x in DURASTATE_EXCLUDED):
            continue
        out.append((path.relative_to(project_root).as_posix(), hashlib.sha256(path.read_bytes()).hexdigest()))
    return tuple(out)


def durastate_version(project_root: Path) -> str:
    """The package's ``__version__``, read from its ``__init__.py`` (this module imports nothing of it)."""
    text = (project_root / "durastate" / "__init__.py").read_text()
    found = re.search(r'(?m)^__version__\s*=\s*"([^"]+)"', text)
    if found is None:
        raise LayerBuildError(f"no __version__ in {project_root / 'durastate' / '__init__.py'}")
    return found.group(1)


def default_build_root(project_root: Path = _PROJECT_ROOT) -> Path:
    """Where layers and function code are built and cached (see the module docstring)."""
    if os.environ.get(BUILD_DIR_ENV):
        return Path(os.environ[BUILD_DIR_ENV])
    if (project_root / "pyproject.toml").is_file() and (project_root / "durastate" / "cdk").is_dir():
        return project_root / "layers" / "build"  # a checkout: next to the sources, ignored by git
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "durastate" / "cdk"


def layer_spec(project_root: Path = _PROJECT_ROOT, architecture: str = "arm64",
               python_version: str = "3.12", pins_file: Path = PINS_FILE) -> LayerSpec:
    if architecture not in _MACHINE:
        raise LayerBuildError(f"architecture must be one of {sorted(_MACHINE)}, not {architecture!r}")
    return LayerSpec(
        architecture=architecture,
        python_version=python_version,
        pins=read_pins(pins_file),
        sources=durastate_sources(project_root),
        durastate_version=durastate_version(project_root),
        bytecode=python_version == f"{sys.version_info.major}.{sys.version_info.minor}",
    )


def _wheel_present(wheels: Path, name: str, version: str) -> bool:
    stem = re.sub(r"[-.]+", "_", name)
    return any(normalize(p.name.split("-", 1)[0]) == normalize(stem) and p.name.split("-")[1] == version
               for p in wheels.glob("*.whl"))


def _pip(args: Sequence[str]) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LayerBuildError(
            "pip failed while building the durastate layer (the first build downloads wheels from PyPI; "
            "run `python -m durastate.cdk.layer` once while online, later builds reuse the cache):\n"
            f"$ {' '.join(cmd)}\n{proc.stderr.strip()[-3000:]}"
        )


def _platform_args(spec: LayerSpec) -> list[str]:
    args = ["--only-binary=:all:", "--no-deps", "--implementation", "cp",
            "--python-version", spec.python_version]
    for platform in spec.platforms:
        args += ["--platform", platform]
    return args


def ensure_wheels(spec: LayerSpec, build_root: Path) -> Path:
    """Download the pinned wheels for the target platform once; later calls find them on disk."""
    wheels = build_root / "wheels" / f"cp{spec.python_version.replace('.', '')}-{spec.architecture}"
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}=={v}" for n, v in spec.pins if not _wheel_present(wheels, n, v)]
    if missing:
        _pip(["download", "--quiet", "--dest", str(wheels), *_platform_args(spec), *missing])
    return wheels


def _copy_durastate(project_root: Path, spec: LayerSpec, site: Path) -> None:
    """The package is pure Python: copy its files, plus a minimal dist-info so metadata lookups work."""
    for rel, _ in spec.sources:
        dest = site / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(project_root / rel, dest)
    info = site / f"durastate-{spec.durastate_version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: durastate\nVersion: {spec.durastate_version}\n")
    (info / "INSTALLER").write_text("durastate-layer-builder\n")
    (info / "top_level.txt").write_text("durastate\n")


def build_layer(project_root: Path = _PROJECT_ROOT, architecture: str = "arm64", python_version: str = "3.12",
                build_root: Path | None = None) -> Path:
    """Build (or reuse) the layer and return the directory holding its ``python/`` folder."""
    spec = layer_spec(project_root, architecture, python_version)
    root = build_root or default_build_root(project_root)
    out = root / f"layer-{architecture}-{spec.digest}"
    if (out / ".complete").is_file():
        return out
    wheels = ensure_wheels(spec, root)
    staging = root / f".staging-{spec.digest}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    site = staging / "python"
    _pip(["install", "--quiet", "--no-index", "--find-links", str(wheels), "--no-compile",
          "--target", str(site), *_platform_args(spec), *(f"{n}=={v}" for n, v in spec.pins)])
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts point at this machine's python
    _copy_durastate(project_root, spec, site)
    if spec.bytecode:
        _compile(site)
    (staging / ".complete").write_text(spec.digest + "\n")
    try:
        staging.rename(out)
    except OSError:  # a concurrent build finished first: its result is identical
        shutil.rmtree(staging, ignore_errors=True)
        if not (out / ".complete").is_file():
            raise
    _prune(root, architecture, keep=out)
    return out


def _compile(site: Path) -> None:
    """Byte-compile every module of the layer for this interpreter (= the layer's Python version), as
    unchecked-hash ``.pyc`` files: reproducible, and loaded without reading the source."""
    import compileall
    import py_compile

    ok = compileall.compile_dir(str(site), quiet=2, workers=1, ddir="/opt/python",
                                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    if not ok:
        raise LayerBuildError(f"byte-compiling the layer in {site} failed; run compileall on it to see why")


def _prune(root: Path, architecture: str, keep: Path, retain: int = 3) -> None:
    """Drop all but the newest few layers of an architecture: iterating on the sources can't fill the disk."""
    layers = sorted((p for p in root.glob(f"layer-{architecture}-*") if p != keep),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in layers[retain - 1:]:
        shutil.rmtree(old, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--arch", choices=sorted(_MACHINE), default="arm64")
    parser.add_argument("--python", default="3.12", help="Lambda runtime Python version (default 3.12)")
    parser.add_argument("--build-root", type=Path, default=None, help="cache folder (default: see default_build_root)")
    ns = parser.parse_args(argv)
    try:
        print(build_layer(architecture=ns.arch, python_version=ns.python, build_root=ns.build_root))
    except LayerBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
