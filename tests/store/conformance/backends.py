"""The registry of store backends the conformance suite runs against.

Every backend is a *factory*: a function taking a :class:`BackendRequest` and returning a context manager
that yields a fresh, EMPTY store and cleans it up on exit. The suite calls it once per store it needs
(most tests need one; some need a second, independent store).

Adding a backend takes a few lines, here or in a sibling module named ``backend_<name>.py`` (every such
module in this folder is imported automatically, so several backends can be added without editing the
same file)::

    from .backends import BackendRequest, register

    @register("postgres", durable=True)
    @contextlib.contextmanager
    def _postgres(req: BackendRequest) -> Iterator[ExecutionStore]:
        store = PostgresStore.from_dsn(dsn_for_a_fresh_schema(req.unique))   # or pytest.skip("why")
        store.trace_max = req.trace_max
        try:
            yield store
        finally:
            store.close()

An async store registers an ASYNC context manager with ``is_async=True``; the conformance checks
(``durastate.testing``) await it on an event loop of its own, and :func:`open_backend` presents it to
sync-protocol tests through :class:`~.adapter.SyncAdapter`, so the very same tests cover it::

    @register("async-postgres", durable=True, is_async=True)
    @contextlib.asynccontextmanager
    async def _async_postgres(req: BackendRequest) -> AsyncIterator[AsyncExecutionStore]:
        store = await AsyncPostgresStore.from_dsn(...)
        ...

Flags:

- ``durable``: the store serialises; ``load`` returns an equal but *distinct* object. ``False`` means the
  identity contract of the in-memory stores (``load`` returns the very object that was committed).
- ``trace_gapless``: a commit that lost its CAS leaves no gap in the trace index (true for every store
  the project ships; a backend that allocates indexes outside its transaction would set it False).
- ``marks``: pytest marks for the backend's parameter (e.g. ``pytest.mark.slow``).

A factory that cannot run here (a server that is not reachable) calls ``pytest.skip`` with the reason.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durastate.store.base import DEFAULT_TRACE_MAX, AsyncExecutionStore, ExecutionStore

Factory = Callable[["BackendRequest"], AbstractContextManager[Any] | AbstractAsyncContextManager[Any]]


@dataclass(frozen=True)
class BackendRequest:
    """What a factory is asked for: where it may put files, the trace ring size, a unique name."""

    tmp_path: Path
    trace_max: int | None = DEFAULT_TRACE_MAX
    unique: str = "h0"
    """Unique per store (``h`` + 16 hex digits): use it for a file name, a schema, a table prefix."""


@dataclass(frozen=True)
class Backend:
    name: str
    factory: Factory
    durable: bool
    is_async: bool = False
    trace_gapless: bool = True
    marks: tuple[Any, ...] = field(default=())


BACKENDS: dict[str, Backend] = {}


def register(name: str, *, durable: bool, is_async: bool = False, trace_gapless: bool = True,
             marks: tuple[Any, ...] = ()) -> Callable[[Factory], Factory]:
    """Add a backend to the suite (a decorator on its factory)."""

    def deco(factory: Factory) -> Factory:
        if name in BACKENDS:
            raise ValueError(f"conformance backend {name!r} registered twice")
        BACKENDS[name] = Backend(name, factory, durable, is_async, trace_gapless, marks)
        return factory

    return deco


@contextlib.contextmanager
def open_backend(backend: Backend, req: BackendRequest) -> Iterator[ExecutionStore]:
    """Open one fresh store of ``backend`` as a SYNC store (async ones behind the adapter)."""
    if not backend.is_async:
        with backend.factory(req) as store:  # type: ignore[union-attr]
            yield store
        return
    import asyncio

    from .adapter import SyncAdapter

    with asyncio.Runner() as runner:
        stack = contextlib.AsyncExitStack()
        try:
            astore = runner.run(stack.enter_async_context(backend.factory(req)))  # type: ignore[arg-type]
            yield SyncAdapter(runner, astore)  # type: ignore[misc]
        finally:
            runner.run(stack.aclose())


# -- the stores durastate ships ------------------------------------------------------------------------


@register("dict", durable=False)
@contextlib.contextmanager
def _dict(req: BackendRequest) -> Iterator[ExecutionStore]:
    from durastate.store.memory.sync import DictStore

    store = DictStore(trace_max=req.trace_max)
    yield store
    store.close()


@register("async-dict", durable=False, is_async=True)
@contextlib.asynccontextmanager
async def _async_dict(req: BackendRequest) -> AsyncIterator[AsyncExecutionStore]:
    from durastate.store.memory.aio import AsyncDictStore

    store = AsyncDictStore(trace_max=req.trace_max)
    yield store
    await store.close()


@register("sqlite", durable=True)
@contextlib.contextmanager
def _sqlite(req: BackendRequest) -> Iterator[ExecutionStore]:
    from durastate.store.sqlite.sync import SqliteStore

    store = SqliteStore(req.tmp_path / f"{req.unique}.db", trace_max=req.trace_max)
    try:
        yield store
    finally:
        store.close()


@register("async-sqlite", durable=True, is_async=True)
@contextlib.asynccontextmanager
async def _async_sqlite(req: BackendRequest) -> AsyncIterator[AsyncExecutionStore]:
    from durastate.store.sqlite.aio import AsyncSqliteStore

    store = AsyncSqliteStore(req.tmp_path / f"{req.unique}.db", trace_max=req.trace_max)
    try:
        yield store
    finally:
        await store.close()


# -- plug-ins: every backend_<name>.py next to this file -------------------------------------------

for _info in pkgutil.iter_modules([str(Path(__file__).parent)]):
    if _info.name.startswith("backend_"):
        importlib.import_module(f"{__package__}.{_info.name}")
