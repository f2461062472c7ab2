"""The example store proves itself with durastate's conformance kit: one pytest test per check.

Run with ``python -m pytest examples/third_party_store``.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

from durastate.testing import Capabilities, check_store
from durastate.testing.pytest_plugin import conformance_tests

sys.path.insert(0, str(Path(__file__).parent))  # the store's module, next to this file

from json_file_store import JsonFileStore

FOLDER = Path(tempfile.mkdtemp(prefix="json-store-"))


def fresh_store() -> JsonFileStore:
    """A new, empty store (its own file) for each check."""
    return JsonFileStore(FOLDER / f"{uuid.uuid4().hex}.json")


# One test per check (`test_conformance[commit_cas.retry_after_conflict_succeeds]`, …).
test_conformance = conformance_tests(fresh_store, capabilities=Capabilities(durable=True))


def test_the_kit_on_one_shared_file() -> None:
    """Every check on ONE file (a shared database): reads narrowed to each check's prefix."""
    shared = FOLDER / "shared.json"
    report = check_store(lambda: JsonFileStore(shared), capabilities=Capabilities(shared=True))
    assert report.ok and len(report.of("passed")) > 60, report
