"""The machinery of the conformance kit: cases, their context, expectations, and the sync driver.

Every check is written ONCE, as a coroutine over the async store protocol. An async store is awaited
directly, on the caller's event loop. A sync store is wrapped in :class:`AwaitingStore`, whose methods are
coroutines that call the sync method and never suspend — so the very same coroutine runs to completion
with a single ``send(None)`` (:func:`run_sync`), without an event loop and without threads. That keeps one
code path for both protocols and lets the sync checks run anywhere, even inside a running loop.

Checks never use ``assert`` (stripped by ``python -O``, and bare in the message): they call
:func:`expect` and friends, which raise :class:`Expectation` with a sentence saying what was expected and
what the store did.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from durastate.engine.ids import is_system_id
from durastate.engine.model import Event
from durastate.store.base import ExecutionSummary, OutboxEntry, SpawnEntry

T = TypeVar("T")


class Expectation(AssertionError):
    """What a check expected and what the store did instead (the check's name is added by the runner)."""


class SkipCase(Exception):
    """Raised by a check that does not apply to this store (the reason says why)."""


@dataclass(frozen=True)
class Capabilities:
    """What the store under test promises, for the checks whose contract legitimately varies.

    - ``durable``: ``load`` returns an equal but *distinct* object (the store serialises). ``False`` is
      the identity contract of the in-memory stores: ``load`` returns the very object committed.
    - ``trace_gapless``: a commit that lost its compare-and-swap leaves no gap in the trace index.
    - ``expires_tombstones``: ``purge`` itself deletes expired tombstones and counts them in
      ``expired``. ``False`` for a store whose database expires them (DynamoDB's TTL).
    - ``shared``: the store may hold other data (a shared database, another run of the kit at the same
      time). Every read is then narrowed to the ids carrying the check's prefix, every purge to the
      check's own definition ids, and the checks that need the whole store to themselves (an empty
      listing, the first ``n`` outbox entries) are skipped.

    Whether ``commit(..., check_event=True)`` is checked follows the store's ``commit_checks_event``
    attribute (:class:`~durastate.store.EventCheckingStore`).
    """

    durable: bool = True
    trace_gapless: bool = True
    expires_tombstones: bool = True
    shared: bool = False


DEFAULT_CAPABILITIES = Capabilities()
"""What a store promises unless told otherwise: durable, gapless trace, expires its tombstones, not shared."""


@dataclass
class Ctx:
    """What a check works with: the store (async-shaped), its id prefix and the store's capabilities."""

    store: Any
    prefix: str
    caps: Capabilities

    def id(self, name: str) -> str:
        """An execution (or event) id of this check: ``prefix + name``."""
        return self.prefix + name

    def owns(self, execution_id: str) -> bool:
        """Whether an id was made by this check (system records carry the prefix after their kind)."""
        return execution_id.startswith(self.prefix) or (is_system_id(execution_id) and self.prefix in execution_id)

    def ev(self, name: str = "ping", eid: str | None = None, **data: Any) -> Event:
        """An event whose id carries the prefix (so the outbox can be narrowed to this check's entries)."""
        return Event(id=self.id(eid or f"ev-{uuid.uuid4().hex[:12]}"), name=name, data=data)

    # -- reads narrowed to this check when the store is shared ---------------------------------------
    async def outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        got: list[OutboxEntry] = await self.store.pending_outbox(limit)
        return [e for e in got if e.event.id.startswith(self.prefix)] if self.caps.shared else got

    async def spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        got: list[SpawnEntry] = await self.store.pending_spawns(limit)
        return [s for s in got if self.owns(s.parent_id)] if self.caps.shared else got

    async def due(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        got: list[tuple[str, str, float]] = (
            await self.store.due_timers(now) if since is None else await self.store.due_timers(now, since)
        )
        return [t for t in got if self.owns(t[0])] if self.caps.shared else got

    def mine(self, items: list[ExecutionSummary]) -> list[ExecutionSummary]:
        return [s for s in items if self.owns(s.id)] if self.caps.shared else items

    async def listed(self, **filters: Any) -> list[ExecutionSummary]:
        """One page of a listing — every page, narrowed to this check, when the store is shared."""
        if self.caps.shared:
            return await self.collect(100, **filters)
        page = await self.store.list_executions(**filters)
        return list(page.items)

    async def collect(self, limit: int, **filters: Any) -> list[ExecutionSummary]:
        """Every page of a listing (checking the paging rules on the way), narrowed to this check."""
        items: list[ExecutionSummary] = []
        cursor: str | None = None
        for _ in range(100_000):
            page = await self.store.list_executions(limit=limit, cursor=cursor, **filters)
            expect(len(page.items) <= limit, f"a page of list_executions(limit={limit}) holds at most {limit} "
                   f"items, got {len(page.items)}")
            if page.next_cursor is not None:
                expect(len(page.items) == limit, f"only the last page of list_executions(limit={limit}) may be "
                       f"short, but a page with a next_cursor held {len(page.items)}")
            items.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                return self.mine(items)
        raise Expectation("list_executions paging did not terminate (the cursor never came back None)")


# -- expectations ------------------------------------------------------------------------------------


def expect(condition: object, message: str) -> None:
    """Fail the check with ``message`` (what was expected) unless ``condition`` holds."""
    if not condition:
        raise Expectation(message)


def expect_eq(actual: object, expected: object, what: str) -> None:
    """Fail with ``what: expected …, got …`` unless ``actual == expected``."""
    if actual != expected:
        raise Expectation(f"{what}: expected {expected!r}, got {actual!r}")


@dataclass
class Raised:
    """The exception a :func:`expect_raises` block raised (``value``)."""

    value: Any = None


@contextmanager
def expect_raises(kind: type[BaseException] | tuple[type[BaseException], ...], what: str,
                  match: str | None = None) -> Iterator[Raised]:
    """Fail unless the block raises ``kind`` (whose message matches the regex ``match``, if given)."""
    raised = Raised()
    names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    try:
        yield raised
    except kind as exc:
        if match is not None and not re.search(match, str(exc)):
            raise Expectation(f"{what}: expected {names} matching {match!r}, got {exc!r}") from exc
        raised.value = exc
        return
    raise Expectation(f"{what}: expected {names}, but nothing was raised")


# -- cases -------------------------------------------------------------------------------------------


CaseFn = Callable[[Ctx], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    """One check of the contract: ``group.name`` (with ``[param]`` when it is one of a family)."""

    name: str
    group: str
    fn: CaseFn
    doc: str
    exclusive: bool = False
    """Needs the whole store to itself (reads it unnarrowed): skipped when the store is ``shared``."""
    params: dict[str, Any] = field(default_factory=dict)

    async def run(self, store: Any, prefix: str, caps: Capabilities) -> None:
        """Run the check on ``store`` (an async store, or a sync one behind :class:`AwaitingStore`)."""
        if self.exclusive and caps.shared:
            raise SkipCase("needs a store of its own (the store is shared)")
        await self.fn(Ctx(store, prefix, caps), **self.params)  # type: ignore[call-arg]


CASES: dict[str, Case] = {}


def case(group: str, *, exclusive: bool = False,
         params: dict[str, dict[str, Any]] | None = None) -> Callable[[Callable[..., Awaitable[None]]], Any]:
    """Register a check in ``group``; ``params`` makes a family (one case per ``{id: kwargs}``)."""

    def deco(fn: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        base = f"{group}.{fn.__name__}"
        doc = " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())
        for suffix, kwargs in (params or {"": {}}).items():
            name = f"{base}[{suffix}]" if suffix else base
            if name in CASES:
                raise ValueError(f"conformance check {name!r} defined twice")
            CASES[name] = Case(name, group, fn, doc, exclusive, dict(kwargs))
        return fn

    return deco


# -- driving a check over a sync store ------------------------------------------------------------------


class AwaitingStore:
    """A sync store seen through the async protocol: each method is a coroutine that calls the sync method
    and never suspends (attributes such as ``trace_max`` and ``commit_checks_event`` pass through)."""

    def __init__(self, store: Any) -> None:
        object.__setattr__(self, "_store", store)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*args, **kwargs)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._store, name, value)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a check over an :class:`AwaitingStore`) to its end."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a sync conformance check awaited something that suspends: pass an async store to "
                       "the async functions (check_store_async) instead")
