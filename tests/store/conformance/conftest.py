"""Fixtures of the conformance suite: every test runs once per registered backend.

``store`` is a fresh, empty store (sync protocol; async stores behind the adapter). ``make_store`` opens
more, e.g. with another trace ring size. ``backend`` tells a test what the store promises (durable or
identity-preserving).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durastate.store.base import DEFAULT_TRACE_MAX, ExecutionStore

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
