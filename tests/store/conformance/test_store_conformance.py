"""The store conformance suite: one behavioural contract, run unchanged against every backend.

The checks are ``durastate.testing``'s — the kit a store written outside durastate runs to test itself —
so the built-in backends and third-party ones answer to the very same code (see docs/testing-kit.md).
Here: the compare-and-swap, load, the outbox, dedupe, timers, spawns, the trace ring and listing; the
listing filters by parent and time are in ``test_listing_filters.py``, retention in ``test_retention.py``.
Only behaviour the protocol promises is asserted — e.g. listing order is not (DynamoDB lists by Scan),
seq values are compared by order, never by value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from durastate.testing.conformance import Case, select

from .backends import Backend
from .conftest import run_check
from .test_listing_filters import LISTING_FILTER_CHECKS

CHECKS = [c for c in select(["commit_cas", "load", "outbox_order", "dedupe", "timers", "spawns", "trace_ring",
                             "listing"]) if c not in LISTING_FILTER_CHECKS]


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_store_conformance(backend: Backend, tmp_path: Path, check: Case) -> None:
    run_check(backend, tmp_path, check)
