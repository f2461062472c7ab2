"""The DynamoDB store's logic, written once for the sync and the async store.

Every store operation is a *generator* that yields requests — :class:`Call` (one DynamoDB API call by
its botocore method name), :class:`Sleep` (a backoff pause) or :class:`Probe` (is the endpoint up?)
— and receives each call's response
(or has the call's exception thrown into it). ``DynamoDBStore`` drives these generators with a boto3
client, ``AsyncDynamoDBStore`` with an aiobotocore client and ``await``; that is the only difference
between them, so their semantics cannot drift apart. Nothing here does I/O or imports a client library.

The tables and every choice made beyond the seed design (and why) are documented in
:mod:`durastate.store.dynamodb.layout`; DynamoDB's limits and item sizes are in
:mod:`~durastate.store.dynamodb.limits`, error classification in :mod:`~durastate.store.dynamodb.errors`,
shard keys in :mod:`~durastate.store.dynamodb.sharding` and the filter of spilled event ids in
:mod:`~durastate.store.dynamodb.bloom`. What remains here is what a store operation *does*.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from durastate.engine.ids import SYSTEM_PREFIX
from durastate.engine.model import STATUSES, Event, Execution
from durastate.engine.search import index_entry, values_match
from durastate.errors import ExecutionTooLarge, StoreConflict, StoreThrottled, StoreUnavailable
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Condition,
    Emit,
    ExecutionPage,
    ExecutionSummary,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
    check_conditions,
    decode_cursor,
    encode_cursor,
    hides_system,
    normalize_status,
    summary_matches,
    trim_bound,
)
from durastate.store.dynamodb import recent_ids
from durastate.store.dynamodb.bloom import BLOOM_BITS, bloom_add, bloom_may_contain
from durastate.store.dynamodb.claim_check import (
    DATA_REF,
    DEFAULT_CLAIM_CHECK_BYTES,
    ClaimCheck,
    check_threshold,
    claim_check,
    context_prefix,
    missing_bucket,
)
from durastate.store.dynamodb.client import endpoint_address
from durastate.store.dynamodb.errors import DENIED_CODES, cancellation_reasons, classify, error_code
from durastate.store.dynamodb.layout import (
    ADDED_INDEXES,
    TABLES,
    TTL_ATTRIBUTE,
    add_index_request,
    check_prefix,
    create_table_request,
    key_schema,
)
from durastate.store.dynamodb.limits import (
    BATCH_GET_MAX,
    BATCH_WRITE_MAX,
    MAX_ITEM_BYTES,
    MAX_TXN_BYTES,
    MAX_TXN_ITEMS,
    Item,
    N,
    S,
    item_size,
)
from durastate.store.dynamodb.sharding import (
    QUEUE_SHARDS,
    TIMER_SHARDS,
    ended_shard,
    execution_shard,
    queue_key,
    shard_of,
)
from durastate.store.retention import (
    PurgeResult,
    check_purge,
    ended_index_value,
    is_purgeable,
    stamp_ended,
    tombstone,
)

T = TypeVar("T")

DEFAULT_RECENT_EVENTS = 24
"""At most this many applied event ids are kept in the execution item (``rids``) before they spill, as one
chunk, to ``processed``. Beyond :data:`RECENT_FLOOR` an id is kept only while it costs no write unit (the
item stays within the kilobyte it needs anyway), so a small execution spills once per 24 events, a large
one once per 8 (a uuid id takes 17 bytes of the item: :mod:`~durastate.store.dynamodb.recent_ids`). 24
uuid-sized ids make a chunk item of about 950 bytes: one write unit."""
RECENT_FLOOR = 8
"""Event ids kept in the execution item even when they make it cross a kilobyte (the layout before chunks)."""
MAX_RECENT_EVENTS = 64
SPILL_CHUNK_PREFIX = "~spill~"
SEARCH_ENTRY_PREFIX = "~search~"
"""The id of a search entry item in the executions table: ``~search~{execution id}~{field}`` (an id no
execution can have: ``~`` starts only the runtime's own ids)."""


def search_term(name: str, value: Any) -> str:
    """The ``by_search`` index key of one value: its typed key (:func:`index_entry`) and the value."""
    key, text, num = index_entry(name, value)
    return f"{key}={text}" if text is not None else f"{key}={num!r}"


def _searched(item: Item | None) -> str:
    """An item's ``search`` attribute (its search values as compact JSON), or "" if it has none."""
    return item["search"]["S"] if item and "search" in item else ""
"""Sort key prefix (in ``processed``) of a chunk of spilled event ids: ``~spill~{version:012d}``, the version
whose commit spilled them. An event id of a user cannot start with ``~``; a derived one never has this prefix."""
_KB = 1024
TIMERS_SEEN_REUSE = 1.0
"""Seconds for which a windowed ``due_timers`` (with ``since``) reuses the previous call's answer to "is any
timer armed at all?" instead of Scanning again: a hopping sweep makes two reads in a row (the overdue timers,
then the window after what it hopped), and an idle deployment's sweep must stay one request."""


# -- requests a store operation yields ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Call:
    """One API call: the client's method name and its keyword arguments — of the DynamoDB client, or
    (``service="s3"``) of the S3 client that holds claim-checked executions
    (:mod:`~durastate.store.dynamodb.claim_check`)."""

    op: str
    kwargs: dict[str, Any]
    service: Literal["dynamodb", "s3"] = "dynamodb"


@dataclass(frozen=True, slots=True)
class Sleep:
    """Pause before a retry (the driver sleeps or awaits)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Probe:
    """Is the endpoint up? A TCP connect to ``host:port`` (a local endpoint: cheap, no botocore retry
    backoff), or for AWS itself (``host`` None) one cheap API call."""

    host: str | None
    port: int
    timeout: float


Request = Call | Sleep | Probe
Ops = Generator[Request, Any, T]


def _coalesce_timers(timers: Iterable[TimerOp]) -> list[TimerOp]:
    """One op per path, the last one winning: a transaction may touch an item only once, and a
    cancel-then-schedule (a state re-entered in one step) must end armed."""
    last: dict[str, TimerOp] = {}
    for op in timers:
        last.pop(op.path, None)
        last[op.path] = op
    return list(last.values())


@dataclass(slots=True)
class _Plan:
    """Everything one commit will write, built and size-checked before any request."""

    exe_item: Item
    data: str
    blob: ClaimCheck | None
    recent: tuple[str, ...]
    spill: bytes | None
    evicted: tuple[str, ...]
    outbox: list[Item]
    spawns: list[Item]
    processed: Item | None
    timers: list[TimerOp]
    trace: str | None
    search: list[Item]
    """The search entries whose value the commit changes (items of the executions table, see layout)."""

    @property
    def single(self) -> bool:
        return not (self.outbox or self.spawns or self.processed or self.timers or self.trace is not None
                    or self.search)


class DynamoCore:
    """Configuration, caches and the operation generators shared by the sync and async stores.

    Options (keyword-only, the same on both stores):

    - ``trace_max``: trace ring size per execution (``DEFAULT_TRACE_MAX``; 0/None keeps every step).
    - ``history``: keep every trace step (``read_history``; see :mod:`durastate.store.base`): the ring's
      drop leaves the commit's transaction (one item less), and the steps stay until ``trace_ttl``.
    - ``recent_events``: at most this many applied event ids are kept inside the execution item
      (default 24, see :data:`DEFAULT_RECENT_EVENTS`; 0 = the seed's layout, one ``processed`` item written
      in every commit's transaction).
    - ``max_retries``, ``backoff_base``, ``backoff_cap``: the bounded, jittered exponential backoff
      for throttling and transaction conflicts (seconds), then :class:`~durastate.errors.StoreThrottled`.
    - ``processed_ttl`` / ``trace_ttl``: seconds after which DynamoDB's TTL may delete a dedupe mark /
      a trace step (``expires_at``; None = never, the default). An expired mark no longer dedupes a
      redelivery of its event, so keep it well above the longest possible redelivery delay.
    - ``cache_size``: executions whose version, recent ids and spill filter are remembered between
      load and commit.
    - ``clock``: epoch seconds, for the TTL attribute.
    - ``record_trace``: False drops the trace steps commits carry (``append_trace`` still records).
      A traced commit is always a transaction with two more items (the step and the ring's drop),
      about 4 more write units; deployments that do not read traces turn it off to keep state-only
      steps at one single-item write.
    - ``context_bucket``: the S3 bucket that holds executions too large for an item (a claim check,
      see :mod:`~durastate.store.dynamodb.claim_check`); None (the default) refuses them with
      :class:`~durastate.errors.ExecutionTooLarge`. The store's driver needs an S3 client then.
    - ``claim_check_bytes``: an execution whose JSON is larger than this goes to the bucket
      (:data:`~durastate.store.dynamodb.claim_check.DEFAULT_CLAIM_CHECK_BYTES`).
    """

    def __init__(
        self,
        prefix: str = "durastate",
        *,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        recent_events: int = DEFAULT_RECENT_EVENTS,
        max_retries: int = 5,
        backoff_base: float = 0.05,
        backoff_cap: float = 2.0,
        cache_size: int = 4096,
        processed_ttl: float | None = None,
        trace_ttl: float | None = None,
        clock: Callable[[], float] = time.time,
        record_trace: bool = True,
        history: bool = False,
        context_bucket: str | None = None,
        claim_check_bytes: int = DEFAULT_CLAIM_CHECK_BYTES,
    ) -> None:
        check_prefix(prefix)
        check_threshold(claim_check_bytes)
        self.context_bucket = context_bucket
        self.claim_check_bytes = claim_check_bytes
        if not 0 <= recent_events <= MAX_RECENT_EVENTS:
            raise ValueError(f"recent_events must be between 0 and {MAX_RECENT_EVENTS}")
        self.prefix = prefix
        self.trace_max: int | None = trace_max
        self.history = history
        self.recent_events = recent_events
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.processed_ttl = processed_ttl
        self.trace_ttl = trace_ttl
        self._clock = clock
        self.record_trace = record_trace
        self._names = {spec.name: f"{prefix}_{spec.name}" for spec in TABLES}
        # execution id -> (stored version, its recent event ids, its spill filter or None when the item
        # has none, its ``search`` attribute or "", the S3 key of its claim-checked context or None). A (id,
        # version) pair names exactly one stored item, so an entry is never stale, only possibly superseded;
        # it saves the read of ``rids`` and ``spill`` a commit would otherwise need, and tells it which search
        # entries it changes and which S3 object it supersedes.
        self._known: OrderedDict[str, tuple[int, tuple[str, ...], bytes | None, str, str | None]] = OrderedDict()
        # execution id -> (version, next trace index) after a commit through this store: the next
        # traced commit from that version skips the max-index Query (single writer per execution).
        self._trace_next: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._where = "?"
        self._timers_seen: tuple[float, bool] | None = None  # (monotonic time, whether any timer was armed)

    def table(self, name: str) -> str:
        """The full name of one of the seven tables (``{prefix}_{name}``)."""
        return self._names[name]

    def _expiry(self, ttl: float | None) -> Item:
        """The TTL attribute DynamoDB deletes an item by, when that kind of item is set to expire."""
        return {TTL_ATTRIBUTE: N(int(self._clock() + ttl))} if ttl is not None else {}

    def _mark_item(self, execution_id: str, event_id: str) -> Item:
        return {"execution_id": S(execution_id), "event_id": S(event_id), **self._expiry(self.processed_ttl)}

    # -- small helpers --------------------------------------------------------------------------------
    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_cap, self.backoff_base * 2.0**attempt)
        return ceiling / 2 + self._rng.random() * ceiling / 2

    def _remember(
        self, execution_id: str, version: int, recent: tuple[str, ...], spill: bytes | None, search: str,
        ref: str | None = None,
    ) -> None:
        """``ref``: the S3 key of the version's claim-checked context (None: in the item)."""
        with self._lock:
            self._known[execution_id] = (version, recent, spill, search, ref)
            self._known.move_to_end(execution_id)
            while len(self._known) > self._cache_size:
                self._known.popitem(last=False)

    def _remember_trace(self, execution_id: str, old: int, traced_idx: int | None) -> None:
        """After a commit from ``old``: the next trace index, if known, now belongs to ``old + 1``."""
        with self._lock:
            hit = self._trace_next.pop(execution_id, None)
            if traced_idx is not None:
                self._trace_next[execution_id] = (old + 1, traced_idx + 1)
            elif hit is not None and hit[0] == old:
                self._trace_next[execution_id] = (old + 1, hit[1])
            while len(self._trace_next) > self._cache_size:
                self._trace_next.popitem(last=False)

    def _recall_trace(self, execution_id: str, version: int) -> int | None:
        with self._lock:
            hit = self._trace_next.get(execution_id)
        return hit[1] if hit is not None and hit[0] == version else None

    def _recall(self, execution_id: str, version: int) -> tuple[tuple[str, ...], bytes | None, str] | None:
        """The stored ``rids``, ``spill`` and ``search`` of ``(execution_id, version)`` if known (a new
        execution's are known: nothing applied, nothing spilled, no search value)."""
        if version == 0:
            return (), b"", ""
        with self._lock:
            hit = self._known.get(execution_id)
        return (hit[1], hit[2], hit[3]) if hit is not None and hit[0] == version else None

    def _recall_ref(self, execution_id: str, version: int) -> tuple[bool, str | None]:
        """(whether it is known, the S3 key of ``(execution_id, version)``'s context or None)."""
        if version == 0:
            return True, None
        with self._lock:
            hit = self._known.get(execution_id)
        return (True, hit[4]) if hit is not None and hit[0] == version else (False, None)

    def _batch_read_pays(self, execution_id: str) -> bool:
        """Whether the dedupe check should read the execution and the mark together (one BatchGetItem,
        two read units) rather than the execution first (one GetItem, one read unit, plus a second
        request when its filter cannot rule the event out): with the seed layout (every mark in
        ``processed``), and for an execution last seen without a filter, where the second request is
        certain. (An execution with a filter keeps its spilled ids in chunks, which a point read cannot
        find: its second request is a Query.) A superseded entry only costs: both paths are exact."""
        if self.recent_events == 0:
            return True
        with self._lock:
            hit = self._known.get(execution_id)
        if hit is None:
            return False
        return hit[2] is None

    def _forget(self, execution_id: str) -> None:
        with self._lock:
            self._known.pop(execution_id, None)
            self._trace_next.pop(execution_id, None)

    @staticmethod
    def _rids(item: Item | None) -> tuple[str, ...]:
        if not item or "rids" not in item:
            return ()
        return tuple(recent_ids.unpack(v) for v in item["rids"]["L"])

    @staticmethod
    def _spill(item: Item | None) -> bytes | None:
        """The item's filter of spilled ids; None when it has none (written by the seed layout, or
        before the filter existed): then nothing can be ruled out without reading ``processed``."""
        if not item or "spill" not in item:
            return None
        return bytes(item["spill"]["B"])

    def _call(
        self, op: str, kwargs: dict[str, Any], service: Literal["dynamodb", "s3"] = "dynamodb"
    ) -> Ops[dict[str, Any]]:
        """One API call, retried with backoff while the error is transient (bounded)."""
        attempt = 0
        while True:
            try:
                response: dict[str, Any] = yield Call(op, kwargs, service)
                return response
            except Exception as exc:
                verdict = classify(exc)
                if verdict != "retry":
                    if error_code(exc) == "ResourceNotFoundException":
                        raise StoreUnavailable(
                            f"a table of prefix {self.prefix!r} does not exist at {self._where} ({exc}); "
                            "create the tables (DynamoDBStore.create() or the CDK stack) or fix the prefix"
                        ) from exc
                    raise
                if attempt >= self.max_retries:
                    reasons = [r.get("Code") for r in cancellation_reasons(exc)]
                    raise StoreThrottled(
                        f"DynamoDB {op} was refused {attempt + 1} times ({error_code(exc)}"
                        f"{' ' + str(reasons) if reasons else ''}): the table is throttled or its items are "
                        "contended; nothing of the request was applied — retry later or add capacity"
                    ) from exc
                yield Sleep(self._backoff(attempt))
                attempt += 1

    def _pages(self, op: str, kwargs: dict[str, Any]) -> Ops[list[Item]]:
        """Every item of a Scan / Query, following LastEvaluatedKey (a page is at most 1 MB)."""
        items: list[Item] = []
        kw = dict(kwargs)
        while True:
            resp = yield from self._call(op, kw)
            items.extend(resp.get("Items", []))
            last = resp.get("LastEvaluatedKey")
            if not last:
                return items
            kw["ExclusiveStartKey"] = last

    def _batch_get(self, request: dict[str, Any]) -> Ops[dict[str, list[Item]]]:
        out: dict[str, list[Item]] = {name: [] for name in request}
        pending = request
        attempt = 0
        while pending:
            resp = yield from self._call("batch_get_item", {"RequestItems": pending})
            for name, items in resp.get("Responses", {}).items():
                out.setdefault(name, []).extend(items)
            pending = resp.get("UnprocessedKeys") or {}
            if pending:
                if attempt >= self.max_retries:
                    raise StoreThrottled(
                        f"DynamoDB BatchGetItem left keys unprocessed {attempt + 1} times: the table is "
                        "throttled; retry later or add capacity"
                    )
                yield Sleep(self._backoff(attempt))
                attempt += 1
        return out

    def _batch_write(self, table: str, requests: list[dict[str, Any]]) -> Ops[None]:
        for start in range(0, len(requests), BATCH_WRITE_MAX):
            pending: dict[str, Any] = {table: requests[start : start + BATCH_WRITE_MAX]}
            attempt = 0
            while pending:
                resp = yield from self._call("batch_write_item", {"RequestItems": pending})
                pending = resp.get("UnprocessedItems") or {}
                if pending:
                    if attempt >= self.max_retries:
                        raise StoreThrottled(
                            f"DynamoDB BatchWriteItem left items unprocessed {attempt + 1} times: the "
                            "table is throttled; retry later or add capacity"
                        )
                    yield Sleep(self._backoff(attempt))
                    attempt += 1

    # -- tables -----------------------------------------------------------------------------------------
    def ensure_tables_ops(self, wait_attempts: int = 60, wait_delay: float = 1.0) -> Ops[None]:
        """Create the seven tables if absent (an existing one is fine) and wait until all are ACTIVE.

        Credentials without the right to create (or describe) tables mean the tables are managed
        elsewhere (the CDK stack): that is not an error here; a missing table is reported, clearly, by
        the first operation that needs it.
        """
        created: dict[str, dict[str, Any]] = {}
        for spec in TABLES:
            try:
                resp = yield from self._call("create_table", create_table_request(self.prefix, spec))
                created[spec.name] = resp.get("TableDescription", {})
            except Exception as exc:
                if error_code(exc) in DENIED_CODES:
                    return
                if error_code(exc) != "ResourceInUseException":
                    raise  # already exists is fine; anything else is real
        for spec in TABLES:
            name = self.table(spec.name)
            for attempt in range(wait_attempts + 1):
                desc = created.pop(spec.name, None)  # a fresh table's own description saves a call
                if desc is None:
                    try:
                        desc = (yield from self._call("describe_table", {"TableName": name}))["Table"]
                    except Exception as exc:
                        if error_code(exc) in DENIED_CODES:
                            return
                        raise
                keys = [(k["AttributeName"], k["KeyType"]) for k in desc.get("KeySchema", [])]
                want = [(k["AttributeName"], k["KeyType"]) for k in key_schema(spec.keys)]
                if keys and keys != want:
                    raise StoreUnavailable(
                        f"table {name} exists keyed by {keys}, but this version of durastate keys it by "
                        f"{want}; an outbox or spawns table holds only undelivered work: let the "
                        "previous version's relay drain it, then delete it and let create() (or the CDK "
                        "stack) rebuild it"
                    )
                indexes = {
                    i["IndexName"]: i.get("IndexStatus", "ACTIVE")
                    for i in desc.get("GlobalSecondaryIndexes", [])
                }
                missing = [i.name for i in spec.indexes if i.name not in indexes]
                added = [i for i in spec.indexes if i.name in missing and i.name in ADDED_INDEXES]
                # DynamoDB builds one new index of a table at a time: ask for the next once the last is built.
                building = any(state != "ACTIVE" for state in indexes.values())
                for index in added[: 0 if building else 1]:
                    # An index added by a later version of the layout: add it to the table in place.
                    try:
                        yield from self._call("update_table", add_index_request(self.prefix, spec, index))
                    except Exception as exc:
                        if error_code(exc) in DENIED_CODES:
                            return
                        raise
                    indexes[index.name] = "CREATING"
                queued = [i.name for i in added]
                missing = [name for name in missing if name not in queued]
                if missing:
                    raise StoreUnavailable(
                        f"table {name} exists without the index {missing[0]!r} durastate queries; create it "
                        "with this version of durastate (DynamoDBStore.create() or the CDK stack), or "
                        "delete the table and let create() rebuild it"
                    )
                if desc.get("TableStatus") == "ACTIVE" and all(s == "ACTIVE" for s in indexes.values()) and not added:
                    break
                if attempt == wait_attempts:
                    raise StoreUnavailable(f"table {name} did not become ACTIVE; check it in the console")
                yield Sleep(wait_delay)

    def wait_ready_ops(
        self, endpoint_url: str | None, attempts: int, delay: float, timeout: float
    ) -> Ops[None]:
        """Probe the endpoint until it answers (a LocalStack or moto that is still starting)."""
        host, port = endpoint_address(endpoint_url)
        for attempt in range(1, attempts + 1):
            try:
                yield Probe(host, port, timeout)
                return
            except StoreUnavailable as exc:
                if attempt == attempts:
                    raise StoreUnavailable(
                        f"DynamoDB at {self._where} did not answer after {attempts} attempts "
                        f"{delay:g}s apart ({exc.__cause__ or exc}); check that it is running "
                        "(LocalStack: `docker compose up` in localstack/; moto: `moto_server -p PORT`), "
                        "that endpoint_url and the region are right, and raise connect_attempts if it "
                        "starts slowly"
                    ) from exc
                yield Sleep(delay)

    # -- reads ------------------------------------------------------------------------------------------
    def _execution(self, item: Item | None, execution_id: str) -> Ops[Execution | None]:
        if not item:
            return None
        item, data = yield from self._data(item, execution_id)
        if item is None:
            return None
        exe = Execution.model_validate_json(data)
        ref = item[DATA_REF]["S"] if DATA_REF in item else None
        self._remember(exe.id, int(item["version"]["N"]), self._rids(item), self._spill(item), _searched(item),
                       ref)
        return exe

    def _data(self, item: Item, execution_id: str, attempts: int = 5) -> Ops[tuple[Item | None, str]]:
        """The execution JSON of ``item``: in the item, or (claim-checked) its S3 object.

        The object of a superseded version is deleted once the next commit lands, so a reader that read
        the item just before finds it gone: it reads the item again (now naming the new object)."""
        for _ in range(attempts):
            if DATA_REF not in item:
                return item, str(item["data"]["S"])
            key = str(item[DATA_REF]["S"])
            if self.context_bucket is None:
                raise missing_bucket(execution_id, key)
            try:
                resp = yield Call("get_object", {"Bucket": self.context_bucket, "Key": key}, "s3")
                return item, bytes(resp["Body"]).decode("utf-8")
            except Exception as exc:
                if error_code(exc) not in ("NoSuchKey", "404"):
                    raise
            resp = yield from self._call("get_item", {
                "TableName": self.table("executions"),
                "Key": {"id": S(execution_id)},
                "ConsistentRead": True,
                "ProjectionExpression": ", ".join(self._LOAD_NAMES),
                "ExpressionAttributeNames": dict(self._LOAD_NAMES),
            })
            fresh = resp.get("Item")
            if fresh is None:
                return None, ""
            if fresh.get(DATA_REF) == item.get(DATA_REF):
                raise StoreUnavailable(
                    f"the S3 object {key!r} holding execution {execution_id!r} is missing from bucket "
                    f"{self.context_bucket!r}: was it deleted outside durastate, or is this the wrong bucket?"
                )
            item = fresh
        raise StoreThrottled(f"execution {execution_id!r} changed {attempts} times while being read; retry")

    _LOAD_NAMES = {"#d": "data", "#v": "version", "#r": "rids", "#f": "spill", "#s": "search", "#c": DATA_REF}
    _MARK_NAMES = {"#v": "version", "#r": "rids", "#f": "spill", "#s": "search", "#c": DATA_REF}

    def load_ops(self, execution_id: str) -> Ops[Execution | None]:
        resp = yield from self._call(
            "get_item",
            {
                "TableName": self.table("executions"),
                "Key": {"id": S(execution_id)},
                "ConsistentRead": True,
                "ProjectionExpression": ", ".join(self._LOAD_NAMES),
                "ExpressionAttributeNames": dict(self._LOAD_NAMES),
            },
        )
        return (yield from self._execution(resp.get("Item"), execution_id))

    def _with_mark(
        self, execution_id: str, event_id: str, projection: str, names: dict[str, str]
    ) -> Ops[tuple[Item | None, bool]]:
        """The execution item and the event's ``processed`` mark in one BatchGetItem."""
        exe_t, proc_t = self.table("executions"), self.table("processed")
        got = yield from self._batch_get(
            {
                exe_t: {
                    "Keys": [{"id": S(execution_id)}],
                    "ConsistentRead": True,
                    "ProjectionExpression": projection,
                    "ExpressionAttributeNames": names,
                },
                proc_t: {
                    "Keys": [{"execution_id": S(execution_id), "event_id": S(event_id)}],
                    "ConsistentRead": True,
                },
            }
        )
        item = got[exe_t][0] if got[exe_t] else None
        return item, bool(got[proc_t]) or event_id in self._rids(item)

    def _dedupe_read(
        self, execution_id: str, event_id: str, names: dict[str, str]
    ) -> Ops[tuple[Item | None, bool]]:
        """The execution item and whether ``event_id`` was applied to it — exactly.

        Usually one strongly consistent GetItem (1 read unit): the id is in ``rids`` (applied), or the
        item's ``spill`` filter proves it was never spilled to ``processed`` (not applied: every applied
        id not in ``rids`` is in the filter of every later version). Otherwise — a filter false
        positive, or an item without a filter — the ``processed`` mark is read too. No item means no
        mark: marks are written only for ids of an existing execution (in its commit's transaction,
        or behind it for ids it already holds in ``rids``), and an execution item is deleted only as an
        expired tombstone, after which its id is free again.
        """
        if self._batch_read_pays(execution_id):
            return (yield from self._with_mark(execution_id, event_id, ", ".join(names), names))
        resp = yield from self._call(
            "get_item",
            {
                "TableName": self.table("executions"),
                "Key": {"id": S(execution_id)},
                "ConsistentRead": True,
                "ProjectionExpression": ", ".join(names),
                "ExpressionAttributeNames": dict(names),
            },
        )
        item = resp.get("Item")
        if item is None:
            return None, False
        if event_id in self._rids(item):
            return item, True
        spill = self._spill(item)
        if spill is None:  # no filter: every spilled id has a mark of its own
            mark = yield from self._call(
                "get_item",
                {
                    "TableName": self.table("processed"),
                    "Key": {"execution_id": S(execution_id), "event_id": S(event_id)},
                    "ConsistentRead": True,
                    "ProjectionExpression": "#e",
                    "ExpressionAttributeNames": {"#e": "event_id"},
                },
            )
            return item, "Item" in mark
        if not bloom_may_contain(spill, event_id):
            return item, False
        return item, (yield from self._spilled(execution_id, event_id))

    def _spilled(self, execution_id: str, event_id: str) -> Ops[bool]:
        """Whether ``event_id`` is among ``execution_id``'s spilled ids: its chunks (and any single marks a
        durastate before chunks wrote), newest first, a page of a few at a time (a real duplicate is
        usually recent; a filter false positive reads them all: about 1 read unit per 100 spilled ids)."""
        kw: dict[str, Any] = {
            "TableName": self.table("processed"),
            "KeyConditionExpression": "#x = :x",
            "ExpressionAttributeNames": {"#x": "execution_id"},
            "ExpressionAttributeValues": {":x": S(execution_id)},
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": 8,
        }
        while True:
            resp = yield from self._call("query", kw)
            for mark in resp.get("Items", []):
                if ("ids" in mark and event_id in mark["ids"]["SS"]) or (
                    "ids" not in mark and mark["event_id"]["S"] == event_id
                ):
                    return True
            last = resp.get("LastEvaluatedKey")
            if not last:
                return False
            kw["ExclusiveStartKey"] = last

    def load_for_event_ops(self, execution_id: str, event_id: str) -> Ops[tuple[Execution | None, bool]]:
        item, seen = yield from self._dedupe_read(execution_id, event_id, self._LOAD_NAMES)
        return (yield from self._execution(item, execution_id)), seen

    def is_processed_ops(self, execution_id: str, event_id: str) -> Ops[bool]:
        _, seen = yield from self._dedupe_read(execution_id, event_id, self._MARK_NAMES)
        return seen

    # -- commit -----------------------------------------------------------------------------------------
    def _cas(self, old: int) -> dict[str, Any]:
        if old == 0:
            return {
                "ConditionExpression": "attribute_not_exists(#i)",
                "ExpressionAttributeNames": {"#i": "id"},
            }
        return {
            "ConditionExpression": "#v = :ov",
            "ExpressionAttributeNames": {"#v": "version"},
            "ExpressionAttributeValues": {":ov": N(old)},
        }

    def _next_recent(
        self, recent: tuple[str, ...], event_id: str | None, costs_a_unit: Callable[[tuple[str, ...]], bool]
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the new ``rids``, the ids to write to ``processed`` first).

        ``rids`` spill — all but the newest id, as one chunk — when they would exceed ``recent_events``,
        or, past :data:`RECENT_FLOOR`, when keeping them would cost the item a write unit
        (``costs_a_unit(ids)``: the item would cross a kilobyte it does not cross with the newest id
        alone)."""
        ids = list(recent)
        if event_id is not None and self.recent_events > 0 and event_id not in ids:
            ids.append(event_id)
        if len(ids) <= self.recent_events and (
            len(ids) <= min(RECENT_FLOOR, self.recent_events) or event_id is None or not costs_a_unit(tuple(ids))
        ):
            return tuple(ids), ()
        keep = ids[-1:] if self.recent_events > 0 else []
        return tuple(keep), tuple(dict.fromkeys(ids[: len(ids) - len(keep)]))

    def _plan(
        self,
        exe: Execution,
        old: int,
        recent: tuple[str, ...],
        spill: bytes | None,
        emits: list[Emit],
        processed_event_id: str | None,
        timers: list[TimerOp],
        spawns: list[Spawn],
        trace: dict[str, Any] | None,
        searched: str = "",
    ) -> _Plan:
        """What the commit writes; ``searched``: the stored item's ``search`` attribute (which search
        entries it changes)."""
        if exe.status != "running" or exe.ended_at is not None:
            stamp_ended(exe, self._clock())
        exe.version = old + 1
        try:
            data = exe.model_dump_json()
        finally:
            exe.version = old
        item: Item = {
            "id": S(exe.id),
            "data": S(data),
            "version": N(old + 1),
            "definition_id": S(exe.definition_id),
            "status": S(exe.status),
        }
        for name in ("parent_id", "outcome", "active_path"):
            value = getattr(exe, name)
            if value is not None:
                item[name] = S(value)
        for name in ("created_at", "updated_at"):  # broken out for listings (not in the status index)
            at = getattr(exe, name)
            if at is not None:
                item[name] = N(at)
        values = {k: v for k, v in exe.search.items() if v is not None}
        if values:  # broken out for listings by search value (read with the summaries, not from ``data``)
            item["search"] = S(json.dumps(values, separators=(",", ":")))
        item.update(self._retention_attributes(exe))
        blob = claim_check(exe.id, data, self.context_bucket, self.claim_check_bytes)
        if blob is not None:
            del item["data"]
            item[DATA_REF] = S(blob.key)
        if spill is not None and self.recent_events > 0:
            item["spill"] = {"B": spill or bytes(BLOOM_BITS // 8)}  # its size once anything spilled

        def with_rids(ids: tuple[str, ...]) -> Item:
            return {**item, "rids": {"L": [recent_ids.pack(i) for i in ids]}} if ids else item

        def costs_a_unit(ids: tuple[str, ...]) -> bool:
            return -(-item_size(with_rids(ids)) // _KB) > -(-item_size(with_rids(ids[-1:])) // _KB)

        new_recent, evicted = self._next_recent(recent, processed_event_id, costs_a_unit)
        # The filter must hold every applied id that is not in ``rids``. The seed layout writes marks only
        # to ``processed`` (and spills every id it finds in ``rids``), so it drops the filter; and an item
        # without one (written by the seed layout, or before filters) never gets one back.
        new_spill = None if self.recent_events == 0 or spill is None else bloom_add(spill, evicted)
        item = with_rids(new_recent)
        item.pop("spill", None)
        if new_spill is not None:
            item["spill"] = {"B": new_spill}
        hint = "keep large payloads out of the context and event data (store them elsewhere, keep a key)"
        size = item_size(item)
        if size > MAX_ITEM_BYTES and self.context_bucket is None:
            raise ExecutionTooLarge(
                f"execution {exe.id!r}", size, MAX_ITEM_BYTES,
                "open the store with context_bucket=NAME to keep large executions in S3, or " + hint,
            )
        if size > MAX_ITEM_BYTES:
            raise ExecutionTooLarge(f"execution {exe.id!r}", size, MAX_ITEM_BYTES, hint)
        placeholder = 10**18  # sizes are checked before seqs exist; a seq never gets longer than this
        outbox = [self._outbox_item(placeholder, target, event) for target, event in emits]
        spawn_items = [self._spawn_item(placeholder, exe.id, cid, rp, ctx) for cid, rp, ctx in spawns]
        for what, it in [
            *((f"event {e.id!r} emitted by {exe.id!r}", o) for (_, e), o in zip(emits, outbox, strict=True)),
            *((f"spawn of {s[0]!r}", o) for s, o in zip(spawns, spawn_items, strict=True)),
        ]:
            size = item_size(it)
            if size > MAX_ITEM_BYTES:
                raise ExecutionTooLarge(what, size, MAX_ITEM_BYTES, hint)
        processed = None
        if processed_event_id is not None and self.recent_events == 0:
            processed = self._mark_item(exe.id, processed_event_id)
        trace_json = json.dumps(trace, separators=(",", ":")) if trace is not None else None
        entries = self._search_items(exe, json.loads(searched) if searched else {})
        plan = _Plan(
            item, data, blob, new_recent, new_spill, evicted, outbox, spawn_items, processed, timers, trace_json,
            entries,
        )
        if not plan.single:
            self._check_transaction(exe.id, plan, placeholder)
        return plan

    @staticmethod
    def _search_items(exe: Execution, before: dict[str, Any]) -> list[Item]:
        """The search entries a commit puts: one per field whose value changed from the stored item's
        (``before``), holding its new term — or none, which takes it out of the sparse ``by_search`` index."""
        out: list[Item] = []
        for name in dict.fromkeys([*exe.search, *before]):
            value = exe.search.get(name)
            old = before.get(name)
            if value == old and type(value) is type(old):
                continue
            entry: Item = {"id": S(f"{SEARCH_ENTRY_PREFIX}{exe.id}~{name}"), "execution": S(exe.id)}
            if value is not None:
                entry["term"] = S(search_term(name, value))
            out.append(entry)
        return out

    @staticmethod
    def _retention_attributes(exe: Execution) -> Item:
        """The ``ended`` index's keys for an ended (purgeable) execution; the TTL of a tombstone."""
        end = ended_index_value(exe)
        if end is not None:
            return {"ended_shard": S(ended_shard(exe.status, exe.id)), "ended_at": N(end)}
        if exe.expires_at is not None:
            return {TTL_ATTRIBUTE: N(math.ceil(exe.expires_at))}
        return {}

    def _check_transaction(self, execution_id: str, plan: _Plan, placeholder: int) -> None:
        sizes = [item_size(plan.exe_item)]
        sizes += [item_size(o) for o in plan.outbox] + [item_size(s) for s in plan.spawns]
        if plan.processed is not None:
            sizes.append(item_size(plan.processed))
        sizes += [item_size(self._timer_item(execution_id, op)) for op in plan.timers]
        sizes += [item_size(e) for e in plan.search]
        if plan.trace is not None:
            trace_item = self._trace_item(execution_id, placeholder, plan.trace)
            if item_size(trace_item) > MAX_ITEM_BYTES:
                raise ExecutionTooLarge(
                    f"trace step of {execution_id!r}",
                    item_size(trace_item),
                    MAX_ITEM_BYTES,
                    "trace less per step, or pass trace=None",
                )
            sizes.append(item_size(trace_item))
            if trim_bound(self.trace_max, self.history):
                sizes.append(item_size({"execution_id": S(execution_id), "idx": N(placeholder)}))
        what = f"commit of execution {execution_id!r}"
        hint = "one step emits, spawns or arms too much; split the work over several steps"
        if len(sizes) > MAX_TXN_ITEMS:
            raise ExecutionTooLarge(what + " (items)", len(sizes), MAX_TXN_ITEMS, hint)
        if sum(sizes) > MAX_TXN_BYTES:
            raise ExecutionTooLarge(what, sum(sizes), MAX_TXN_BYTES, hint)

    @staticmethod
    def _outbox_item(seq: int, target_id: str | None, event: Event) -> Item:
        item: Item = {**queue_key(seq), "event": S(event.model_dump_json())}
        if target_id is not None:
            item["target_id"] = S(target_id)
        return item

    @staticmethod
    def _spawn_item(seq: int, parent_id: str, child_id: str, root_path: str, context: dict[str, Any]) -> Item:
        return {
            **queue_key(seq),
            "parent_id": S(parent_id),
            "child_id": S(child_id),
            "root_path": S(root_path),
            "context": S(json.dumps(context, separators=(",", ":"))),
        }

    @staticmethod
    def _timer_item(execution_id: str, op: TimerOp) -> Item:
        return {
            "execution_id": S(execution_id),
            "path": S(op.path),
            "fire_at": N(op.fire_at),
            "shard": S(shard_of(execution_id)),
        }

    def _trace_item(self, execution_id: str, idx: int, entry_json: str) -> Item:
        return {
            "execution_id": S(execution_id),
            "idx": N(idx),
            "entry": S(entry_json),
            **self._expiry(self.trace_ttl),
        }

    def commit_ops(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Iterable[TimerOp],
        spawns: Iterable[Spawn],
        trace: dict[str, Any] | None,
    ) -> Ops[None]:
        """The commit: size checks, then (rarely) a flush of old dedupe marks, then ONE write.

        ``exe.version`` is bumped only once the write is known to have landed; on any error it is left
        as it was, so a caller can reload and retry.
        """
        emit_list, spawn_list, timer_ops = list(emits), list(spawns), _coalesce_timers(timers)
        if not self.record_trace:
            trace = None
        old = exe.version
        known = self._recall(exe.id, old)
        recent, spill, searched = known if known is not None else ((), b"", "")
        old_ref = self._recall_ref(exe.id, old)[1]
        plan = self._plan(
            exe, old, recent, spill, emit_list, processed_event_id, timer_ops, spawn_list, trace, searched
        )
        if known is None:  # not loaded through this store: read the stored version, rids and filter
            resp = yield from self._call(
                "get_item",
                {
                    "TableName": self.table("executions"),
                    "Key": {"id": S(exe.id)},
                    "ConsistentRead": True,
                    "ProjectionExpression": ", ".join(self._MARK_NAMES),
                    "ExpressionAttributeNames": dict(self._MARK_NAMES),
                },
            )
            stored = resp.get("Item")
            found = int(stored["version"]["N"]) if stored else None
            if found != old:
                raise StoreConflict(exe.id, expected=old, found=found)
            old_ref = stored[DATA_REF]["S"] if stored and DATA_REF in stored else None
            plan = self._plan(
                exe,
                old,
                self._rids(stored),
                self._spill(stored),
                emit_list,
                processed_event_id,
                timer_ops,
                spawn_list,
                trace,
                _searched(stored),
            )
        chunk: dict[str, Any] | None = None
        if plan.evicted and plan.spill is not None:
            # One chunk of the spilled ids, keyed by the version that drops them. Every writer from
            # version ``old`` spills the same ids (``rids`` of that stored version), so a racing
            # writer's overwrite writes the same chunk. Written ahead of a single-item commit, or inside
            # the transaction of one that is a transaction anyway (no request of its own).
            key = f"{SPILL_CHUNK_PREFIX}{old + 1:012d}"
            item = {**self._mark_item(exe.id, key), "ids": {"SS": list(plan.evicted)}}
            chunk = {"TableName": self.table("processed"), "Item": item}
        elif plan.evicted:  # an item without a filter: its dedupe check reads single marks
            yield from self._batch_write(
                self.table("processed"),
                [{"PutRequest": {"Item": self._mark_item(exe.id, e)}} for e in plan.evicted],
            )
        put = {
            "TableName": self.table("executions"),
            "Item": plan.exe_item,
            **self._cas(old),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if plan.blob is not None:  # before the write that names it: a failed commit leaves it unnamed
            yield from self._call("put_object", {
                "Bucket": self.context_bucket, "Key": plan.blob.key, "Body": plan.blob.body,
                "ContentType": "application/json"}, "s3")
        traced: int | None = None
        try:
            if plan.single or (yield from self._arm_ahead(exe.id, plan)):
                if chunk is not None:
                    yield from self._call("put_item", chunk)
                yield from self._call("put_item", put)
            else:
                txn, traced = yield from self._transaction(exe.id, old, plan, put)
                if chunk is not None and len(txn) < MAX_TXN_ITEMS:
                    txn.append({"Put": chunk})
                elif chunk is not None:
                    yield from self._call("put_item", chunk)
                yield from self._call("transact_write_items", {"TransactItems": txn})
        except Exception as exc:
            if classify(exc) != "conflict":
                raise
            response = getattr(exc, "response", {})
            reasons = cancellation_reasons(exc)
            stored = reasons[0].get("Item") if reasons else response.get("Item")
            retried = bool(response.get("ResponseMetadata", {}).get("RetryAttempts"))
            yield from self._settle_conflict(exe.id, old, plan.exe_item, stored, retried)
        new_ref = plan.blob.key if plan.blob is not None else None
        self._remember(exe.id, old + 1, plan.recent, plan.spill, _searched(plan.exe_item), new_ref)
        self._remember_trace(exe.id, old, traced)
        exe.version = old + 1
        if old_ref is not None and old_ref != new_ref:
            yield from self._drop_object(old_ref)

    def _drop_object(self, key: str) -> Ops[None]:
        """Delete the object a superseded version named. The commit has landed: a failure here only
        leaves an unnamed object, which the execution's purge removes."""
        if self.context_bucket is None:
            return
        try:
            yield from self._call("delete_object", {"Bucket": self.context_bucket, "Key": key}, "s3")
        except Exception as exc:
            if error_code(exc) is None:
                raise

    def _drop_prefix(self, execution_id: str) -> Ops[None]:
        """Delete every object of one execution (its purge: the tombstone is written already)."""
        if self.context_bucket is None:
            return
        kw: dict[str, Any] = {"Bucket": self.context_bucket, "Prefix": context_prefix(execution_id)}
        while True:
            resp = yield from self._call("list_objects_v2", kw, "s3")
            keys = [{"Key": o["Key"]} for o in resp.get("Contents", [])]
            if keys:
                yield from self._call(
                    "delete_objects", {"Bucket": self.context_bucket, "Delete": {"Objects": keys, "Quiet": True}},
                    "s3")
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                return
            kw = {**kw, "ContinuationToken": token}

    def _arm_ahead(self, execution_id: str, plan: _Plan) -> Ops[bool]:
        """Arm a commit's timers *ahead* of its execution write, so that it needs no transaction — when the
        commit writes nothing else but the execution, and each timer's path has no timer armed at another
        time (a conditional Put). Then True: the caller writes the execution with one PutItem.

        Why that is safe: a timer armed ahead of a commit that then fails (a lost race, a crash) fires a
        timeout whose ``fire_at`` the stored execution does not hold, which the engine ignores as stale; a
        retried commit that arms the path at another time finds it taken and falls back to the transaction,
        which overwrites it. What must not happen — an armed timer of the stored execution replaced by
        one it does not hold — is what the condition prevents. The cost: 1 write unit per timer instead of
        2, and the execution's 1 instead of 2 (an arm was a 2-item transaction)."""
        if plan.outbox or plan.spawns or plan.processed is not None or plan.trace is not None or plan.search:
            return False
        if not plan.timers or any(op.action != "schedule" for op in plan.timers):
            return False
        for op in plan.timers:
            try:
                yield from self._call("put_item", {
                    "TableName": self.table("timers"),
                    "Item": self._timer_item(execution_id, op),
                    "ConditionExpression": "attribute_not_exists(#p) OR #fa = :f",
                    "ExpressionAttributeNames": {"#p": "path", "#fa": "fire_at"},
                    "ExpressionAttributeValues": {":f": N(op.fire_at)},
                })
            except Exception as exc:
                if classify(exc) != "conflict":
                    raise
                return False  # armed at another time: the transaction replaces it atomically with the state
        return True

    def _transaction(
        self, execution_id: str, old: int, plan: _Plan, put: dict[str, Any]
    ) -> Ops[tuple[list[dict[str, Any]], int | None]]:
        """The TransactItems (CAS Put first) and the trace index it writes, if any."""
        txn: list[dict[str, Any]] = [{"Put": put}]
        idx: int | None = None
        if plan.outbox:
            seqs = yield from self._next_seqs("outbox", len(plan.outbox), execution_id)
            for seq, o in zip(seqs, plan.outbox, strict=True):
                txn.append({"Put": {"TableName": self.table("outbox"), "Item": {**o, **queue_key(seq)}}})
        if plan.spawns:
            seqs = yield from self._next_seqs("spawn", len(plan.spawns), execution_id)
            for seq, sp in zip(seqs, plan.spawns, strict=True):
                txn.append({"Put": {"TableName": self.table("spawns"), "Item": {**sp, **queue_key(seq)}}})
        if plan.processed is not None:
            txn.append({"Put": {"TableName": self.table("processed"), "Item": plan.processed}})
        exe_t = self.table("executions")
        txn += [{"Put": {"TableName": exe_t, "Item": entry}} for entry in plan.search]
        for op in plan.timers:
            if op.action == "schedule":
                txn.append(
                    {"Put": {"TableName": self.table("timers"), "Item": self._timer_item(execution_id, op)}}
                )
            else:
                txn.append(
                    {
                        "Delete": {
                            "TableName": self.table("timers"),
                            "Key": {"execution_id": S(execution_id), "path": S(op.path)},
                        }
                    }
                )
        if plan.trace is not None:
            # The ring: Put idx=K and Delete idx=K-N in the same transaction. K is read from the stored
            # ring (max + 1; remembered from this store's previous commit when it has one), so a
            # cancelled commit consumes nothing and leaves no gap.
            idx = self._recall_trace(execution_id, old)
            if idx is None:
                idx = (yield from self._max_trace_idx(execution_id)) + 1
            txn.append(
                {
                    "Put": {
                        "TableName": self.table("trace"),
                        "Item": self._trace_item(execution_id, idx, plan.trace),
                    }
                }
            )
            ring = trim_bound(self.trace_max, self.history)
            if ring and idx - ring >= 0:
                gone = {"execution_id": S(execution_id), "idx": N(idx - ring)}
                txn.append({"Delete": {"TableName": self.table("trace"), "Key": gone}})
        return txn, idx

    def _settle_conflict(
        self, execution_id: str, old: int, ours: Item, stored: Item | None, retried: bool
    ) -> Ops[None]:
        """A failed CAS is a conflict — unless botocore retried the request (``retried``: an earlier
        attempt may have landed before its response was lost) and the stored item is exactly ours."""
        if stored is None:
            resp = yield from self._call(
                "get_item",
                {
                    "TableName": self.table("executions"),
                    "Key": {"id": S(execution_id)},
                    "ConsistentRead": True,
                    "ProjectionExpression": "#v, #d, #c",
                    "ExpressionAttributeNames": {"#v": "version", "#d": "data", "#c": DATA_REF},
                },
            )
            stored = resp.get("Item")
        found = int(stored["version"]["N"]) if stored else None
        if retried and found == old + 1 and stored is not None and all(
            stored.get(name) == ours.get(name) for name in ("data", DATA_REF)
        ):  # the claim check's key is its content's hash: equal keys are equal executions
            return
        self._forget(execution_id)
        raise StoreConflict(execution_id, expected=old, found=found)

    def _next_seqs(self, name: str, count: int, execution_id: str) -> Ops[list[int]]:
        """Reserve ``count`` seqs that all fall in ``execution_id``'s shard, in increasing order.

        One atomic ADD reserves ``count * QUEUE_SHARDS`` consecutive seqs; of those, the ``count`` in the
        execution's shard (``seq % QUEUE_SHARDS == execution_shard(execution_id)``) are used. So every
        entry one execution ever writes lives in one shard, where a Query returns it in seq order: a
        relay pass can never see a later entry of an execution (of the same commit, or of a later one)
        without the earlier ones, however its per-shard Queries interleave with commits. A separate
        write before the transaction (a transaction cannot read its own counter); a block wasted by a
        cancelled commit, or the seqs of other shards in it, are harmless: seqs must be monotonic, not
        gapless (they are 64-bit numbers).
        """
        first = yield from self._next_seq(name, count * QUEUE_SHARDS)
        start = first + (execution_shard(execution_id) - first) % QUEUE_SHARDS
        return [start + i * QUEUE_SHARDS for i in range(count)]

    def _next_seq(self, name: str, count: int) -> Ops[int]:
        """Reserve ``count`` consecutive seqs with one atomic ADD; returns the first."""
        resp = yield from self._call(
            "update_item",
            {
                "TableName": self.table("counters"),
                "Key": {"id": S(name)},
                "UpdateExpression": "ADD #n :k",
                "ExpressionAttributeNames": {"#n": "n"},
                "ExpressionAttributeValues": {":k": N(count)},
                "ReturnValues": "UPDATED_NEW",
            },
        )
        return int(resp["Attributes"]["n"]["N"]) - count + 1

    def _max_trace_idx(self, execution_id: str) -> Ops[int]:
        resp = yield from self._call(
            "query",
            {
                "TableName": self.table("trace"),
                "KeyConditionExpression": "#e = :e",
                "ExpressionAttributeNames": {"#e": "execution_id", "#x": "idx"},
                "ExpressionAttributeValues": {":e": S(execution_id)},
                "ProjectionExpression": "#x",
                "ScanIndexForward": False,
                "Limit": 1,
                "ConsistentRead": True,
            },
        )
        items = resp.get("Items") or []
        return int(items[0]["idx"]["N"]) if items else -1

    # -- relay and sweeper ----------------------------------------------------------------------------
    def pending_outbox_ops(
        self, limit: int | None = None, shards: Collection[int] | None = None
    ) -> Ops[list[OutboxEntry]]:
        # No cut is needed: all of one execution's entries live in one shard (see _next_seqs), and a
        # Query of a shard returns them in seq order, so a pass never sees a later entry of an
        # execution without the earlier ones, whatever commits land between its per-shard Queries.
        rows = yield from self._oldest("outbox", limit, shards)
        return [
            OutboxEntry(
                int(r["seq"]["N"]),
                r["target_id"]["S"] if "target_id" in r else None,
                Event.model_validate_json(r["event"]["S"]),
            )
            for r in rows
        ]

    def ack_ops(self, table: Literal["outbox", "spawns"], seq: int) -> Ops[None]:
        yield from self._call("delete_item", {"TableName": self.table(table), "Key": queue_key(seq)})

    def ack_outbox_ops(self, seq: int) -> Ops[None]:
        return self.ack_ops("outbox", seq)

    def ack_spawn_ops(self, seq: int) -> Ops[None]:
        return self.ack_ops("spawns", seq)

    def pending_spawns_ops(
        self, limit: int | None = None, shards: Collection[int] | None = None
    ) -> Ops[list[SpawnEntry]]:
        rows = yield from self._oldest("spawns", limit, shards)
        return [
            SpawnEntry(
                int(r["seq"]["N"]),
                r["parent_id"]["S"],
                r["child_id"]["S"],
                r["root_path"]["S"],
                json.loads(r["context"]["S"]),
            )
            for r in rows
        ]

    def _oldest(self, table: str, limit: int | None, shards: Collection[int] | None = None) -> Ops[list[Item]]:
        """The ``limit`` entries of a queue table with the lowest seqs (all of them for None), in seq
        order: a merge of per-shard Queries in seq order.

        ``shards``: read only these (the relay's stream trigger names the shards its inserts went to:
        a pass then Queries those, not all :data:`~durastate.store.dynamodb.sharding.QUEUE_SHARDS`).
        Without it, one ``Scan`` of a single item first asks whether the table holds anything at all, so
        a pass over an empty table — the scheduled backstop, an idle local loop — is one request.

        Each shard is read from its oldest entry, ``limit / QUEUE_SHARDS + 1`` items at first (executions
        spread evenly over the shards, so that is often all it takes); then, while fewer than
        ``limit`` items are known to be the oldest — those at or below the lowest last-read seq of the
        shards that have more — the next page of that shard is read. A pass reads about its budget,
        whatever the backlog.
        """
        if limit is not None and limit <= 0:
            return []
        if shards is None:
            if not (yield from self._any_item(table)):
                return []
            shards = range(QUEUE_SHARDS)
        wanted = sorted({int(n) for n in shards if 0 <= int(n) < QUEUE_SHARDS})
        per = None if limit is None else limit // max(1, len(wanted)) + 1
        rows: list[Item] = []
        more: dict[str, tuple[int, Item]] = {}  # shard -> (last seq read, where to go on)

        def page(shard: str, size: int | None, start: Item | None) -> Ops[None]:
            kw: dict[str, Any] = {
                "TableName": self.table(table),
                "KeyConditionExpression": "#sh = :sh",
                "ExpressionAttributeNames": {"#sh": "shard"},
                "ExpressionAttributeValues": {":sh": S(shard)},
                "ScanIndexForward": True,
                "ConsistentRead": True,
            }
            if size is not None:
                kw["Limit"] = size
            if start is not None:
                kw["ExclusiveStartKey"] = start
            resp = yield from self._call("query", kw)
            rows.extend(resp.get("Items", []))
            last = resp.get("LastEvaluatedKey")
            more.pop(shard, None)
            if last:
                more[shard] = (int(last["seq"]["N"]), last)

        for n in wanted:
            yield from page(str(n), per, None)
        while more:
            shard, (bound, start) = min(more.items(), key=lambda kv: kv[1][0])
            # every entry at or below ``bound`` has been read from every shard: those are final
            ready = sum(1 for r in rows if int(r["seq"]["N"]) <= bound)
            if limit is not None and ready >= limit:
                break
            yield from page(shard, None if limit is None else max(1, limit - ready), start)
        rows.sort(key=lambda r: int(r["seq"]["N"]))
        return rows if limit is None else rows[:limit]

    def _any_item(self, table: str) -> Ops[bool]:
        """Whether ``table`` holds any item: a consistent Scan of at most one (one request, one read unit at
        most). An empty answer that still names a place to go on counts as "maybe" (it is never wrong to
        read on)."""
        resp = yield from self._call(
            "scan", {"TableName": self.table(table), "Limit": 1, "ConsistentRead": True, "Select": "COUNT"}
        )
        return bool(resp.get("Count") or resp.get("LastEvaluatedKey"))

    def due_timers_ops(self, now: float, since: float | None = None) -> Ops[list[tuple[str, str, float]]]:
        """The due timers, from the ``due`` index (one Query per shard) — after one Scan of a single item
        of the timers table: no timer armed at all (an idle deployment) makes a sweep one request.

        ``since`` bounds the range below (``fire_at BETWEEN since AND now``): a sweep that hops timers
        ahead of time asks for the window after what it already hopped, instead of re-reading every
        timer still waiting for its hop. Without it the range is open below, so an overdue timer is
        never skipped, however late."""
        out: list[tuple[str, str, float]] = []
        if since is not None and since > now:
            return out
        if not (yield from self._timers_present(reuse=since is not None)):
            return out
        condition = "#sh = :sh AND #fa <= :now" if since is None else "#sh = :sh AND #fa BETWEEN :since AND :now"
        bounds = {":now": N(now)} if since is None else {":now": N(now), ":since": N(since)}
        for shard in range(TIMER_SHARDS):
            rows = yield from self._pages(
                "query",
                {
                    "TableName": self.table("timers"),
                    "IndexName": "due",
                    "KeyConditionExpression": condition,
                    "ExpressionAttributeNames": {"#sh": "shard", "#fa": "fire_at"},
                    "ExpressionAttributeValues": {":sh": S(str(shard)), **bounds},
                },
            )
            out += [(r["execution_id"]["S"], r["path"]["S"], float(r["fire_at"]["N"])) for r in rows]
        out.sort(key=lambda t: (t[2], t[0], t[1]))  # oldest due first, deterministic ties
        return out

    def _timers_present(self, reuse: bool) -> Ops[bool]:
        """Whether any timer is armed (one Scan of a single item), or — ``reuse`` — the answer of a check
        made less than :data:`TIMERS_SEEN_REUSE` seconds ago. A timer armed in between is read by the next
        sweep's overdue read (open below, never reused), so it is fired late at worst, never skipped."""
        seen = self._timers_seen
        if reuse and seen is not None and time.monotonic() - seen[0] < TIMERS_SEEN_REUSE:
            return seen[1]
        present = yield from self._any_item("timers")
        self._timers_seen = (time.monotonic(), present)
        return present

    def delete_timer_ops(self, execution_id: str, path: str, fire_at: float) -> Ops[None]:
        try:
            yield from self._call(
                "delete_item",
                {
                    "TableName": self.table("timers"),
                    "Key": {"execution_id": S(execution_id), "path": S(path)},
                    "ConditionExpression": "#fa = :f",
                    "ExpressionAttributeNames": {"#fa": "fire_at"},
                    "ExpressionAttributeValues": {":f": N(fire_at)},
                },
            )
        except Exception as exc:
            if classify(exc) != "conflict":
                raise
            # the guard failed: the timer was re-armed (or already gone) — a no-op, as intended

    # -- listing ----------------------------------------------------------------------------------------
    def list_ops(
        self,
        definition_id: str | None,
        status: str | Sequence[str] | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
        parent_id: str | None = None,
        updated_after: float | None = None,
        updated_before: float | None = None,
        where: Sequence[Condition] = (),
    ) -> Ops[ExecutionPage]:
        """Keyset pages over the ``by_status`` index, one query per status merged in id order.

        Definition, parent, roots and the system-record exclusion filter in the index query; the time
        filters (``updated_at`` is not projected into the index) and the final check filter the summaries,
        so a round may keep fewer than it read and the next round continues after it: a page is short only
        when it is the last (which may be empty: a cursor is handed out when more ids follow, before they
        are read).
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        conditions = check_conditions(where)
        driver = next((c for c in conditions if c.op == "="), None)
        statuses = normalize_status(status)
        after: str | None = None
        if cursor:
            decoded = decode_cursor(cursor)
            if not isinstance(decoded, dict) or not isinstance(decoded.get("after"), str):
                raise ValueError(f"invalid cursor {cursor!r}: pass back a next_cursor this store returned")
            after = decoded["after"]
        items: list[ExecutionSummary] = []
        while True:
            need = limit - len(items)
            ids: list[str] = []
            if driver is not None:
                ids = yield from self._term_ids(search_term(driver.name, driver.value), after, need + 1)
            else:
                for st in sorted(statuses) if statuses is not None else STATUSES:
                    ids += yield from self._status_ids(st, definition_id, roots_only, after, need + 1, parent_id)
            ids = sorted(set(ids))
            batch = ids[:need]  # read the summaries of the page only; the extra id says whether more follow
            found = (yield from self._summaries(batch)) if batch else []
            items += [s for s, values in found if summary_matches(
                s, definition_id, statuses, roots_only, parent_id=parent_id, updated_after=updated_after,
                updated_before=updated_before) and values_match(values, conditions)]
            if len(ids) <= need:  # every status returned less than it was asked for: nothing is left
                return ExecutionPage(items, None)
            after = batch[-1]
            if len(items) == limit:
                return ExecutionPage(items, encode_cursor({"after": after}))

    def _status_ids(
        self, status: str, definition_id: str | None, roots_only: bool, after: str | None, want: int,
        parent_id: str | None = None,
    ) -> Ops[list[str]]:
        """The first ``want`` ids (in id order, after the cursor) in one status of the index."""
        kw = self._index_query("by_status", "status", status, "id", after, want)
        names, values = kw["ExpressionAttributeNames"], kw["ExpressionAttributeValues"]
        filters = []
        if definition_id is not None:
            filters.append("#def = :def")
            names["#def"] = "definition_id"
            values[":def"] = S(definition_id)
        elif hides_system(definition_id):
            filters.append("NOT begins_with(#def, :sys)")
            names["#def"] = "definition_id"
            values[":sys"] = S(SYSTEM_PREFIX)
        if roots_only:
            filters.append("attribute_not_exists(#pid)")
            names["#pid"] = "parent_id"
        if parent_id is not None:
            filters.append("#pid = :pid")
            names["#pid"] = "parent_id"
            values[":pid"] = S(parent_id)
        if filters:
            kw["FilterExpression"] = " AND ".join(filters)
        return (yield from self._query_ids(kw, want))

    def _term_ids(self, term: str, after: str | None, want: int) -> Ops[list[str]]:
        """The first ``want`` execution ids (in id order, after the cursor) with ``term`` in the sparse
        ``by_search`` index. An entry may be stale (its commit is newer than the index): every id found is
        checked against its execution's values by the caller."""
        kw = self._index_query("by_search", "term", term, "execution", after, want)
        return (yield from self._query_ids(kw, want, "execution"))

    def _index_query(
        self, index: str, hash_attr: str, hash_value: str, sort_attr: str, after: str | None, want: int
    ) -> dict[str, Any]:
        """The Query (for :meth:`_query_ids`) of the first ``want`` items of the executions table's ``index``
        whose ``hash_attr`` is ``hash_value``, in ``sort_attr`` order after the cursor ``after``. Its key
        uses the names ``#h``/``#s`` and the values ``:h``/``:after``; a caller adds its filter's own."""
        names = {"#h": hash_attr}
        values: dict[str, Any] = {":h": S(hash_value)}
        key = "#h = :h"
        if after:
            key += " AND #s > :after"
            names["#s"] = sort_attr
            values[":after"] = S(after)
        return {
            "TableName": self.table("executions"),
            "IndexName": index,
            "KeyConditionExpression": key,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "Limit": want,
        }

    def _summaries(self, ids: list[str]) -> Ops[list[tuple[ExecutionSummary, dict[str, Any]]]]:
        """Summaries of the page's ids, each with its search values (eventually consistent: the index they
        come from is, too)."""
        exe_t = self.table("executions")
        found: dict[str, tuple[ExecutionSummary, dict[str, Any]]] = {}
        names = {
            "#i": "id",
            "#def": "definition_id",
            "#v": "version",
            "#st": "status",
            "#oc": "outcome",
            "#ap": "active_path",
            "#pid": "parent_id",
            "#ca": "created_at",
            "#ua": "updated_at",
            "#sv": "search",
        }
        for start in range(0, len(ids), BATCH_GET_MAX):
            got = yield from self._batch_get(
                {
                    exe_t: {
                        "Keys": [{"id": S(i)} for i in ids[start : start + BATCH_GET_MAX]],
                        "ProjectionExpression": ", ".join(names),
                        "ExpressionAttributeNames": names,
                    }
                }
            )
            for r in got[exe_t]:

                def opt(name: str, r: Item = r) -> str | None:
                    return r[name]["S"] if name in r else None

                def at(name: str, r: Item = r) -> float | None:
                    return float(r[name]["N"]) if name in r else None

                found[r["id"]["S"]] = (ExecutionSummary(
                    r["id"]["S"],
                    r["definition_id"]["S"],
                    int(r["version"]["N"]),
                    r["status"]["S"],
                    opt("outcome"),
                    opt("active_path"),
                    opt("parent_id"),
                    at("created_at"),
                    at("updated_at"),
                ), json.loads(r["search"]["S"]) if "search" in r else {})
        return [found[i] for i in ids if i in found]

    # -- trace ------------------------------------------------------------------------------------------
    def read_trace_ops(self, execution_id: str) -> Ops[list[dict[str, Any]]]:
        if not (self.history and self.trace_max):  # the ring holds at most trace_max items: read them all
            return (yield from self.read_history_ops(execution_id))
        # A kept history: the newest trace_max steps, read newest first and page by page until there are
        # enough (a Query's Limit bounds one page, not the answer).
        query: dict[str, Any] = {**self._trace_query(execution_id), "ScanIndexForward": False}
        rows: list[Item] = []
        while len(rows) < self.trace_max:
            resp = yield from self._call("query", {**query, "Limit": self.trace_max - len(rows)})
            rows.extend(resp.get("Items", []))
            if not resp.get("LastEvaluatedKey"):
                break
            query["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return self._trace_steps(reversed(rows))

    def read_history_ops(self, execution_id: str) -> Ops[list[dict[str, Any]]]:
        rows = yield from self._pages("query", {**self._trace_query(execution_id), "ScanIndexForward": True})
        return self._trace_steps(rows)

    def _trace_query(self, execution_id: str) -> dict[str, Any]:
        return {
            "TableName": self.table("trace"),
            "KeyConditionExpression": "#e = :e",
            "ExpressionAttributeNames": {"#e": "execution_id"},
            "ExpressionAttributeValues": {":e": S(execution_id)},
            "ConsistentRead": True,
        }

    @staticmethod
    def _trace_steps(rows: Iterable[Item]) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            entry = json.loads(r["entry"]["S"])
            out.append({**entry, "index": entry.get("index", int(r["idx"]["N"]))})
        return out

    def append_trace_ops(self, execution_id: str, entry: dict[str, Any]) -> Ops[None]:
        """The standalone appender (outside a commit): a Put, then the ring's guarded drop.

        The ring key is always the next contiguous index (so the ring stays exact); an explicit
        ``index`` in the entry is kept in the entry and is what :meth:`read_trace_ops` reports.
        """
        entry_json = json.dumps(entry, separators=(",", ":"))
        item_max = item_size(self._trace_item(execution_id, 10**18, entry_json))
        if item_max > MAX_ITEM_BYTES:
            raise ExecutionTooLarge(
                f"trace step of {execution_id!r}", item_max, MAX_ITEM_BYTES, "trace less per step"
            )
        with self._lock:
            self._trace_next.pop(execution_id, None)
        idx = (yield from self._max_trace_idx(execution_id)) + 1
        yield from self._call(
            "put_item",
            {"TableName": self.table("trace"), "Item": self._trace_item(execution_id, idx, entry_json)},
        )
        ring = trim_bound(self.trace_max, self.history)
        if ring and idx - ring >= 0:
            yield from self._call(
                "delete_item",
                {
                    "TableName": self.table("trace"),
                    "Key": {"execution_id": S(execution_id), "idx": N(idx - ring)},
                },
            )

    # -- retention --------------------------------------------------------------------------------------
    def purge_ops(
        self,
        ended_before: float,
        statuses: Sequence[str],
        definition_id: str | None,
        limit: int,
        now: float | None,
        tombstone_ttl: float,
        dry_run: bool,
    ) -> Ops[PurgeResult]:
        """One bounded batch (see :mod:`durastate.store.retention`): the candidates come from the sparse
        ``ended`` index (per status and shard, ``ended_at`` below the cutoff), each is read (consistent)
        and replaced by its tombstone with a conditional Put on its version, then its trace is deleted.
        Expired tombstones are DynamoDB TTL's to delete (``expired`` is always 0 here)."""
        wanted = check_purge(statuses, limit, tombstone_ttl)
        now = self._clock() if now is None else now
        candidates: list[str] = []
        for status in wanted:
            for shard in range(TIMER_SHARDS):
                if len(candidates) > limit:
                    break
                candidates += yield from self._ended_ids(
                    status, shard, ended_before, definition_id, limit + 1 - len(candidates)
                )
        more = len(candidates) > limit
        picked = candidates[:limit]
        if dry_run:
            return PurgeResult(len(picked), 0, more, tuple(picked))
        purged: list[str] = []
        for eid in picked:
            if (yield from self._purge_one(eid, ended_before, wanted, definition_id, now, tombstone_ttl)):
                purged.append(eid)
        return PurgeResult(len(purged), 0, more, tuple(purged))

    def _query_ids(self, kw: dict[str, Any], want: int, attribute: str = "id") -> Ops[list[str]]:
        """The ``id`` (or another string ``attribute``) of up to ``want`` items an index Query (``kw``) finds,
        following its pages: a filter can leave a page short of its ``Limit``, so one page is not enough."""
        ids: list[str] = []
        while len(ids) < want:
            resp = yield from self._call("query", kw)
            ids += [r[attribute]["S"] for r in resp.get("Items", [])]
            last = resp.get("LastEvaluatedKey")
            if not last:
                break
            kw = {**kw, "ExclusiveStartKey": last}
        return ids[:want]

    def _ended_ids(
        self, status: str, shard: int, ended_before: float, definition_id: str | None, want: int
    ) -> Ops[list[str]]:
        names = {"#k": "ended_shard", "#e": "ended_at"}
        values: dict[str, Any] = {":k": S(ended_shard(status, shard)), ":cut": N(ended_before)}
        kw: dict[str, Any] = {
            "TableName": self.table("executions"),
            "IndexName": "ended",
            "KeyConditionExpression": "#k = :k AND #e < :cut",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "Limit": want,
        }
        if definition_id is not None:
            kw["FilterExpression"] = "#d = :d"
            names["#d"] = "definition_id"
            values[":d"] = S(definition_id)
        return (yield from self._query_ids(kw, want))

    def _purge_one(
        self, eid: str, ended_before: float, statuses: tuple[str, ...], definition_id: str | None, now: float,
        tombstone_ttl: float,
    ) -> Ops[bool]:
        """Read one candidate (the index may lag), replace it by its tombstone if it still qualifies (CAS
        on its version: a commit that lands first wins, and the purge skips it), then drop its trace."""
        resp = yield from self._call(
            "get_item", {"TableName": self.table("executions"), "Key": {"id": S(eid)}, "ConsistentRead": True}
        )
        item = resp.get("Item")
        if not item:
            return False
        item, body = yield from self._data(item, eid)
        if item is None:
            return False
        exe = Execution.model_validate_json(body)
        if not is_purgeable(exe, ended_before, statuses, definition_id):
            return False
        old = int(item["version"]["N"])
        exe.version = old
        tomb = tombstone(exe, now + tombstone_ttl, now)
        data = tomb.model_dump_json()
        tomb_item: Item = {
            "id": S(eid),
            "data": S(data),
            "version": N(old + 1),
            "definition_id": S(tomb.definition_id),
            "status": S(tomb.status),
            **self._retention_attributes(tomb),
        }
        for name in ("parent_id", "outcome"):
            value = getattr(tomb, name)
            if value is not None:
                tomb_item[name] = S(value)
        for keep in ("rids", "spill"):  # the dedupe marks kept inside the item stay with the tombstone
            if keep in item:
                tomb_item[keep] = item[keep]
        try:
            yield from self._call("put_item", {
                "TableName": self.table("executions"), "Item": tomb_item, **self._cas(old),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
        except Exception as exc:
            if classify(exc) != "conflict":
                raise
            stored = getattr(exc, "response", {}).get("Item")
            if not (stored and stored.get("data", {}).get("S") == data):  # not our own retried write
                return False
        self._forget(eid)
        keys = yield from self._pages("query", {
            "TableName": self.table("trace"),
            "KeyConditionExpression": "#e = :e",
            "ExpressionAttributeNames": {"#e": "execution_id", "#x": "idx"},
            "ExpressionAttributeValues": {":e": S(eid)},
            "ProjectionExpression": "#e, #x",
            "ConsistentRead": True,
        })
        if keys:
            yield from self._batch_write(self.table("trace"), [{"DeleteRequest": {"Key": k}} for k in keys])
        yield from self._drop_prefix(eid)
        return True
