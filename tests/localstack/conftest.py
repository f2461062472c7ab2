"""Start the LocalStack install as soon as pytest knows it will run a test of this package (see
:func:`tests.localstack.harness.install_in_background`)."""

from __future__ import annotations

import pytest

from .harness import install_in_background


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.nodeid.startswith("tests/localstack/") for item in session.items):
        install_in_background()
