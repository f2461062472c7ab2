"""A round of the local runtime on SQLite is one transaction: claims, commits and acks land together.

Real SQLite files; statements are counted with SQLite's own trace callback, not timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.model import START, Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.sqlite.sync import SqliteStore
from durastate.transport.sqlite import SqliteTransport


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "group.db", synchronous="FULL") as s:
        yield s


def queue(transport: SqliteTransport, target: str, names: list[str], tag: str = "e") -> None:
    transport.send([(target, Event(id=f"{target}:start", name=START, data={"definition_id": "counter"}))])
    transport.send([(target, Event(id=f"{target}:{tag}{i}", name=n)) for i, n in enumerate(names)])


def test_a_round_commits_its_events_and_acks_once(
        store: SqliteStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    transport = SqliteTransport(store, clock)
    for target in ("a", "b"):
        queue(transport, target, ["inc"] * 10)
    rt = LocalRuntime(store, registry, transport, clock, batch_size=32)
    rt.worker.versions.newest("counter")  # archive the version now: the first start ever writes it once
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    stats = rt.run_once()
    store.db.conn.set_trace_callback(None)
    assert stats.applied == 22 and transport.pending() == 0  # two starts and twenty incs, in one round
    commits = [s for s in statements if s.strip().upper() == "COMMIT"]
    # The round's 22 commits (each a savepoint, so a lost CAS rolls back only itself) and 22 acks are
    # ONE transaction (the relay's and the sweep's own writes come after it, none here): one fsync
    # instead of 44.
    assert len(commits) == 1
    assert sum(s.startswith("SAVEPOINT") for s in statements) == 22
    for target in ("a", "b"):
        exe = store.load(target)
        assert exe is not None and exe.context["count"] == 10 and exe.version == 11


def test_a_round_that_fails_midway_keeps_nothing_and_is_applied_once_later(
        store: SqliteStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    transport = SqliteTransport(store, clock)
    queue(transport, "a", ["inc"] * 5)
    rt = LocalRuntime(store, registry, transport, clock, keep_committed=16)
    real = rt.worker.handle
    calls = 0

    def crash_on_the_fourth(target_id: str, event: Event) -> object:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise KeyboardInterrupt  # the process is being stopped in the middle of a round
        return real(target_id, event)

    rt.worker.handle = crash_on_the_fourth  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        rt.run_once()
    # Nothing of the round landed: not the three commits, not their acks, not the claims' leases.
    assert store.load("a") is None and transport.pending("a") == 6
    assert rt.worker.committed("a") is None  # the kept copy of a rolled-back commit was dropped
    rt.worker.handle = real  # type: ignore[method-assign]
    stats = rt.run_until_idle()
    assert stats.applied == 6 and stats.duplicates == 0
    exe = store.load("a")
    assert exe is not None and exe.context["count"] == 5 and exe.version == 6


def test_a_transport_on_its_own_connection_is_not_grouped(
        store: SqliteStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    """Grouping across two connections would deadlock on SQLite's write lock; it must not happen."""
    with SqliteTransport(store.path, clock) as transport:
        queue(transport, "a", ["inc"] * 3)
        rt = LocalRuntime(store, registry, transport, clock)
        stats = rt.run_until_idle()
    assert stats.applied == 4
    exe = store.load("a")
    assert exe is not None and exe.context["count"] == 3


def test_the_runtimes_kept_copies_follow_its_memory_budget(
        store: SqliteStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    transport = SqliteTransport(store, clock)
    for target in ("a", "b"):
        queue(transport, target, ["inc"] * 3)
    kept = LocalRuntime(store, registry, transport, clock)
    assert kept.run_once().applied == 8
    assert kept.worker.committed("a") is not None and kept.worker.committed("b") is not None
    for target in ("a", "b"):
        queue(transport, target, ["inc"] * 3, tag="f")
    tight = LocalRuntime(store, registry, transport, clock, keep_bytes=1)  # no execution fits: each is loaded
    assert tight.run_once().applied == 6
    assert tight.worker.keeps and tight.worker.committed("a") is None and tight.worker.kept_bytes == 0
    for target in ("a", "b"):
        exe = store.load(target)
        assert exe is not None and exe.context["count"] == 6
