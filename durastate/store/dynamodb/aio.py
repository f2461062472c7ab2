"""``AsyncDynamoDBStore``: the async twin of ``DynamoDBStore``, natively async on aiobotocore.

Every call is awaited on one long-lived aiobotocore client, so concurrent tasks issue real parallel
requests through aiohttp's connection pool (no thread pool). aiobotocore is used directly
(``AioSession().create_client("dynamodb")``) rather than aioboto3, which lags aiobotocore's releases.
The logic is :mod:`durastate.store.dynamodb.core`, shared verbatim with the sync store: this module only
drives it with ``await``. A client binds to the event loop that created it — build the store on the
loop you run it on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from durastate.engine.model import Execution
from durastate.errors import StoreUnavailable
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from durastate.store.dynamodb.client import client_settings, retry_config
from durastate.store.dynamodb.core import DynamoCore, Ops, Probe, Sleep
from durastate.store.dynamodb.errors import error_code, translate

T = TypeVar("T")


class AsyncDynamoDBStore(DynamoCore):
    """The DynamoDB :class:`~durastate.store.AsyncExecutionStore`.

    ``AsyncDynamoDBStore(client, prefix)`` uses an already-entered aiobotocore client (the caller
    closes it); ``await AsyncDynamoDBStore.create(…)`` builds one, owns it and releases it in
    :meth:`close`. Same options as ``DynamoDBStore``.
    """

    def __init__(
        self,
        client: Any,
        prefix: str = "durastate",
        *,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **options: Any,
    ) -> None:
        super().__init__(prefix, trace_max=trace_max, **options)
        self._db = client
        self._sleep = sleep
        self._stack: AsyncExitStack | None = None
        self._where = str(getattr(getattr(client, "meta", None), "endpoint_url", None) or "?")

    # -- the driver: the only place this store differs from the sync one -------------------------------
    async def _run(self, ops: Ops[T]) -> T:
        try:
            request = next(ops)
            while True:
                try:
                    response: Any = None
                    if isinstance(request, Sleep):
                        await self._sleep(request.seconds)
                    elif isinstance(request, Probe):
                        await self._probe(request)
                    else:
                        response = await getattr(self._db, request.op)(**request.kwargs)
                except Exception as exc:
                    request = ops.throw(translate(exc, self._where))
                else:
                    request = ops.send(response)
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def _probe(self, probe: Probe) -> None:
        if probe.host is None:  # AWS itself: any answer, even a refusal (no ListTables right), will do
            try:
                await self._db.list_tables(Limit=1)
            except Exception as exc:
                if error_code(exc) is None:
                    raise
            return
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(probe.host, probe.port), probe.timeout)
        except (OSError, TimeoutError) as exc:
            raise StoreUnavailable(f"nothing answers at {probe.host}:{probe.port} ({exc!r})") from exc
        writer.close()
        await writer.wait_closed()

    @classmethod
    async def create(
        cls,
        prefix: str = "durastate",
        endpoint_url: str | None = None,
        region: str | None = None,
        *,
        ensure_tables: bool = True,
        connect_attempts: int = 15,
        connect_delay: float = 1.0,
        max_attempts: int = 5,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        session: Any = None,
        **options: Any,
    ) -> AsyncDynamoDBStore:
        """Build and own an aiobotocore client, wait until the endpoint answers, ensure the tables.

        ``session``: an ``AioSession`` to build the client from (a new one by default). Reusing one
        across stores saves loading the service model again (a few hundred ms per client).
        """
        from aiobotocore.config import AioConfig
        from aiobotocore.session import AioSession

        session = session if session is not None else AioSession()
        have_credentials = (await session.get_credentials()) is not None
        kwargs, endpoint, where = client_settings(endpoint_url, region, have_credentials)
        stack = AsyncExitStack()
        try:
            client = await stack.enter_async_context(
                session.create_client(
                    "dynamodb",
                    config=AioConfig(**retry_config(max_attempts, connect_timeout, read_timeout)),
                    **kwargs,
                )
            )
            store = cls(client, prefix, sleep=sleep, **options)
            store._stack = stack
            store._where = where
            await store._run(store.wait_ready_ops(endpoint, connect_attempts, connect_delay, connect_timeout))
            if ensure_tables:
                await store.ensure_tables()
        except BaseException:
            await stack.aclose()
            raise
        return store

    async def ensure_tables(self) -> None:
        """Create the seven tables (and their indexes) if absent; wait until they are ACTIVE."""
        await self._run(self.ensure_tables_ops())

    # -- the protocol ----------------------------------------------------------------------------------
    async def load(self, execution_id: str) -> Execution | None:
        return await self._run(self.load_ops(execution_id))

    async def save(self, exe: Execution) -> None:
        await self._run(self.commit_ops(exe, [], None, (), (), None))

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        await self._run(self.commit_ops(exe, emits, processed_event_id, timers, spawns, trace))

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        return await self._run(self.is_processed_ops(execution_id, event_id))

    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        return await self._run(self.load_for_event_ops(execution_id, event_id))

    async def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        return await self._run(self.pending_outbox_ops(limit))

    async def ack_outbox(self, seq: int) -> None:
        await self._run(self.ack_ops("outbox", seq))

    async def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        return await self._run(self.pending_spawns_ops(limit))

    async def ack_spawn(self, seq: int) -> None:
        await self._run(self.ack_ops("spawns", seq))

    async def due_timers(self, now: float) -> list[tuple[str, str, float]]:
        return await self._run(self.due_timers_ops(now))

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        await self._run(self.delete_timer_ops(execution_id, path, fire_at))

    async def list_executions(
        self,
        definition_id: str | None = None,
        status: str | Sequence[str] | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        return await self._run(self.list_ops(definition_id, status, roots_only, limit, cursor))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return await self._run(self.read_trace_ops(execution_id))

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        await self._run(self.append_trace_ops(execution_id, entry))

    async def close(self) -> None:
        """Release the client if ``create`` built it; an injected client is the caller's to close."""
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()
