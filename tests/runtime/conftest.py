"""Shared pieces of the runtime tests: small real definitions, a registry, a store wrapper with hooks."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event, Execution
from durastate.runtime import ManualClock
from durastate.store import DictStore
from durastate.store.base import Emit, ExecutionStore, Spawn, TimerOp
from tests.store.conformance.backends import BACKENDS, BackendRequest, open_backend
from tests.wrapped_store import WrappedStore

INC = {"assign": {"count": {"add": ["$context.count", 1]}}}

COUNTER = {
    "id": "counter",
    "initial": "idle",
    "context": {"count": 0, "peer": None},
    "states": {
        "idle": {
            "on": {
                "inc": {"actions": [INC]},
                "wait": "waiting",
                "stop": "done",
                "poke": {"actions": [{"send": {"event": "inc", "to": "$context.peer"}}]},
            },
        },
        "waiting": {
            "after": {"seconds": 30, "target": "idle"},
            "on": {"inc": {"actions": [INC]}, "rearm": "waiting"},
        },
        "done": {"type": "final", "outcome": "ok"},
    },
}

FORK = {
    "id": "fork",
    "initial": "both",
    "context": {"count": 0},
    "states": {
        "both": {
            "type": "parallel",
            "states": {
                "left": {"initial": "l1", "states": {"l1": {"on": {"go": "l2"}}, "l2": {"type": "final"}}},
                "right": {"initial": "r1", "states": {"r1": {"on": {"go": "r2"}}, "r2": {"type": "final"}}},
            },
            "on_done": "joined",
        },
        "joined": {"type": "final", "outcome": "joined"},
    },
}

INVOKER = {
    "id": "invoker",
    "initial": "calling",
    "states": {
        "calling": {"invoke": {"definition": "$$nope", "context": {}}, "on_done": "ok", "on_error": "failed"},
        "ok": {"type": "final", "outcome": "ok"},
        "failed": {"type": "final", "outcome": "child-failed"},
    },
}


@pytest.fixture
def registry() -> DefinitionRegistry:
    reg = DefinitionRegistry()
    for doc in (COUNTER, FORK):
        reg.register(load_definition(doc))
    return reg


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


class HookedStore(WrappedStore):
    """Delegates to a real store; ``before_commit`` runs inside ``commit`` before the real commit.

    That is exactly the window in which a concurrent writer can slip in.
    """

    def __init__(self, inner: ExecutionStore) -> None:
        super().__init__(inner)
        self.before_commit: Callable[[Execution], None] | None = None
        self.fail_ack_outbox = 0
        self.commits = 0

    def commit(self, exe: Execution, emits: Sequence[Emit], processed_event_id: str | None = None,
               timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
               trace: dict[str, Any] | None = None, **options: Any) -> None:
        hook, self.before_commit = self.before_commit, None
        if hook is not None:
            hook(exe)
        self.commits += 1
        self.inner.commit(exe, emits, processed_event_id, timers, spawns, trace, **options)

    def ack_outbox(self, seq: int) -> None:
        if self.fail_ack_outbox:
            self.fail_ack_outbox -= 1
            raise RuntimeError("simulated crash between send and ack")
        self.inner.ack_outbox(seq)


@pytest.fixture
def dict_store() -> DictStore:
    return DictStore()


@pytest.fixture(params=["dict", "sqlite"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExecutionStore]:
    """A store that hands out live objects, and one that hands out fresh copies."""
    if request.param == "dict":
        yield DictStore()
        return
    from durastate.store import SqliteStore

    store = SqliteStore(tmp_path / "runtime.db")
    yield store
    store.close()


def ev(name: str, eid: str | None = None, **data: Any) -> Event:
    return Event(id=eid or name, name=name, data=data)


SYNC_STORES = ["dict", "sqlite", "postgres", "dynamodb-moto"]
"""The sync stores the runtime's end-to-end tests run on: every backend a worker uses (the async twins share
their logic and have the conformance suite)."""


@pytest.fixture(params=[pytest.param(n, marks=BACKENDS[n].marks) for n in SYNC_STORES])
def every_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExecutionStore]:
    """A fresh, empty store of each sync backend (real SQLite file, real PostgreSQL schema, moto)."""
    req = BackendRequest(tmp_path, unique=f"h{uuid.uuid4().hex[:16]}")
    with open_backend(BACKENDS[request.param], req) as s:
        yield s
