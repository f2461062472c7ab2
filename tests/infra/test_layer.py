"""The engine layer: built without Docker for the Lambda platform, reproducible, cached, and complete."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from durastate.cdk.layer import (
    DURASTATE_EXCLUDED,
    LAYER_DISTRIBUTIONS,
    PINS_FILE,
    RUNTIME_PROVIDED,
    LayerBuildError,
    build_layer,
    layer_spec,
    normalize,
    read_pins,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def layer() -> Path:
    return build_layer(architecture="arm64")  # cached under layers/build: no download after the first


def test_the_key_covers_architecture_python_pins_and_sources() -> None:
    arm = layer_spec(ROOT, "arm64")
    assert arm.digest == layer_spec(ROOT, "arm64").digest
    assert arm.digest != layer_spec(ROOT, "x86_64").digest
    assert arm.digest != layer_spec(ROOT, "arm64", python_version="3.13").digest
    assert any(rel == "durastate/__init__.py" for rel, _ in arm.sources)
    assert not any("__pycache__" in rel for rel, _ in arm.sources)
    assert all(p.endswith("_aarch64") for p in arm.platforms)


def test_a_second_build_reuses_the_first(layer: Path) -> None:
    assert build_layer(architecture="arm64") == layer
    assert (layer / ".complete").read_text().strip() in layer.name


def test_layer_is_closed_over_its_requirements(layer: Path) -> None:
    """Every requirement of every distribution in the layer is in the layer or in the Lambda runtime."""
    env = {k: str(v) for k, v in default_environment().items()}
    env.update({"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
                "platform_system": "Linux", "platform_machine": "aarch64", "extra": ""})
    found = importlib.metadata.distributions(path=[str(layer / "python")])
    dists = {normalize(d.metadata["Name"]): d for d in found}
    assert set(dists) == {normalize(n) for n in LAYER_DISTRIBUTIONS} | {"durastate"}
    available = set(dists) | {normalize(n) for n in RUNTIME_PROVIDED}
    for name, dist in dists.items():
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            assert normalize(req.name) in available, f"{name} needs {req.name}, missing from the layer"
            if normalize(req.name) in dists:
                version = dists[normalize(req.name)].version
                assert req.specifier.contains(version, prereleases=True), (name, raw)


def test_layer_wheels_are_for_the_lambda_platform(layer: Path) -> None:
    sos = list((layer / "python").rglob("*.so"))
    assert sos
    for so in sos:
        assert re.search(r"cpython-312-aarch64-linux-gnu|abi3", so.name), so.name
    if sys.version_info[:2] != (3, 12):  # byte code is only ever made by the layer's own Python version
        assert not list((layer / "python").rglob("*.pyc")), "byte code this machine makes would not load there"


def test_the_layer_leaves_out_what_no_handler_imports(layer: Path) -> None:
    package = layer / "python" / "durastate"
    for part in DURASTATE_EXCLUDED:
        assert not (package / part.rstrip("/")).exists(), part
    for needed in ("runtime/aws.py", "store/dynamodb/sync.py", "transport/sqs.py", "transport/eventbridge.py",
                   "importers/files.py"):
        assert (package / needed).is_file(), needed


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="imports a layer built for this host")
def test_a_layer_for_its_own_python_ships_bytecode_and_the_handlers_import_from_it() -> None:
    """Built on the layer's Python version, every module is unchecked-hash byte code (reproducible; loaded
    without reading the source), and a fresh interpreter with only the layer, the handlers' folder and
    the runtime's boto3 imports the four handlers and what the AWS runtime imports lazily."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    built = build_layer(architecture="x86_64", python_version=version) / "python"
    pycs = list(built.rglob("*.pyc"))
    assert pycs and all(int.from_bytes(p.read_bytes()[4:8], "little") == 0b01 for p in pycs)  # unchecked hash
    boto3_home = Path(importlib.util.find_spec("boto3").origin).parents[1]  # type: ignore[arg-type,union-attr]
    code = (
        f"import sys; sys.path[:0] = [{str(built)!r}, {str(ROOT / 'durastate' / 'functions')!r}]\n"
        f"sys.path.append({str(boto3_home)!r})\n"
        "import worker, relay, sweeper, timers, durastate\n"
        "import durastate.store.dynamodb.sync, durastate.transport.sqs, durastate.transport.eventbridge\n"
        "import durastate.importers.files\n"
        "print(durastate.__file__)"
    )
    proc = subprocess.run([sys.executable, "-S", "-B", "-c", code], capture_output=True, text=True, check=False,
                          cwd=str(built))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().startswith(str(built))


def test_the_shipped_pins_are_the_projects(layer: Path) -> None:
    """The layer's pins ship with the package (a user's app has no constraints.txt); they are this checkout's."""
    assert read_pins(PINS_FILE) == read_pins(ROOT / "constraints.txt"), (
        "durastate/cdk/layer-pins.txt differs from constraints.txt: update it to the constraints' versions")


def test_missing_pins_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "constraints.txt").write_text("pydantic==2.0\n")
    with pytest.raises(LayerBuildError, match="pins no version"):
        read_pins(tmp_path / "constraints.txt")
