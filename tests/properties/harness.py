"""The machinery of the property suite: stores per example, a recording store wrapper, a driver that
delivers message bodies the way a worker does, and exact (type-strict) comparisons.

Isolation: a store that is cheap to open (in-memory, SQLite) is opened fresh for every example; one that
is not (PostgreSQL, DynamoDB: a schema or tables each) is opened once per test and every example works in
its own *namespace* — a fresh, fixed-length id prefix that every execution id of the example starts with.
At the end of an example its armed timers are deleted, so a later example's sweeper never fires them.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import settings

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import is_system_id
from durastate.engine.model import Event, Execution
from durastate.engine.values import check_json
from durastate.errors import DurastateError, InvalidValue, MalformedEvent
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.worker import HandleResult, returns_live_objects
from durastate.store.base import ExecutionStore, ExecutionSummary
from durastate.transport import parse_envelope
from tests.store.conformance.backends import BACKENDS, Backend, BackendRequest, open_backend

from .conftest import PROFILE
from .definitions import DEFINITIONS

T0 = 1_700_000_000.0
PREFIX_LEN = 6
FAR_FUTURE = T0 + 10**9
"""Later than any timer an example arms (finite: DynamoDB cannot compare with infinity)."""
ENDED = ("finished", "failed", "cancelled", "terminated")

# -- examples per store -------------------------------------------------------------------------------

FRESH_PER_EXAMPLE = {"dict", "async-dict", "sqlite", "async-sqlite"}
"""Backends cheap enough to open once per example (the others share one store per test, by namespace)."""

EXAMPLE_SHARE: dict[str, float] = {
    # in-memory and SQLite: ~20-80 ms an example (a fresh store each)
    "dict": 1.0,
    "async-dict": 1.0,
    "sqlite": 1.0,
    "async-sqlite": 1.0,
    # PostgreSQL: ~0.1-0.2 s an example (a dozen round trips an event): about a third of the examples
    "postgres": 0.35,
    "async-postgres": 0.35,
    # DynamoDB on moto in-process: ~0.5 s an example (~25 ms a request, several a commit): a fifth
    "dynamodb-moto": 0.2,
    # DynamoDB on moto's HTTP server (marked slow): ~1 s an example: a tenth (the minimum of 3 for the
    # redelivery property, which runs every example twice)
    "dynamodb-server": 0.1,
    "async-dynamodb-server": 0.1,
}
"""Each store's share of the profile's examples, so that the whole file stays around a minute on a 2-core
machine: in the ``ci`` profile (40) that is 40 examples per property on the fast stores, 14 on PostgreSQL,
8 on DynamoDB-on-moto and 4 on the moto server (the redelivery property runs 0.6 of that: 24/8/5/3). A
backend registered later gets a fifth until it is listed here."""

SLOW = {"dynamodb-server", "async-dynamodb-server"}
"""Backends that need moto's server process: marked ``slow`` (on top of their own marks)."""


def settings_for(backend: str, share: float = 1.0) -> settings:
    """The profile's settings with ``backend``'s share of its examples (at least 3)."""
    base = settings.get_profile(PROFILE)
    n = max(3, round(base.max_examples * EXAMPLE_SHARE.get(backend, 0.2) * share))
    return settings(base, max_examples=n)


def backend_params() -> list[Any]:
    import pytest

    out = []
    for name, b in BACKENDS.items():
        marks = tuple(b.marks) + ((pytest.mark.slow,) if name in SLOW and pytest.mark.slow not in b.marks else ())
        out.append(pytest.param(name, id=name, marks=marks))
    return out


def registry() -> DefinitionRegistry:
    reg = DefinitionRegistry()
    for doc in DEFINITIONS:
        reg.register(load_definition(doc))
    return reg


REGISTRY = registry()


class Namespaces:
    """Fresh namespaces ``(store, prefix)`` of one backend, one (or two) per example."""

    def __init__(self, backend: Backend, tmp_path: Path) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.fresh = backend.name in FRESH_PER_EXAMPLE
        self._stack = contextlib.ExitStack()
        self._shared: ExecutionStore | None = None
        self._n = itertools.count(1)

    def _open(self) -> contextlib.AbstractContextManager[ExecutionStore]:
        return open_backend(self.backend, BackendRequest(self.tmp_path, unique=f"h{uuid.uuid4().hex[:16]}"))

    def prefix(self) -> str:
        n = next(self._n)
        p = f"n{n:04x}-"
        assert len(p) == PREFIX_LEN, "over 65535 namespaces in one test: raise PREFIX_LEN"
        return p

    @contextlib.contextmanager
    def namespace(self, prefix: str | None = None) -> Iterator[tuple[ExecutionStore, str]]:
        prefix = prefix or self.prefix()
        if self.fresh:
            with self._open() as store:
                yield store, prefix
            return
        if self._shared is None:
            self._stack = contextlib.ExitStack()
            self._shared = self._stack.enter_context(self._open())
        store = self._shared
        try:
            yield store, prefix
        except BaseException:
            # A failed (or rejected) example may leave what breaks every later one — an outbox entry
            # that cannot be read back, say — so the next example gets a new store.
            self._shared = None
            self._stack.close()
            raise
        disarm(store, prefix)

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Namespaces:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def disarm(store: ExecutionStore, prefix: str) -> None:
    """Delete the armed timers of ``prefix``'s executions (best effort: the example is over)."""
    with contextlib.suppress(Exception):
        for eid, path, fire_at in store.due_timers(FAR_FUTURE):
            if eid.startswith(prefix):
                store.delete_timer(eid, path, fire_at)


# -- the recording store ------------------------------------------------------------------------------


class RecordingStore:
    """Delegates to a real store and keeps what was last committed (or saved) for each execution."""

    def __init__(self, inner: ExecutionStore) -> None:
        self.inner = inner
        self.committed: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.problems: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def returns_live_objects(self) -> bool:
        return returns_live_objects(self.inner)

    def commit(self, exe: Execution, emits: Any, processed_event_id: str | None = None, timers: Any = (),
               spawns: Any = (), trace: dict[str, Any] | None = None, **options: Any) -> None:
        emits, spawns = list(emits), list(spawns)
        self.inner.commit(exe, emits, processed_event_id, timers, spawns, trace, **options)
        self.writes += 1
        self.committed[exe.id] = copy.deepcopy(exe.model_dump())
        self._check(exe, emits, spawns)

    def save(self, exe: Execution) -> None:
        self.inner.save(exe)
        if is_system_id(exe.id):
            # The version archive: written before the first start of a version commits, so that no
            # execution ever pins a version that is not archived. It is not the start's effect, and a
            # refused start may leave it (test_regressions checks that it leaves nothing else).
            return
        self.writes += 1
        self.committed[exe.id] = copy.deepcopy(exe.model_dump())
        self._check(exe, [], [])

    def _check(self, exe: Execution, emits: list[Any], spawns: list[Any]) -> None:
        """What was committed must be what every store can keep: JSON that round-trips, and emitted events
        within the entry rules (the relay of a durable store parses them back as events)."""
        problem = storable_problem(exe.model_dump(), f"execution {exe.id!r}")
        for target, ev in emits:
            problem = problem or storable_problem(ev.data, f"the data of {ev.name!r} emitted to {target!r}")
            try:
                check_json(ev.data, f"the data of {ev.name!r} emitted to {target!r}")
            except InvalidValue as exc:
                problem = problem or str(exc)
        for spawn in spawns:
            problem = problem or storable_problem(list(spawn), f"a spawn of {exe.id!r}")
        if problem:
            self.problems.append(f"committed a value no store can keep: {problem}")


# -- the driver ---------------------------------------------------------------------------------------


class UnexpectedError(AssertionError):
    """Something other than a typed :class:`DurastateError` escaped where only those may."""


@dataclass
class Outcome:
    kind: str
    """``wire`` (parse_envelope refused it), ``refused`` (the worker raised a typed error) or ``accepted``."""
    result: HandleResult | None = None
    error: BaseException | None = None
    target_id: str | None = None
    event: Event | None = None

    @property
    def accepted(self) -> bool:
        return self.kind == "accepted"


@dataclass
class Driver:
    """A :class:`LocalRuntime` on a recording wrapper of ``store``; external messages go through
    ``parse_envelope`` and straight into the worker (so its errors are seen), internal traffic (outbox,
    spawns, timers) through the runtime's rounds. Any untyped exception fails the example."""

    store: ExecutionStore
    registry: DefinitionRegistry = field(default_factory=lambda: REGISTRY)
    clock: ManualClock = field(default_factory=lambda: ManualClock(T0))

    def __post_init__(self) -> None:
        self.rec = RecordingStore(self.store)
        self.rt = LocalRuntime(self.rec, self.registry, clock=self.clock)  # type: ignore[arg-type]
        self.unexpected: list[tuple[str, str, BaseException]] = []
        handle = self.rt.worker.handle

        def checked(target_id: str, event: Event) -> HandleResult:
            try:
                return handle(target_id, event)
            except DurastateError:
                raise
            except Exception as exc:
                self.unexpected.append((target_id, event.name, exc))
                raise

        self.rt.worker.handle = checked  # type: ignore[method-assign]

    def deliver(self, body: Any) -> Outcome:
        try:
            env = parse_envelope(body)
        except MalformedEvent as exc:
            return Outcome("wire", error=exc)
        except Exception as exc:
            raise UnexpectedError(f"parse_envelope raised {type(exc).__name__}: {exc!r}") from exc
        writes = self.rec.writes
        try:
            result = self.rt.worker.handle(env.target_id, env.event)
        except DurastateError as exc:
            if self.rec.writes != writes:
                raise AssertionError(f"the worker refused {env.event.name!r} for {env.target_id!r} with "
                                     f"{type(exc).__name__} but committed something first") from exc
            self.settle()
            return Outcome("refused", error=exc, target_id=env.target_id, event=env.event)
        except Exception as exc:
            raise UnexpectedError(f"the worker raised {type(exc).__name__} for {env.event.name!r} to "
                                  f"{env.target_id!r}: {exc!r}") from exc
        self.settle()
        return Outcome("accepted", result=result, target_id=env.target_id, event=env.event)

    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    def settle(self) -> None:
        try:
            stats = self.rt.run_until_idle(max_rounds=200)
        except Exception as exc:
            raise UnexpectedError(f"a runtime round (relay/sweeper/worker) raised {type(exc).__name__}: "
                                  f"{exc!r}") from exc
        assert stats.idle, f"still busy after 200 rounds: {stats}"
        if self.rec.problems:
            raise AssertionError(self.rec.problems[0])
        if self.unexpected:
            target, name, exc = self.unexpected[0]
            raise UnexpectedError(f"the worker raised {type(exc).__name__} applying internal event {name!r} "
                                  f"to {target!r}: {exc!r}") from exc


# -- reading a namespace back -------------------------------------------------------------------------


def list_all(store: ExecutionStore, prefix: str = "") -> list[ExecutionSummary]:
    """Every listed execution whose id starts with ``prefix`` (all pages; no id twice)."""
    out: list[ExecutionSummary] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(100_000):
        page = store.list_executions(limit=100, cursor=cursor)
        for s in page.items:
            assert s.id not in seen, f"listing returned {s.id!r} twice"
            seen.add(s.id)
            if s.id.startswith(prefix):
                out.append(s)
        if not page.next_cursor:
            return out
        cursor = page.next_cursor
    raise AssertionError("listing never ended")


def snapshot(store: ExecutionStore, prefix: str) -> dict[str, Any]:
    """Everything the store holds for ``prefix``: executions, traces, armed timers, outbox, spawns."""
    exes = {}
    for s in list_all(store, prefix):
        exe = store.load(s.id)
        assert exe is not None, f"{s.id!r} is listed but does not load"
        exes[s.id] = {"exe": exe.model_dump(), "trace": store.read_trace(s.id)}
    return {
        "executions": exes,
        "timers": sorted(t for t in store.due_timers(FAR_FUTURE) if t[0].startswith(prefix)),
        "outbox": [(e.seq, e.target_id, e.event.model_dump()) for e in store.pending_outbox()],
        "spawns": [(s.seq, s.child_id) for s in store.pending_spawns()],
    }


def check_namespace(driver: Driver, prefix: str) -> dict[str, dict[str, Any]]:
    """Property 2's postcondition: every execution of the namespace lists, loads, equals exactly what
    the worker committed, and survives a JSON round trip exactly. Returns the loaded dumps by id."""
    store = driver.store
    listed = {s.id: s for s in list_all(store, prefix)}
    committed = {k: v for k, v in driver.rec.committed.items() if k.startswith(prefix)}
    assert set(listed) == set(committed), (
        f"listed {sorted(set(listed) - set(committed))} never committed; committed "
        f"{sorted(set(committed) - set(listed))} not listed"
    )
    armed: dict[str, set[tuple[str, float]]] = {}
    for eid, path, fire_at in store.due_timers(FAR_FUTURE):
        armed.setdefault(eid, set()).add((path, fire_at))
    loaded: dict[str, dict[str, Any]] = {}
    for eid, want in committed.items():
        try:
            exe = store.load(eid)
        except Exception as exc:
            raise AssertionError(f"{eid!r} was committed but load raises {type(exc).__name__}: {exc!r}") from exc
        assert exe is not None, f"{eid!r} was committed but does not load"
        got = exe.model_dump()
        diff = strict_diff(want, got)
        assert diff is None, f"{eid!r}: what loads differs from what the worker committed: {diff}"
        s = listed[eid]
        assert (s.definition_id, s.version, s.status, s.outcome, s.active_path, s.parent_id) == (
            exe.definition_id, exe.version, exe.status, exe.outcome, exe.active_path, exe.parent_id
        ), f"{eid!r}: its listing summary {s} disagrees with the execution"
        try:
            text = exe.model_dump_json()
            again = Execution.model_validate_json(text).model_dump()
        except Exception as exc:
            raise AssertionError(f"{eid!r}: JSON round trip raises {type(exc).__name__}: {exc!r}") from exc
        diff = strict_diff(got, again)
        assert diff is None, f"{eid!r}: JSON round trip is not exact: {diff}"
        # Idle (every due timer fired and applied): the timers the execution counts on are exactly the
        # ones the store will fire.
        believed = set(exe.timers.items())
        assert armed.get(eid, set()) == believed, (
            f"{eid!r} ({exe.status}, in {exe.active_path!r}) counts on timers {sorted(believed)} but the store "
            f"has {sorted(armed.get(eid, set()))} armed"
        )
        loaded[eid] = got
    # Idle: a running execution that still waits for a child finds it not ended (a child that ended has
    # told its parent by now).
    for eid, exe_dump in loaded.items():
        if exe_dump["status"] != "running":
            continue
        for cid, ref in exe_dump["children"].items():
            if ref["status"] == "running":
                child = store.load(cid)
                assert child is not None and child.status not in ENDED, (
                    f"{eid!r} still waits for its child {cid!r}, which is "
                    f"{'missing' if child is None else child.status}"
                )
    return loaded


# -- exact comparison ---------------------------------------------------------------------------------


def strict_diff(a: Any, b: Any, path: str = "$") -> str | None:
    """Where ``a`` and ``b`` differ, comparing types too (``1`` vs ``1.0`` vs ``True``, ``0.0`` vs
    ``-0.0``); ``None`` if they are exactly equal. Dict order is ignored, list order is not."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {_short(a)} != {type(b).__name__} {_short(b)}"
    if isinstance(a, float):
        return None if a.hex() == b.hex() else f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(map(repr, a.keys() ^ b.keys()))} differ"
        for k in a:
            d = strict_diff(a[k], b[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = strict_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {_short(a)} != {_short(b)}"


_MAX_DIGITS_BITS = 14_284
"""Integers of more than this many bits may have over 4300 digits, past what JSON parsers here read."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_problem(value: Any, where: str = "value") -> str | None:
    """Why ``value`` would not survive a JSON round trip on every store (``None`` if it would): a
    non-finite float, an integer of over 4300 digits, a lone surrogate, a non-string key, a non-JSON type."""
    stack = [(value, where)]
    while stack:
        v, w = stack.pop()
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int):
            if v.bit_length() > _MAX_DIGITS_BITS:
                return f"{w} is an integer of about {int(v.bit_length() * 0.30103)} digits (JSON readers stop at 4300)"
        elif isinstance(v, float):
            if not math.isfinite(v):
                return f"{w} is non-finite {v!r}"
        elif isinstance(v, str):
            if _SURROGATE.search(v):
                return f"{w} holds a lone surrogate ({v!r})"
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    return f"{w} has a non-string key {k!r}"
                if _SURROGATE.search(k):
                    return f"{w} has a key holding a lone surrogate ({k!r})"
                stack.append((x, f"{w}.{k}"))
        elif isinstance(v, list | tuple):
            stack.extend((x, f"{w}[{i}]") for i, x in enumerate(v))
        else:
            return f"{w} is a {type(v).__name__}"
    return None


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def renamed(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` replaced by ``new`` in every string and key (compares two namespaces)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {renamed(k, old, new): renamed(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, old, new) for v in value]
    return value


def utf8_printable(text: str) -> bool:
    """Whether ``text`` can be written out (a log line, a DLQ attribute, the CLI's one-line error)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

