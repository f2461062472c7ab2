"""Fixtures of the conformance suite: every test runs once per registered backend.

The checks themselves are ``durastate.testing``'s (the kit third-party stores run): :func:`run_check` runs
one on a fresh store of the backend — a sync store directly, an async one awaited on its own event loop —
and reports its outcome to pytest. ``store`` is a fresh, empty store (sync protocol; async stores behind
the adapter) for the tests that are not kit checks; ``make_store`` opens more. ``backend`` tells a test
what the store promises (durable or identity-preserving).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durastate.store.base import DEFAULT_TRACE_MAX, ExecutionStore
from durastate.testing import Capabilities
from durastate.testing.conformance import Case, Outcome, run_case, run_case_async
from durastate.testing.pytest_plugin import settle

from .backends import BACKENDS, Backend, BackendRequest, open_backend

MakeStore = Callable[..., ExecutionStore]


@pytest.fixture(params=[pytest.param(b, id=b.name, marks=b.marks) for b in BACKENDS.values()])
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def make_store(backend: Backend, tmp_path: Path) -> Iterator[MakeStore]:
    with contextlib.ExitStack() as stack:

        def make(trace_max: int | None = DEFAULT_TRACE_MAX) -> ExecutionStore:
            req = BackendRequest(tmp_path, trace_max, f"h{uuid.uuid4().hex[:16]}")
            return stack.enter_context(open_backend(backend, req))

        yield make


@pytest.fixture
def store(make_store: MakeStore) -> ExecutionStore:
    return make_store()


def capabilities(backend: Backend) -> Capabilities:
    """What ``backend`` promises, in the kit's terms (DynamoDB's TTL, not ``purge``, expires tombstones)."""
    return Capabilities(durable=backend.durable, trace_gapless=backend.trace_gapless,
                        expires_tombstones="dynamodb" not in backend.name)


def run_check(backend: Backend, tmp_path: Path, check: Case) -> None:
    """Run one kit check on a fresh store of ``backend`` and report it to pytest."""
    req = BackendRequest(tmp_path, DEFAULT_TRACE_MAX, f"h{uuid.uuid4().hex[:16]}")
    caps = capabilities(backend)
    if backend.is_async:

        async def run() -> Outcome:
            async with backend.factory(req) as astore:  # type: ignore[union-attr]
                return await run_case_async(check, astore, "t-", caps)

        outcome = asyncio.run(run())
    else:
        with backend.factory(req) as store:  # type: ignore[union-attr]
            outcome = run_case(check, store, "t-", caps)
    settle(outcome)
