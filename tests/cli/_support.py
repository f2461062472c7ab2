"""Shared helpers of the CLI tests (paths, the executable, result checks); fixtures are in conftest."""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFS = Path(__file__).resolve().parent / "defs"
EXAMPLES = ROOT / "examples"
CLOCK = 1_767_607_200.0
"""2026-01-05T10:00:00Z: the manual clock every command of these tests runs on (``DURASTATE_CLOCK``), so
no assertion depends on how long the machine takes between two commands; ``--advance`` moves it."""


PG_SERVER = "postgresql://postgres@127.0.0.1:5432/test"
"""The test machine's PostgreSQL server (trust auth, database ``test``)."""


@contextlib.contextmanager
def postgres_schema_url(prefix: str, query: str = "") -> Iterator[str]:
    """The URL of a fresh schema ``<prefix>_<random>`` on :data:`PG_SERVER` (``query``: more URL options, e.g.
    ``&history=1``), dropped afterwards; the test is skipped when there is no server."""
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(PG_SERVER, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {PG_SERVER}: {exc}")
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{PG_SERVER}?schema={schema}{query}"
    finally:
        with psycopg.connect(PG_SERVER, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def moto_dynamodb_url(monkeypatch: pytest.MonkeyPatch, prefix: str, query: str = "") -> str:
    """The URL of a fresh table prefix on the session's moto server, with its dummy credentials set and no
    real endpoint or profile left in the environment."""
    pytest.importorskip("boto3")
    from tests._aws import shared_moto_server, unique_prefix

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return f"dynamodb://{unique_prefix(prefix)}?endpoint_url={shared_moto_server().url}&region=us-east-1{query}"


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
