"""Shared helpers of the CLI tests (paths, the executable, result checks); fixtures are in conftest."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFS = Path(__file__).resolve().parent / "defs"
EXAMPLES = ROOT / "examples"
CLOCK = 1_767_607_200.0
"""2026-01-05T10:00:00Z: the manual clock every command of these tests runs on (``DURASTATE_CLOCK``), so
no assertion depends on how long the machine takes between two commands; ``--advance`` moves it."""


def durastate_executable() -> list[str]:
    """The console script next to this interpreter, else ``python -m durastate.cli``."""
    script = Path(sys.executable).with_name("durastate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "durastate.cli"]


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


@dataclass
class Env:
    """One test's configuration: a store file and a definitions folder, given through the environment."""

    tmp: Path
    db: Path
    definitions: Path

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.db}"

    def vars(self) -> dict[str, str]:
        return {"DURASTATE_STORE": self.store_url, "DURASTATE_DEFINITIONS": str(self.definitions),
                "DURASTATE_CONNECT_RETRIES": "1", "COLUMNS": "200", "NO_COLOR": "1",
                "DURASTATE_CLOCK": repr(CLOCK)}


def assert_one_line_error(out: Outcome, *fragments: str) -> str:
    """A failed command: exit status 1, exactly one non-empty stderr line 'error: …', no traceback."""
    assert out.code == 1, (out.code, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert "Traceback" not in out.stderr, out.stderr
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]
