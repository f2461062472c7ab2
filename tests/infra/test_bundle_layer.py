"""``bundle_layer`` (``-c durastate:bundleLayer=true``): the engine layer's contents in each function's code and
no layer, for LocalStack community, whose Lambda runs a function's own code only. The deploy itself is
tested on real LocalStack in ``tests/localstack``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from durastate.cdk import DurastateEngine
from durastate.cdk.construct import HANDLERS, stage_function_code

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "durastate" / "functions"


def _layer(root: Path, name: str) -> Path:
    layer = root / name
    (layer / "python" / "engine").mkdir(parents=True)
    (layer / "python" / "engine" / "__init__.py").write_text("ENGINE = True\n")
    return layer


def test_the_layer_contents_land_at_the_code_root_beside_the_handler(tmp_path: Path) -> None:
    build = tmp_path / "build"
    plain = stage_function_code("worker", FUNCTIONS, ROOT / "examples", build)
    bundled = stage_function_code("worker", FUNCTIONS, ROOT / "examples", build,
                                  _layer(tmp_path, "layer-x86_64-aaaa"))
    assert bundled != plain and not (plain / "engine").exists()
    assert (bundled / "engine" / "__init__.py").read_text() == "ENGINE = True\n"
    assert {p.name for p in plain.iterdir()} <= {p.name for p in bundled.iterdir()}  # handler, helpers, definitions
    assert (bundled / "worker.py").read_bytes() == (FUNCTIONS / "worker.py").read_bytes()
    # Another layer build (another content hash) is another asset; the same one is reused.
    other = stage_function_code("worker", FUNCTIONS, ROOT / "examples", build,
                                _layer(tmp_path, "layer-x86_64-bbbb"))
    assert other != bundled
    assert stage_function_code("worker", FUNCTIONS, ROOT / "examples", build,
                               tmp_path / "layer-x86_64-aaaa") == bundled


def test_a_given_layer_code_cannot_be_bundled(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="leave layer_code unset"):
        DurastateEngine(cdk.Stack(app, "S"), "E", layer_code=lambda_.Code.from_asset(str(tmp_path)),
                        bundle_layer=True, build_root=tmp_path / "build",
                        definitions_dir=ROOT / "examples")


@pytest.mark.slow
def test_a_bundled_engine_has_no_layer_and_every_function_carries_the_engine(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Local")
    build = tmp_path / "build"
    engine = DurastateEngine(stack, "Engine", bundle_layer=True, build_root=build,
                             definitions_dir=ROOT / "examples")
    template: dict[str, Any] = dict(Template.from_stack(stack).to_json())
    assert engine.layer is None
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"]
    functions = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == len(HANDLERS) and not any("Layers" in fn for fn in functions)
    staged = sorted((build / "functions").iterdir())
    assert {p.name.rsplit("-", 1)[0] for p in staged} == set(HANDLERS)
    for code in staged:
        assert (code / "durastate" / "__init__.py").is_file(), code
        assert (code / "pydantic_core").is_dir() and (code / "yaml").is_dir(), code
        assert (code / f"{HANDLERS[code.name.rsplit('-', 1)[0]].split('.')[0]}.py").is_file(), code
