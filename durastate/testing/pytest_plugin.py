"""One pytest test per conformance check, for a store's own test module.

::

    # tests/test_my_store_conformance.py
    from durastate.testing.pytest_plugin import conformance_tests

    test_my_store = conformance_tests(lambda: MyStore(...))

pytest collects ``test_my_store`` as one test per check (``test_my_store[commit_cas.retry_after_conflict_succeeds]``
…); a failing test's message names the check and what it expected, a check that does not apply is
reported as skipped. pytest is imported only when this function is called, so the kit itself needs only
durastate.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from durastate.store.base import AsyncExecutionStore, ExecutionStore
from durastate.testing.conformance import (
    DEFAULT_CAPABILITIES,
    Capabilities,
    Outcome,
    new_prefix,
    run_case,
    run_case_async,
    select,
)

__all__ = ["conformance_tests", "conformance_tests_async", "settle"]


def settle(outcome: Outcome) -> None:
    """Report a check's outcome to pytest: a failure (naming the check and what it expected) or a skip."""
    import pytest

    if outcome.status == "skipped":
        pytest.skip(outcome.message)
    if outcome.status == "failed":
        pytest.fail(f"{outcome.check} — {outcome.doc}\n{outcome.message}", pytrace=False)


def conformance_tests(make_store: Callable[[], ExecutionStore], *, capabilities: Capabilities = DEFAULT_CAPABILITIES,
                      prefix: str | None = None, only: Iterable[str] | None = None) -> Callable[[str], None]:
    """A pytest test function parametrized over the checks: each runs on a fresh ``make_store()``, closed
    after. Assign it to a module-level name starting with ``test``."""
    import pytest

    run_prefix = new_prefix() if prefix is None else prefix
    names = [c.name for c in select(only)]

    @pytest.mark.parametrize("check", names)
    def test_store_conformance(check: str) -> None:
        store = make_store()
        try:
            settle(run_case(check, store, f"{run_prefix}{names.index(check)}-", capabilities))
        finally:
            store.close()

    return test_store_conformance


def conformance_tests_async(
    make_store: Callable[[], AsyncExecutionStore | Awaitable[AsyncExecutionStore]], *,
    capabilities: Capabilities = DEFAULT_CAPABILITIES, prefix: str | None = None, only: Iterable[str] | None = None,
) -> Callable[[str], None]:
    """The async twin: each test runs its check on a new event loop, on a store made (and closed) inside it."""
    import pytest

    run_prefix = new_prefix() if prefix is None else prefix
    names = [c.name for c in select(only)]

    async def one(check: str) -> Outcome:
        made: Any = make_store()
        store: AsyncExecutionStore = await made if inspect.isawaitable(made) else made
        try:
            return await run_case_async(check, store, f"{run_prefix}{names.index(check)}-", capabilities)
        finally:
            await store.close()

    @pytest.mark.parametrize("check", names)
    def test_store_conformance_async(check: str) -> None:
        settle(asyncio.run(one(check)))

    return test_store_conformance_async
