"""Run the real ``cdk synth`` once per test session and share the cloud assembly.

The CLI (``node_modules/.bin/cdk``, pinned in package.json) runs ``cdk.json``'s app exactly as a user's
``cdk synth`` does, into a session temp folder so a developer's own ``cdk.out`` is left alone. Both the
template tests and the local-stack tests read the result; synthesis is slow, so it happens once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACK = "DurastateStack"

if str(ROOT) not in sys.path:  # this checkout's durastate (durastate.cdk), as app.py imports it
    sys.path.insert(0, str(ROOT))

_result: dict[str, Any] = {}


def cdk_cli() -> str:
    local = ROOT / "node_modules" / ".bin" / "cdk"
    if local.exists():
        return str(local)
    found = shutil.which("cdk")
    if found is None:
        pytest.fail("the CDK CLI is not installed: run `npm ci` (the Makefile does) to get "
                    "node_modules/.bin/cdk")
    return found


def synth_once(tmp_root: Path) -> Path:
    """The cloud assembly folder; synthesized on the first call of the session."""
    if "out" in _result:
        return Path(_result["out"])
    if "error" in _result:
        pytest.fail(_result["error"])
    out = tmp_root / "cdk.out"
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
           "CDK_DISABLE_CLI_TELEMETRY": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([cdk_cli(), "synth", "--quiet", "--no-notices", "-o", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        _result["error"] = (f"cdk synth failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                            f"{proc.stderr[-8000:]}")
        pytest.fail(_result["error"])
    _result["out"] = str(out)
    _result["stderr"] = proc.stderr
    return out


def synth_stderr(tmp_root: Path) -> str:
    """What ``cdk synth`` printed on its standard error (synthesizing first if no test did yet)."""
    synth_once(tmp_root)
    return str(_result["stderr"])


def template(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"{STACK}.template.json").read_text())
    return data


@pytest.fixture(scope="session")
def cloud_assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_once(tmp_path_factory.mktemp("synth"))


@pytest.fixture(scope="session")
def template_json(cloud_assembly: Path) -> dict[str, Any]:
    return template(cloud_assembly)
