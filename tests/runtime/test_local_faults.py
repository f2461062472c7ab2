"""LocalRuntime under injected store faults: transient errors are retried later, never dead-lettered.

A released message used to be claimable again at once, so a burst of fast failures spent every attempt of a
message inside one round and dead-lettered it — a ``durastate.start`` among them, after which every later
event of that execution was dead-lettered as "unknown execution". Time here is a ManualClock: a retry
becomes due by advancing it, never by sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry
from durastate.errors import StoreThrottled, StoreUnavailable, UnknownExecution
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store import DictStore, SqliteStore
from durastate.store.base import ExecutionStore
from durastate.transport import InMemoryTransport
from durastate.transport.sqlite import SqliteTransport

from .conftest import ev


class FailingLoads:
    """A real store whose next ``failures`` loads raise ``error`` (a database that went away for a while)."""

    def __init__(self, inner: ExecutionStore, failures: int, error: Exception | None = None) -> None:
        self.inner = inner
        self.failures = failures
        self.error = error or StoreUnavailable("database is down (injected); retry later")
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def load_for_event(self, execution_id: str, event_id: str) -> Any:
        if self.failures:
            self.failures -= 1
            self.failed += 1
            raise self.error
        return self.inner.load_for_event(execution_id, event_id)


@pytest.fixture(params=["sqlite", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
            ) -> Iterator[tuple[ExecutionStore, Any]]:
    """(store, transport factory): a SQLite file with its durable inbox (what ``durastate serve`` runs
    on), or the in-memory store and queue."""
    if request.param == "memory":
        yield DictStore(), lambda store: InMemoryTransport(clock)
        return
    store = SqliteStore(tmp_path / "faults.db")
    yield store, lambda s: SqliteTransport(s, clock=clock)
    store.close()


def drain(rt: LocalRuntime, clock: ManualClock, transport: Any, store: FailingLoads) -> int:
    """Run until idle, let the retries come due, repeat until the queue is empty; the number of passes."""
    for passes in range(1, 200):
        rt.run_until_idle()
        if not store.failures and not transport.pending():
            return passes
        clock.advance(rt.retry_backoff.cap)
    raise AssertionError("the queue never drained")


def test_a_burst_of_failing_loads_dead_letters_nothing(
        backend: tuple[ExecutionStore, Any], registry: DefinitionRegistry, clock: ManualClock) -> None:
    inner, make_transport = backend
    store = FailingLoads(inner, failures=60)
    transport = make_transport(store)
    rt = LocalRuntime(store, registry, transport, clock, max_attempts=5)  # type: ignore[arg-type]
    ids = [f"c{n}" for n in range(10)]
    for eid in ids:
        rt.start("counter", execution_id=eid)
        for k in range(3):
            rt.send(eid, ev("inc", f"{eid}-inc{k}"))
    first = rt.run_until_idle()
    # Each start failed once and went back with a delay: none was tried again in the same round, and
    # none of the events queued behind a start was applied (or found its execution unknown) before it.
    assert (first.handled, first.retried, first.dead_lettered, first.applied) == (10, 10, 0, 0)
    assert rt.run_once().handled == 0  # nothing is due before the clock moves
    drain(rt, clock, transport, store)
    assert store.failed == 60  # every injected failure was met: 6 attempts per start, past max_attempts
    assert rt.dead_letters == []
    for eid in ids:
        exe = rt.get(eid)
        assert exe is not None and exe.context["count"] == 3


def test_retries_back_off_exponentially_with_jitter_up_to_a_cap(registry: DefinitionRegistry,
                                                                clock: ManualClock) -> None:
    store = FailingLoads(DictStore(), failures=12, error=StoreThrottled("throttled (injected)"))
    transport = InMemoryTransport(clock)
    rt = LocalRuntime(store, registry, transport, clock)  # type: ignore[arg-type]
    rt.start("counter", execution_id="c1")
    backoff = rt.retry_backoff
    for attempt in range(1, 13):
        assert rt.run_once().retried == 1
        ceiling = min(backoff.cap, backoff.base * 2 ** (attempt - 1))
        clock.advance(ceiling / 2 - 0.001)
        assert rt.run_once().handled == 0, attempt  # jitter takes off at most half
        clock.advance(0.002 + ceiling / 2)  # and the delay never passes the (capped) ceiling
    assert ceiling == backoff.cap  # the last waits were capped
    assert rt.run_once().applied == 1
    assert rt.dead_letters == []


def test_a_permanent_error_is_still_dead_lettered_at_once(registry: DefinitionRegistry) -> None:
    store = FailingLoads(DictStore(), failures=1, error=UnknownExecution("ghost"))
    rt = LocalRuntime(store, registry)  # type: ignore[arg-type]
    rt.send("ghost", ev("inc"))
    stats = rt.run_until_idle()
    assert (stats.dead_lettered, stats.retried) == (1, 0)
    assert [(d.error, d.attempts) for d in rt.dead_letters] == [("UnknownExecution", 1)]
