"""Listing filters every store must serve alike: by parent, by last update time, and system records left
out unless asked for; each with keyset paging, and the summaries carrying creation and update times.

The checks are ``durastate.testing``'s (group ``listing``; see ``test_store_conformance.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from durastate.testing.conformance import Case, select

from .backends import Backend
from .conftest import run_check

_NAMES = ("filters_with_paging", "summaries_carry_times", "system_records_left_out_unless_asked_for",
          "updates_move_the_time_filter")
LISTING_FILTER_CHECKS = [c for c in select(["listing"]) if c.name.split(".")[1].split("[")[0] in _NAMES]


@pytest.mark.parametrize("check", LISTING_FILTER_CHECKS, ids=[c.name for c in LISTING_FILTER_CHECKS])
def test_listing_filters(backend: Backend, tmp_path: Path, check: Case) -> None:
    run_check(backend, tmp_path, check)
