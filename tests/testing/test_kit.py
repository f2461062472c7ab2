"""The conformance kit a third-party store runs (``durastate.testing``): what its author relies on.

The kit's checks are the conformance suite of the stores durastate ships (tests/store/conformance runs
them over every backend); here: the kit's own promises — a broken store fails naming the check and what it
expected, the async twin runs in the caller's event loop, the prefix keeps runs apart on one shared
database, the example store outside the package passes, and pytest stays optional.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from durastate.engine.model import Emit, Execution, Spawn, TimerOp
from durastate.store.memory.aio import AsyncDictStore
from durastate.store.memory.sync import DictStore
from durastate.store.sqlite.sync import SqliteStore
from durastate.testing import (
    CASES,
    GROUPS,
    Capabilities,
    ConformanceFailed,
    check_commit_cas,
    check_listing_async,
    check_store,
    check_store_async,
    check_timers,
)
from durastate.testing.conformance import select
from durastate.testing.pytest_plugin import conformance_tests, conformance_tests_async

ROOT = Path(__file__).resolve().parents[2]
IN_MEMORY = Capabilities(durable=False)


class NoCasStore(DictStore):
    """A broken store: its commit ignores the version compare-and-swap (the last writer wins)."""

    def commit(self, exe: Execution, emits: Sequence[Emit], processed_event_id: str | None = None,
               timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
               trace: dict[str, Any] | None = None) -> None:
        with self._lock:
            self._by_id.pop(exe.id, None)
            super().commit(exe, emits, processed_event_id, timers, spawns, trace)

    def save(self, exe: Execution) -> None:
        self.commit(exe, [])


def test_a_store_that_ignores_the_cas_fails_naming_the_check_and_what_it_expected() -> None:
    with pytest.raises(ConformanceFailed) as info:
        check_store(NoCasStore, capabilities=IN_MEMORY)
    report = info.value.report
    failed = {o.check: o.message for o in report.of("failed")}
    assert "commit_cas.two_inserts_of_one_id_second_conflicts" in failed
    assert failed["commit_cas.two_inserts_of_one_id_second_conflicts"] == (
        "a second insert (version 0) of an existing id: expected StoreConflict, but nothing was raised")
    assert "FAILED commit_cas.two_objects_racing_one_id_loser_conflicts" in str(info.value)
    assert set(failed) <= {c.name for c in CASES.values()}
    assert "timers.timer_cancel" not in failed  # what the store does right still passes
    assert len(report.of("passed")) > 50


BROKEN_MODULE = """
from durastate.store.memory.sync import DictStore
from durastate.testing import Capabilities
from durastate.testing.pytest_plugin import conformance_tests


class NoCas(DictStore):
    def commit(self, exe, emits, processed_event_id=None, timers=(), spawns=(), trace=None):
        self._by_id.pop(exe.id, None)
        super().commit(exe, emits, processed_event_id, timers, spawns, trace)

    def save(self, exe):
        self.commit(exe, [])


test_broken = conformance_tests(NoCas, capabilities=Capabilities(durable=False), only=["commit_cas"])
"""


def test_through_pytest_a_broken_store_fails_each_check_it_breaks_by_name(tmp_path: Path) -> None:
    (tmp_path / "test_broken_store.py").write_text(BROKEN_MODULE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_broken_store.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "FAILED test_broken_store.py::test_broken[commit_cas.two_inserts_of_one_id_second_conflicts]" in done.stdout
    assert ("a second insert (version 0) of an existing id: expected StoreConflict, but nothing was raised"
            in done.stdout)
    assert "5 failed, 4 passed" in done.stdout


def test_one_group_over_one_store() -> None:
    store = DictStore()
    report = check_timers(store, capabilities=IN_MEMORY)
    assert report.ok and {o.check.split(".")[0] for o in report.outcomes} == {"timers"}
    with pytest.raises(ConformanceFailed, match=r"commit_cas\.retry_after_conflict_succeeds"):
        check_commit_cas(NoCasStore(), capabilities=IN_MEMORY)


def test_a_healthy_store_passes_every_group() -> None:
    report = check_store(DictStore, capabilities=IN_MEMORY)
    assert report.ok and not report.of("failed")
    assert {o.check.split(".")[0] for o in report.of("passed")} == set(GROUPS)
    skipped = {o.check for o in report.of("skipped")}
    assert skipped == {  # DictStore: no check_event, no context_unchanged
        "dedupe.a_checked_commit_refuses_an_event_already_applied_and_writes_nothing[fast]",
        "dedupe.a_checked_commit_refuses_an_event_already_applied_and_writes_nothing[multi]",
        "load.a_context_left_alone_stays_whole"}


def test_only_selects_groups_and_checks_and_refuses_unknown_names() -> None:
    report = check_store(DictStore, capabilities=IN_MEMORY, only=["spawns", "load.load_round_trips_exactly"])
    assert sorted(o.check for o in report.outcomes) == [
        "load.load_round_trips_exactly", "spawns.spawn_commit_carries_join_expectations",
        "spawns.spawns_in_order_with_snapshotted_context"]
    with pytest.raises(ValueError, match="no conformance check or group named"):
        check_store(DictStore, only=["timer"])


async def test_the_async_twin_runs_in_the_callers_event_loop() -> None:
    report = await check_store_async(AsyncDictStore, capabilities=IN_MEMORY)
    assert report.ok and len(report.of("passed")) == len(CASES) - 3
    assert (await check_listing_async(AsyncDictStore(), capabilities=IN_MEMORY)).ok


def test_runs_with_distinct_prefixes_share_one_database(tmp_path: Path) -> None:
    """Two runs on one SQLite file: the second sees the first one's data, and still passes."""
    db = tmp_path / "shared.db"
    shared = Capabilities(shared=True)
    first = check_store(lambda: SqliteStore(db), capabilities=shared)
    second = check_store(lambda: SqliteStore(db), capabilities=shared)
    assert first.prefix != second.prefix and first.ok and second.ok
    assert {o.check for o in second.of("skipped")} == {
        "outbox_order.pending_reads_take_the_oldest_first_up_to_a_limit", "listing.list_summaries",
        "listing.list_empty", "purge.expired_tombstones_go_with_their_marks"}
    store = SqliteStore(db)
    ids = {s.id for s in store.list_executions(limit=10_000).items}
    store.close()
    assert ids and all(i.startswith((first.prefix, second.prefix)) for i in ids)


def test_conformance_tests_gives_pytest_one_test_per_check() -> None:
    test = conformance_tests(DictStore, capabilities=IN_MEMORY)
    [mark] = test.pytestmark  # type: ignore[attr-defined]
    assert mark.args == ("check", [c.name for c in select()])
    assert sorted(mark.args[1]) == sorted(CASES)


def test_the_example_store_outside_the_package_passes_the_kit() -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples/third_party_store"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(CASES) - 3 + 1} passed, 3 skipped" in done.stdout


def test_the_kit_needs_no_pytest() -> None:
    code = ("import sys; sys.modules['pytest'] = None\n"
            "from durastate.testing import check_store, Capabilities\n"
            "from durastate.store.memory.sync import DictStore\n"
            "print(check_store(DictStore, capabilities=Capabilities(durable=False)).ok)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


# The pytest helper's async twin, as a store author's test module uses it: one test per check.
test_async_dict_store_through_the_pytest_helper = conformance_tests_async(
    AsyncDictStore, capabilities=IN_MEMORY, only=["dedupe", "timers", "purge"])
