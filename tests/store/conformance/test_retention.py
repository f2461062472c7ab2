"""Retention on every store: ``purge`` turns old ended executions into tombstones that still dedupe.

What a user relies on: a purge never touches a running (or suspended) execution, a system record or one
that ended after the cutoff; it honours the status and definition filters and its batch limit; a purged
execution still recognises its applied events (so a repeated start stays a duplicate) while its trace is
gone; a purge loses cleanly to a commit that got there first, and a stale commit loses to the purge;
expired tombstones go with their dedupe marks (DynamoDB leaves that to its TTL: the tombstone carries it).

The checks are ``durastate.testing``'s (group ``purge``); the scale run is ``test_retention_scale.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from durastate.testing.conformance import Case, select

from .backends import Backend
from .conftest import run_check

CHECKS = select(["purge"])


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_retention(backend: Backend, tmp_path: Path, check: Case) -> None:
    run_check(backend, tmp_path, check)
