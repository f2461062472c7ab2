"""Fixtures for the ``durastate`` command's tests.

Two ways in, both through the real application: :func:`cli` runs a command line in-process with typer's
``CliRunner`` (fast: most tests), :func:`durastate_proc` runs the installed console script in a subprocess
(what a user runs: errors must reach stderr as one line, exit codes must be right). Every test gets its
own SQLite file and the small definitions of ``tests/cli/defs`` (plus the examples) through the
environment, exactly as a user would configure them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from durastate.cli.app import app

from ._support import DEFS, EXAMPLES, Env, Outcome, durastate_executable


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    definitions = tmp_path / "defs"
    definitions.mkdir()
    for source in [*DEFS.glob("*.yaml"), *EXAMPLES.glob("*.yaml")]:
        shutil.copy(source, definitions / source.name)
    e = Env(tmp_path, tmp_path / "durastate.db", definitions)
    for key, value in e.vars().items():
        monkeypatch.setenv(key, value)
    for name in ("DURASTATE_DEBUG", "DURASTATE_QUEUE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield e


@pytest.fixture
def cli(env: Env) -> Callable[..., Outcome]:
    """Run ``durastate ARGS…`` in-process; returns exit code, stdout and stderr."""
    runner = CliRunner()

    def run(*args: str) -> Outcome:
        result = runner.invoke(app, list(args), prog_name="durastate")
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Outcome(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.fixture
def durastate_proc(env: Env) -> Callable[..., Outcome]:
    """Run the real ``durastate`` executable in a subprocess (bounded by a timeout)."""

    def run(*args: str, timeout: float = 60.0) -> Outcome:
        proc = subprocess.run([*durastate_executable(), *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **env.vars()}, cwd=env.tmp)
        return Outcome(proc.returncode, proc.stdout, proc.stderr)

    return run


