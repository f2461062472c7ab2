"""Fair service on the queues: an execution with a backlog never makes the others wait behind it.

The durable queues (SQLite, PostgreSQL) and the in-memory one hand out heads least recently served first:
a target whose message was just acked goes to the back of the line. These tests count claims and runtime rounds — no
sleeps, no timings — and check the delayed release that retries use on the same queues.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.transport.base import Claimed

PG_DSN = os.environ.get("DURASTATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

COUNTER = {"id": "counter", "initial": "idle", "context": {"count": 0},
           "states": {"idle": {"on": {"inc": {"actions": [{"assign": {"count": {"add": ["$context.count", 1]}}}]}}}}}


def _pg_schema() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not reachable at {PG_DSN}: {exc}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any, ManualClock]]:
    """(store, queue, clock) of one backend, the queue in the store's database (memory: side by side)."""
    clock = ManualClock(1_700_000_000.0)
    if request.param == "memory":
        from durastate.store import DictStore
        from durastate.transport.memory import InMemoryTransport

        yield DictStore(), InMemoryTransport(clock), clock
        return
    if request.param == "sqlite":
        from durastate.store import SqliteStore
        from durastate.transport.sqlite import SqliteTransport

        with SqliteStore(tmp_path / "fair.db") as store:
            yield store, SqliteTransport(store, clock=clock), clock
        return
    from durastate.store import PostgresStore
    from durastate.transport.postgres import PostgresTransport

    for schema in _pg_schema():
        pg = PostgresStore.from_dsn(PG_DSN, schema=schema, connect_attempts=1)
        queue = PostgresTransport.from_dsn(PG_DSN, schema=schema, clock=clock, connect_attempts=1)
        try:
            yield pg, queue, clock
        finally:
            queue.close()
            pg.close()


def ev(eid: str, name: str = "inc") -> Event:
    return Event(id=eid, name=name)


def claims_until_served(queue: Any, wanted: set[str], batch: int) -> tuple[int, int]:
    """Claim ``batch`` at a time, acking each batch, until every target of ``wanted`` got a message:
    (claims made, messages of other targets delivered meanwhile)."""
    claims = others = 0
    while wanted:
        got: list[Claimed] = queue.claim(batch)
        assert got, f"{sorted(wanted)[:5]}… never served"
        claims += 1
        for c in got:
            if c.target_id in wanted:
                wanted.discard(c.target_id)
            else:
                others += 1
        for c in got:
            queue.ack(c)
    return claims, others


def test_a_backlog_of_one_execution_does_not_hold_back_the_others(pair: tuple[Any, Any, ManualClock]) -> None:
    _, queue, _ = pair
    queue.send([("busy", ev(f"busy-{n}")) for n in range(1000)])
    queue.send([(f"one-{k:02d}", ev(f"one-{k:02d}")) for k in range(50)])
    claims, busy = claims_until_served(queue, {f"one-{k:02d}" for k in range(50)}, batch=32)
    assert (claims, busy) == (2, 2)  # 51 heads, 32 a claim: two claims, one of busy's events in each
    assert queue.pending() == 998


def test_many_backlogs_sent_first_do_not_hold_back_a_late_single_event(
        pair: tuple[Any, Any, ManualClock]) -> None:
    """20 executions with 100 events each were queued first; in send order the 50 late ones would wait
    for all 2,000. Least recently served first, each busy execution gets one event per pass."""
    _, queue, _ = pair
    queue.send([(f"busy-{b:02d}", ev(f"busy-{b:02d}-{n:03d}")) for n in range(100) for b in range(20)])
    queue.send([(f"late-{k:02d}", ev(f"late-{k:02d}")) for k in range(50)])
    claims, busy = claims_until_served(queue, {f"late-{k:02d}" for k in range(50)}, batch=10)
    assert claims == 7  # 70 heads, 10 a claim
    assert busy <= 20  # at most one event of each busy execution went ahead of the late ones


def test_runtime_rounds_serve_every_execution_before_a_backlog_drains(
        pair: tuple[Any, Any, ManualClock]) -> None:
    """``LocalRuntime`` (what ``durastate serve`` runs) on the durable queue: after two rounds of 32 every
    one of 50 small executions has had its event applied; the one with 1,000 queued only got what the rounds
    had left over."""
    store, queue, clock = pair
    registry = DefinitionRegistry()
    registry.register(load_definition(COUNTER))
    rt = LocalRuntime(store, registry, queue, clock, batch_size=32)
    for eid in ["busy", *(f"one-{k:02d}" for k in range(50))]:
        rt.start("counter", execution_id=eid)
    rt.run_once()
    rt.run_once()  # every execution started (51 starts in two rounds of 32)
    queue.send([("busy", ev(f"busy-{n}")) for n in range(1000)])
    queue.send([(f"one-{k:02d}", ev(f"one-{k:02d}-inc")) for k in range(50)])
    rt.run_once()
    rt.run_once()
    counts = {k: store.load(f"one-{k:02d}").context["count"] for k in range(50)}
    assert counts == dict.fromkeys(range(50), 1)
    # busy had one event per pass, then the rest of the two rounds' budget once nobody else was waiting
    assert store.load("busy").context["count"] == 2 * 32 - 50
    stats = rt.run_until_idle()
    assert stats.applied == 1000 - (2 * 32 - 50) and store.load("busy").context["count"] == 1000


def test_a_retry_is_released_with_a_delay_and_waits_its_turn(pair: tuple[Any, Any, ManualClock]) -> None:
    """The runtime retries a failed message through the queue's delayed release: it stays its execution's
    next message, is not claimable before the delay, and the events behind it keep their order."""
    store, queue, clock = pair
    registry = DefinitionRegistry()
    registry.register(load_definition(COUNTER))
    rt = LocalRuntime(store, registry, queue, clock, batch_size=8)
    rt.start("counter", execution_id="c")
    rt.run_until_idle()
    failing = {"armed": True}
    real = rt.worker.handle

    def flaky(target_id: str, event: Event) -> Any:
        if failing["armed"] and event.id == "c-1":
            raise ConnectionError("store went away")  # transient: released with a delay, never dead-lettered
        return real(target_id, event)

    rt.worker.handle = flaky  # type: ignore[method-assign]
    queue.send([("c", ev("c-1")), ("c", ev("c-2"))])
    stats = rt.run_until_idle()
    assert (stats.retried, stats.applied) == (1, 0)  # c-2 waits behind c-1
    assert queue.pending() == 2
    delay = rt.retry_backoff.delay(1, lambda: 1.0)
    clock.advance(delay / 4)
    assert rt.run_until_idle().handled == 0  # not due yet
    failing["armed"] = False
    clock.advance(delay)
    assert rt.run_until_idle().applied == 2
    assert store.load("c").context["count"] == 2
