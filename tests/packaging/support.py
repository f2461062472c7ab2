"""What the packaging tests share: the project's name and version, and running a command away from the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME, VERSION = PROJECT["name"], PROJECT["version"]

#: Folders and files of a checkout that are not inputs of the build (environments, caches, build outputs).
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "node_modules", "cdk.out", "build", "dist", "*.egg-info",
                                     "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", ".pytest_cache",
                                     ".hypothesis", "*.db", "*.db-wal", "*.db-shm")



def run(cmd: list[str | Path], cwd: Path, timeout: float = 600,
        extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` away from this checkout: no PYTHONPATH or active venv leaking in (``extra_env`` added)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1", NO_COLOR="1", COLUMNS="100")
    env.update(extra_env or {})
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc
