"""The CDK CLI and jsii run on a supported Node.js: the development install brings one (Node 24 LTS from the
package index, linked into the virtualenv's bin), whatever Node the machine has (Node 20 is end of life)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .synth import synth_stderr


def test_the_cdk_runs_on_a_supported_node(tmp_path_factory: pytest.TempPathFactory) -> None:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # as synth_once runs it
    version = subprocess.run(["node", "--version"], env={**os.environ, "PATH": path}, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) >= 22, version
    assert "end-of-life" not in synth_stderr(tmp_path_factory.mktemp("synth")).lower()
