"""The worker tells a ``ContextKeepingStore`` (the SQL stores) when a commit leaves the context unchanged, and
only when it can prove it: the context's values are the very objects they were when the execution was loaded
or kept, and its definition runs no Python callable (which could change a value in place)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.ids import START
from durastate.engine.model import Emit, Event, Execution, Spawn, TimerOp
from durastate.runtime import ManualClock, Worker
from durastate.store.base import ExecutionStore
from durastate.store.sqlite.sync import SqliteStore
from tests.store.conformance.backend_postgres import DSN
from tests.store.conformance.backends import BACKENDS, BackendRequest, open_backend
from tests.wrapped_store import WrappedStore

BLOB = {f"line{i:04d}": {"sku": f"SKU-{i:07d}", "qty": 1, "note": "x" * 40} for i in range(300)}


def bump_in_place(context: dict[str, Any], event: Event) -> None:
    """User code that changes a nested value in place (allowed: what it changes is stored)."""
    context["blob"]["line0000"]["qty"] += 1


def chart(name: str, actions: list[Any]) -> dict[str, Any]:
    return {"id": name, "initial": "a", "context": {},
            "states": {"a": {"on": {"ping": {"target": "b", "actions": actions}}},
                       "b": {"on": {"ping": {"target": "a", "actions": actions}}}}}


CHARTS = {
    "still": chart("still", []),  # the event only moves between two states
    "nested": chart("nested", [{"assign": {"blob.line0000.qty": {"add": ["$context.blob.line0000.qty", 1]}}}]),
    "top": chart("top", [{"assign": {"n": {"add": ["$context.n", 1]}}}]),
    "in_place": chart("in_place", [{"call": bump_in_place}]),
}


class Vouching(WrappedStore):
    """Records what each commit was told of the context."""

    def __init__(self, inner: ExecutionStore) -> None:
        super().__init__(inner)
        self.told: list[bool] = []

    def commit(self, exe: Execution, emits: Sequence[Emit], processed_event_id: str | None = None,
               timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
               trace: dict[str, Any] | None = None, **options: Any) -> None:
        self.told.append(bool(options.get("context_unchanged")))
        self.inner.commit(exe, emits, processed_event_id, timers, spawns, trace, **options)


@pytest.fixture(params=[pytest.param(n, marks=BACKENDS[n].marks) for n in ("sqlite", "postgres")])
def request_of(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, BackendRequest]]:
    yield request.param, BackendRequest(tmp_path, unique=f"h{uuid.uuid4().hex[:16]}")


@pytest.fixture
def registry() -> DefinitionRegistry:
    reg = DefinitionRegistry()
    for doc in CHARTS.values():
        reg.register(doc)
    return reg


def reopened(store: Any) -> Any:
    """Another store on the same database."""
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path)
    from durastate.store.postgres.sync import PostgresStore

    return PostgresStore.from_dsn(DSN, schema=store.schema, connect_attempts=1)


def run(store: ExecutionStore, registry: DefinitionRegistry, name: str, pings: int, **worker: Any) -> Worker:
    w = Worker(store, registry, ManualClock(1_700_000_000.0), **worker)
    w.handle("x", Event(id="x:start", name=START, data={"definition_id": name,
                                                                "context": {"blob": copy.deepcopy(BLOB), "n": 0}}))
    for i in range(pings):
        w.handle("x", Event(id=f"x:{i}", name="ping"))
    return w


@pytest.mark.parametrize(("name", "told"), [
    ("still", True),  # nothing touched the context: not written again
    ("nested", False),  # a nested assign replaces the values on its path
    ("top", False),  # a top-level value replaced
    ("in_place", False),  # Python runs: identity proves nothing
])
def test_the_worker_vouches_only_for_a_context_it_can_prove_unchanged(
    request_of: tuple[str, BackendRequest], registry: DefinitionRegistry, name: str, told: bool
) -> None:
    backend, req = request_of
    with open_backend(BACKENDS[backend], req) as inner:
        store = Vouching(inner)
        w = run(store, registry, name, 4)  # type: ignore[arg-type]
        assert w.keeps
        assert store.told == [False] + [told] * 4  # the start creates the execution: always written
        w2 = Worker(store, registry, ManualClock(1_700_000_000.0), keep_committed=0)  # loads before each event
        store.told.clear()
        w2.handle("x", Event(id="x:again", name="ping"))
        assert store.told == [told]


@pytest.mark.parametrize("name", ["still", "nested", "top", "in_place"])
@pytest.mark.parametrize("keep", [None, 0])
def test_what_the_steps_did_to_the_context_is_what_is_stored(
    request_of: tuple[str, BackendRequest], registry: DefinitionRegistry, name: str, keep: int | None
) -> None:
    backend, req = request_of
    with open_backend(BACKENDS[backend], req) as store:
        w = run(store, registry, name, 5, keep_committed=keep)
        kept = w._take("x") if w.keeps else None
        exe = reopened(store).load("x")  # a new connection: nothing remembered
    assert exe is not None and exe.version == 6
    qty = 1 + (5 if name in ("nested", "in_place") else 0)
    expected = {"blob": {**BLOB, "line0000": {**BLOB["line0000"], "qty": qty}}, "n": 5 if name == "top" else 0}
    assert exe.context == expected
    if kept is not None:
        assert kept.context == expected
