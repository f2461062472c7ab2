"""``AsyncDynamoDBStore``: the async twin of ``DynamoDBStore``, natively async on aiobotocore.

Every call is awaited on one long-lived aiobotocore client, so concurrent tasks issue real parallel
requests through aiohttp's connection pool (no thread pool). aiobotocore is used directly
(``AioSession().create_client("dynamodb")``) rather than aioboto3, which lags aiobotocore's releases.
The logic is :mod:`durastate.store.dynamodb.core`, shared verbatim with the sync store: this module only
drives it with ``await`` (``_run``; the protocol methods that call it are
:class:`~durastate.store.driven.AsyncDriven`'s). A client binds to the event loop that created it —
build the store on the loop you run it on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from durastate.errors import StoreUnavailable
from durastate.store.base import DEFAULT_TRACE_MAX
from durastate.store.driven import AsyncDriven
from durastate.store.dynamodb.claim_check import needs_s3
from durastate.store.dynamodb.client import ClientSettings
from durastate.store.dynamodb.core import DynamoCore, Ops, Probe, Sleep
from durastate.store.dynamodb.errors import error_code, translate

T = TypeVar("T")


class AsyncDynamoDBStore(DynamoCore, AsyncDriven):
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
        s3: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(prefix, trace_max=trace_max, **options)
        self._db = client
        self._s3 = needs_s3(self.context_bucket, s3)
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
                    elif request.service == "s3":
                        response = await getattr(self._s3, request.op)(**request.kwargs)
                        if "Body" in response:  # the core reads bytes, whatever the client streams
                            async with response["Body"] as body:
                                response = {**response, "Body": await body.read()}
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
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        session: Any = None,
        **options: Any,
    ) -> AsyncDynamoDBStore:
        """Build and own an aiobotocore client, wait until the endpoint answers, ensure the tables.

        The same settings as ``DynamoDBStore.create`` (:class:`~durastate.store.dynamodb.client.ClientSettings`).
        ``session``: an ``AioSession`` to build the client from (a new one by default). Reusing one
        across stores saves loading the service model again (a few hundred ms per client).
        """
        from aiobotocore.config import AioConfig
        from aiobotocore.session import AioSession

        settings = ClientSettings.take(endpoint_url, region, options)
        session = session if session is not None else AioSession()
        have_credentials = (await session.get_credentials()) is not None
        kwargs, endpoint, where = settings.client_kwargs(have_credentials)
        stack = AsyncExitStack()
        try:
            client = await stack.enter_async_context(
                session.create_client("dynamodb", config=AioConfig(**settings.config()), **kwargs)
            )
            s3 = None
            if options.get("context_bucket"):
                s3 = await stack.enter_async_context(
                    session.create_client("s3", config=AioConfig(**settings.config()), **kwargs)
                )
            store = cls(client, prefix, sleep=sleep, s3=s3, **options)
            store._stack = stack
            store._where = where
            await store._run(store.wait_ready_ops(endpoint, *settings.patience()))
            if ensure_tables:
                await store.ensure_tables()
        except BaseException:
            await stack.aclose()
            raise
        return store

    async def ensure_tables(self) -> None:
        """Create the seven tables (and their indexes) if absent; wait until they are ACTIVE."""
        await self._run(self.ensure_tables_ops())

    async def close(self) -> None:
        """Release the client if ``create`` built it; an injected client is the caller's to close."""
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()
