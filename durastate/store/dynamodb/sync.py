"""``DynamoDBStore``: the serverless store — seven prefixed DynamoDB tables, conditional writes as the CAS.

The boto3 client is injected (duck-typed, so moto or LocalStack clients work as well as real AWS);
boto3 is imported only by :meth:`DynamoDBStore.create`, never at ``import durastate``. The store's logic —
the commit (one conditional write or one ``TransactWriteItems``), the reads, the relay and the sweeper
— lives in :mod:`durastate.store.dynamodb.core` (with the conflict classifier in
:mod:`~durastate.store.dynamodb.errors` and DynamoDB's limits and item sizes in :mod:`~durastate.store.dynamodb.limits`)
and is shared verbatim with ``AsyncDynamoDBStore``; this module only *drives* it with blocking calls
(``_run``; the protocol methods that call it are :class:`~durastate.store.driven.SyncDriven`'s).
Read :mod:`durastate.store.dynamodb.layout` for the layout and for every choice made beyond the seed
design (and why).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from durastate.errors import StoreUnavailable
from durastate.store.base import DEFAULT_TRACE_MAX, OutboxEntry, SpawnEntry
from durastate.store.driven import SyncDriven
from durastate.store.dynamodb.claim_check import needs_s3
from durastate.store.dynamodb.client import ClientSettings
from durastate.store.dynamodb.core import DynamoCore, Ops, Probe, Sleep
from durastate.store.dynamodb.errors import error_code, translate

T = TypeVar("T")


class DynamoDBStore(DynamoCore, SyncDriven):
    """The DynamoDB :class:`~durastate.store.ExecutionStore`.

    ``DynamoDBStore(client, prefix="durastate")`` uses an injected boto3 DynamoDB client (its lifecycle
    stays the caller's; call :meth:`ensure_tables` to create the tables).
    ``DynamoDBStore.create(endpoint_url=…)`` builds and owns the client, waits for the endpoint and
    ensures the tables. ``s3``: the boto3 S3 client of the ``context_bucket`` option (required with
    it; ``create`` builds one from the same session and settings). ``sleep`` is what backoff waits
    with (inject a recorder in tests); the other options are
    :class:`~durastate.store.dynamodb.core.DynamoCore`'s (``trace_max``, ``recent_events``, retries and
    backoff, TTLs, ``context_bucket`` and ``claim_check_bytes``).
    """

    def __init__(
        self,
        client: Any,
        prefix: str = "durastate",
        *,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        sleep: Callable[[float], None] = time.sleep,
        s3: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(prefix, trace_max=trace_max, **options)
        self._db = client
        self._s3 = needs_s3(self.context_bucket, s3)
        self._sleep = sleep
        self._owned = False
        self._where = str(getattr(getattr(client, "meta", None), "endpoint_url", None) or "?")

    # -- the driver: the only place this store differs from the async one -----------------------------
    def _run(self, ops: Ops[T]) -> T:
        try:
            request = next(ops)
            while True:
                try:
                    response: Any = None
                    if isinstance(request, Sleep):
                        self._sleep(request.seconds)
                    elif isinstance(request, Probe):
                        self._probe(request)
                    elif request.service == "s3":
                        response = getattr(self._s3, request.op)(**request.kwargs)
                        if "Body" in response:  # the core reads bytes, whatever the client streams
                            response = {**response, "Body": response["Body"].read()}
                    else:
                        response = getattr(self._db, request.op)(**request.kwargs)
                except Exception as exc:
                    request = ops.throw(translate(exc, self._where))
                else:
                    request = ops.send(response)
        except StopIteration as stop:
            result: T = stop.value
            return result

    def _probe(self, probe: Probe) -> None:
        if probe.host is None:  # AWS itself: any answer, even a refusal (no ListTables right), will do
            try:
                self._db.list_tables(Limit=1)
            except Exception as exc:
                if error_code(exc) is None:
                    raise
            return
        try:
            socket.create_connection((probe.host, probe.port), timeout=probe.timeout).close()
        except OSError as exc:
            raise StoreUnavailable(f"nothing answers at {probe.host}:{probe.port} ({exc})") from exc

    @classmethod
    def create(
        cls,
        prefix: str = "durastate",
        endpoint_url: str | None = None,
        region: str | None = None,
        *,
        ensure_tables: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        session: Any = None,
        **options: Any,
    ) -> DynamoDBStore:
        """Build the boto3 client, wait until the endpoint answers, ensure the tables.

        ``endpoint_url=None`` means real AWS (or the standard ``AWS_ENDPOINT_URL*`` variables). The
        endpoint is probed up to ``connect_attempts`` times, ``connect_delay`` seconds apart (a
        LocalStack still starting), then :class:`~durastate.errors.StoreUnavailable` says what to check.
        ``options`` are :class:`~durastate.store.dynamodb.client.ClientSettings`' keywords (those two,
        ``max_attempts``, ``connect_timeout``, ``read_timeout``, with their defaults) and the store's.
        ``session``: the ``boto3.session.Session`` to build the client from (a new one by default).
        """
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        settings = ClientSettings.take(endpoint_url, region, options)
        session = session if session is not None else boto3.session.Session()
        kwargs, endpoint, where = settings.client_kwargs(session.get_credentials() is not None)
        client = session.client("dynamodb", config=Config(**settings.config()), **kwargs)
        s3 = session.client("s3", config=Config(**settings.config()), **kwargs) if options.get(
            "context_bucket") else None
        store = cls(client, prefix, sleep=sleep, s3=s3, **options)
        store._owned = True
        store._where = where
        try:
            store._run(store.wait_ready_ops(endpoint, *settings.patience()))
            if ensure_tables:
                store.ensure_tables()
        except BaseException:
            store.close()
            raise
        return store

    reads_queue_shards = True
    """``pending_outbox`` / ``pending_spawns`` take ``shards``: the relay's stream trigger names them."""

    def pending_outbox(self, limit: int | None = None, shards: Collection[int] | None = None) -> list[OutboxEntry]:
        """The oldest outbox entries; with ``shards``, of those queue shards only (see ``_oldest``)."""
        return self._run(self.pending_outbox_ops(limit, shards))

    def pending_spawns(self, limit: int | None = None, shards: Collection[int] | None = None) -> list[SpawnEntry]:
        """The oldest spawn intents; with ``shards``, of those queue shards only."""
        return self._run(self.pending_spawns_ops(limit, shards))

    def ensure_tables(self) -> None:
        """Create the seven tables (and their indexes) if absent; wait until they are ACTIVE."""
        self._run(self.ensure_tables_ops())

    def close(self) -> None:
        """Release the client if this store built it (``create``); an injected client is the caller's."""
        if self._owned:
            self._owned = False
            close = getattr(self._db, "close", None)
            if close is not None:
                close()
