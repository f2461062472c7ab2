"""The DynamoDB store's logic, written once for the sync and the async store.

Every store operation is a *generator* that yields requests — :class:`Call` (one DynamoDB API call by
its botocore method name), :class:`Sleep` (a backoff pause) or :class:`Probe` (is the endpoint up?)
— and receives each call's response
(or has the call's exception thrown into it). ``DynamoDBStore`` drives these generators with a boto3
client, ``AsyncDynamoDBStore`` with an aiobotocore client and ``await``; that is the only difference
between them, so their semantics cannot drift apart. Nothing here does I/O or imports a client library.

Layout (seven tables ``{prefix}_{name}``, on-demand; the seed's key schemas except the outbox's and
the spawns', plus two indexes):

==========  =====================================  ==============================================
table       key                                    holds
==========  =====================================  ==============================================
executions  id (S)                                 ``data`` (the Execution JSON), ``version``,
                                                   ``definition_id``, the summary fields broken out
                                                   (``status``, ``outcome``, ``active_path``,
                                                   ``parent_id``), ``rids`` (recent event ids) and
                                                   ``spill`` (B: a filter of the ids spilled from
                                                   ``rids``)
outbox      shard (S), seq (N)                     ``target_id``, ``event`` (JSON)
spawns      shard (S), seq (N)                     ``parent_id``, ``child_id``, ``root_path``,
                                                   ``context`` (JSON)
timers      execution_id (S), path (S)             ``fire_at`` (N), ``shard`` (S)
processed   execution_id (S), event_id (S)         one dedupe mark per applied event
counters    id (S)                                 ``n``: the outbox / spawn seq allocators
trace       execution_id (S), idx (N)              ``entry`` (JSON): the trace ring
==========  =====================================  ==============================================

Beyond the seed, and why (the seed's behaviour stays the contract):

* **State-only commits are one conditional PutItem.** A commit with no emits, spawns, timers or
  trace writes only the execution item, so it needs no transaction: a single-item conditional write is
  atomic on its own and costs half the write units of a transactional one. The dedupe mark of such a
  commit lives *inside* the execution item, in ``rids`` (the last ``recent_events`` applied event
  ids), so it lands atomically with the state change. When ``rids`` overflows, the ids that fall out
  are first written to the ``processed`` table (a BatchWriteItem, before the execution write that
  drops them — they are already committed, so writing their marks early is always true) and only then
  dropped. Every applied event id is therefore always in ``rids`` or in ``processed``: the
  ``processed`` table keeps its meaning (one item per handled event), it is only written behind.
  ``recent_events=0`` restores the seed's layout exactly (the mark is a ``processed`` Put inside the
  commit's transaction).
* **The dedupe check is one GetItem** (1 read unit) in the common case, not a read of the execution
  and its ``processed`` mark (2). The write that drops ids from ``rids`` also adds them to ``spill``,
  a Bloom filter in the execution item (:data:`BLOOM_BITS` bits, :data:`BLOOM_HASHES` hashes; ``b""``
  until the first spill), which every later commit carries forward — so every applied id not in
  ``rids`` is in the filter of every later version. ``load_for_event`` / ``is_processed`` read the
  item alone: an id in ``rids`` is applied; an id the filter rules out is not; only a filter
  positive (a spilled id, or a false positive) reads the ``processed`` mark too, for the exact answer.
  A false positive costs that second read, never correctness; its rate grows with the spilled ids
  (about 0.5 % at 64, 1.6 % at 100, 9 % at 200, 33 % at 400, 85 % at 1,000: see
  :data:`BLOOM_HASHES`), and 128 bytes keep the cost benchmark's state-only execution item under
  1 KB (1 write unit). No item means not applied, with no second read: a mark is only ever written
  for an id its execution holds (in the commit's transaction, or behind it for ids in ``rids``) and
  executions are never deleted (no store operation deletes one, and the table has no TTL), so no mark
  exists without its execution item. The seed layout (every mark in ``processed``) writes no filter
  and drops one it finds (its marks are not in it); an item without a filter (written by the seed
  layout, or by a durastate before the filter) never gets one back, and its dedupe check always reads
  the mark. There, and for an execution remembered with a saturated filter (false-positive rate ≥
  1/2), the check reads the execution and the mark in one BatchGetItem instead (1 request, 2 units).
* **The relay reads the oldest entries by Query, not by Scan.** The seed keys the outbox and spawns
  by ``seq`` alone, so the oldest entries can only be found by scanning every pending one (a Scan is
  unordered) — a pass over a backlog of N read N. Here they are keyed by ``shard`` (``seq %``
  :data:`QUEUE_SHARDS`, so a seq still names exactly one item and an ack deletes by it) and ``seq``:
  a pass Queries each shard from its oldest entry (strongly consistent) and merges by seq, reading
  about its budget whatever the backlog (:meth:`DynamoCore._oldest`). Why sharded, and why
  :data:`QUEUE_SHARDS` = 4: see that constant (one partition's write limit, and the seq allocator's
  ceiling). Its price is a floor per pass: one Query per shard and table (1 read unit each, even
  empty) where the seed made one Scan per table. The Queries of one pass run one after the other,
  so a commit may land between them; but every entry of one execution is written to one shard (its
  seqs are drawn from that shard's residue class, :meth:`DynamoCore._next_seqs`), where a Query
  returns it in seq order, so a pass never delivers a later entry of an execution — of the same
  commit or a later one — ahead of an earlier one. Changing a table's key means a new table:
  :meth:`DynamoCore.ensure_tables_ops` refuses one with the seed's key (drain it with the previous
  version's relay, delete it, create it again; it holds only undelivered work).
* **Due timers come from a sparse index**, ``due`` on the timers table (hash ``shard``, range
  ``fire_at``, keys only), so a sweep reads the timers that are due, not every armed timer.
  ``shard`` spreads the index over :data:`TIMER_SHARDS` partition keys so timer arms never
  concentrate on one hot index partition (a time-ordered range key defeats DynamoDB's
  split-for-heat); the sweep queries each shard.
* **Listing reads the ``by_status`` index** (hash ``status``, range ``id``, with ``definition_id``
  and ``parent_id`` projected), so a page of executions by status costs the page, not the table;
  summaries come from a BatchGetItem of the page's ids. Pages come back in id order, full (``limit``
  items while more match), with an opaque ``after`` cursor. The index carries no attribute that
  changes on every commit (not ``version``), so ordinary commits never write to it.
* **Consistent reads** where a stale answer would be wrong: ``load``, ``load_for_event``,
  ``is_processed`` (a stale read could apply an event twice or lose a CAS race it should see), the
  relay's Queries (an acked entry must not reappear, a committed one must be seen) and the trace
  index. Index queries cannot be consistent: a timer armed a moment
  ago may be swept on the next pass (the sweeper's ``fire_at`` guard and the engine's stale-timeout
  check make an early or late sweep harmless), and a listing may lag a commit by a moment.
* **Safe at the limits.** Items over 400 KB and commits over 100 items or 4 MB are refused *before
  any request* with :class:`~durastate.errors.ExecutionTooLarge`. A cancelled transaction is classified by
  its ``CancellationReasons``: only a failed condition on the execution item (index 0) is a
  :class:`~durastate.errors.StoreConflict`; throttling and transaction conflicts are retried with bounded,
  jittered exponential backoff and then raise :class:`~durastate.errors.StoreThrottled`; anything else
  re-raises. A conditional write that botocore retried after it had already landed (the response
  says it retried, and the stored item — returned by ``ReturnValuesOnConditionCheckFailure`` — is
  byte-for-byte ours) counts as success, not a conflict. The limits are read conservatively
  (400,000 bytes, 4,000,000 bytes), with item sizes computed by DynamoDB's documented rules.
* **Fewer reads per commit.** The stored version, ``rids`` and ``spill`` of an execution loaded
  through this store, and the next trace index after a traced commit, are remembered (keyed by version: an
  ``(id, version)`` pair names exactly one stored item), so a commit normally makes no read of its own.
* **Optional TTL** (``expires_at``) on dedupe marks and trace steps, for the stack's TTL setting.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, TypeVar

from durastate.engine.model import STATUSES, Event, Execution
from durastate.errors import ExecutionTooLarge, StoreConflict, StoreThrottled, StoreUnavailable
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Emit,
    ExecutionPage,
    ExecutionSummary,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
    decode_cursor,
    encode_cursor,
    normalize_status,
    summary_matches,
)

T = TypeVar("T")

# -- DynamoDB's hard limits -------------------------------------------------------------------------
MAX_ITEM_BYTES = 400_000
"""DynamoDB's "400 KB" item limit, read conservatively as decimal kilobytes: AWS accepts slightly
more, moto rejects above 405,000 bytes; refusing here is a clear error instead of a ValidationException."""
MAX_TXN_ITEMS = 100
MAX_TXN_BYTES = 4_000_000
"""The 4 MB aggregate size of one TransactWriteItems, read conservatively (decimal)."""
BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25

TIMER_SHARDS = 4
"""Partition keys of the ``due`` index. Fixed: every process must agree on it, or timers go unswept."""

QUEUE_SHARDS = 4
"""Partition keys (``shard`` = ``seq % QUEUE_SHARDS``) of the outbox and spawns tables, whose sort key is
``seq``. Fixed: every process must agree on it, or entries go undelivered.

Why 4: a partition takes at most 1,000 write units a second, and a monotonically increasing sort key
defeats DynamoDB's split-for-heat (every new entry lands at the tail of its shard), so each shard is one
hot partition. An entry costs 3 write units there (its transactional Put, 2; its ack's Delete, 1). An
execution's entries all go to one shard (by a hash of its id, for ordering: see ``_next_seqs``), so
executions spread the load over the shards. The seq allocator is one item of the counters table, so at
most ~1,000 commits a second can emit or spawn at all: at that ceiling, one entry each, 4 shards carry
~750 write units a second each, under the limit. More shards would add nothing the allocator lets
through, and every relay pass queries every shard (one request and one read unit each, even when
empty), so the count is kept at that ceiling."""

BLOOM_BITS = 1024
"""Bits of the execution item's filter of spilled event ids (``spill``, 128 bytes once anything spilled)."""
BLOOM_HASHES = 3
"""Bit positions per id. With 1,024 bits the false-positive rate after n spilled ids is about
``(1 - e^(-3n/1024))^3``: 0.07 % at 32, 0.5 % at 64, 1.6 % at 100, 8.7 % at 200, 33 % at 400, 85 % at
1,000 — a false positive only costs the second read."""

TTL_ATTRIBUTE = "expires_at"
"""Epoch seconds after which DynamoDB's TTL deletes an item (dedupe marks and trace steps, if configured)."""

DEFAULT_RECENT_EVENTS = 8
"""Event ids kept in the execution item. 8 uuid-sized ids keep a small execution under 1 KB (1 WRU)."""


# -- requests a store operation yields ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Call:
    """One DynamoDB API call: the client's method name and its keyword arguments."""

    op: str
    kwargs: dict[str, Any]


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


def endpoint_address(url: str | None) -> tuple[str | None, int]:
    """(host, port) of an endpoint URL to probe; (None, 0) for AWS's own endpoints."""
    if not url:
        return None, 0
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


Request = Call | Sleep | Probe
Ops = Generator[Request, Any, T]
Item = dict[str, Any]


# -- tables ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class IndexSpec:
    name: str
    keys: tuple[tuple[str, str], ...]
    """(attribute, type) pairs in HASH, RANGE order."""
    include: tuple[str, ...] = ()
    """Non-key attributes projected into the index; empty means KEYS_ONLY."""


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    keys: tuple[tuple[str, str], ...]
    indexes: tuple[IndexSpec, ...] = ()


TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "executions",
        (("id", "S"),),
        (IndexSpec("by_status", (("status", "S"), ("id", "S")), ("definition_id", "parent_id")),),
    ),
    TableSpec("outbox", (("shard", "S"), ("seq", "N"))),
    TableSpec("spawns", (("shard", "S"), ("seq", "N"))),
    TableSpec(
        "timers",
        (("execution_id", "S"), ("path", "S")),
        (IndexSpec("due", (("shard", "S"), ("fire_at", "N"))),),
    ),
    TableSpec("processed", (("execution_id", "S"), ("event_id", "S"))),
    TableSpec("counters", (("id", "S"),)),
    TableSpec("trace", (("execution_id", "S"), ("idx", "N"))),
)
ROLES = ("HASH", "RANGE")


def _key_schema(keys: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"AttributeName": a, "KeyType": role} for (a, _), role in zip(keys, ROLES, strict=False)]


def create_table_request(prefix: str, spec: TableSpec) -> dict[str, Any]:
    """The ``CreateTable`` arguments of one table (PAY_PER_REQUEST, with its indexes)."""
    attrs = dict(spec.keys)
    for index in spec.indexes:
        attrs.update(index.keys)
    req: dict[str, Any] = {
        "TableName": f"{prefix}_{spec.name}",
        "KeySchema": _key_schema(spec.keys),
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": t} for a, t in attrs.items()],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if spec.indexes:
        req["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index.name,
                "KeySchema": _key_schema(index.keys),
                "Projection": (
                    {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.include)}
                    if index.include
                    else {"ProjectionType": "KEYS_ONLY"}
                ),
            }
            for index in spec.indexes
        ]
    return req


# -- typed attribute values ---------------------------------------------------------------------------
def S(value: str) -> dict[str, str]:
    return {"S": value}


def N(value: int | float) -> dict[str, str]:
    return {"N": num(value)}


def num(value: int | float) -> str:
    """A number in DynamoDB's plain decimal form; floats round-trip exactly (shortest repr)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number here")
    if isinstance(value, int):
        return str(value)
    d = Decimal(repr(float(value)))
    if not d.is_finite():
        raise ValueError(f"{value!r} cannot be stored in DynamoDB")
    text = format(d, "f")
    return text[:-2] if text.endswith(".0") else text


def value_size(value: dict[str, Any]) -> int:
    """DynamoDB's billed size of one attribute value (documented rules, rounded up where approximate)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode("utf-8"))
    if kind == "N":
        digits = v.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_size(e) + 1 for e in v)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(e) + 1 for k, e in v.items())
    if kind == "SS":
        return sum(len(e.encode("utf-8")) for e in v)
    if kind == "NS":
        return sum(value_size({"N": e}) for e in v)
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: Item) -> int:
    """An item's size as DynamoDB counts it against the 400 KB / 4 MB limits and capacity units."""
    return sum(len(k.encode("utf-8")) + value_size(v) for k, v in item.items())


# -- error classification -----------------------------------------------------------------------------
Verdict = Literal["conflict", "retry", "fatal"]

RETRYABLE_REASONS = frozenset(
    {
        "TransactionConflict",
        "ProvisionedThroughputExceeded",
        "ThrottlingError",
        "RequestLimitExceeded",
    }
)
"""``CancellationReasons`` codes that go away by themselves: retry with backoff."""

RETRYABLE_CODES = frozenset(
    {
        "TransactionConflictException",
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
    }
)
"""Error codes that mean "not applied, try again later" (botocore retried them already; we add bounded
patience). Server errors (500/503) are not here: botocore retries those itself with the request's
idempotency token, while a retry of ours would carry a new token and could not tell a write that
landed from one that did not — they re-raise, and the queue redelivers the event (deduplicated)."""


DENIED_CODES = frozenset({"AccessDeniedException", "UnauthorizedOperation"})


def error_code(exc: BaseException) -> str | None:
    """The DynamoDB error code of a botocore ``ClientError`` (duck-typed; None for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    error = response.get("Error")
    code = error.get("Code") if isinstance(error, dict) else None
    return str(code) if code else None


def cancellation_reasons(exc: BaseException) -> list[dict[str, Any]]:
    response = getattr(exc, "response", None)
    reasons = response.get("CancellationReasons") if isinstance(response, dict) else None
    return [r if isinstance(r, dict) else {} for r in reasons or []]


def classify_reasons(codes: Sequence[str | None]) -> Verdict:
    """What a cancelled commit transaction means, from its per-item reason codes.

    Item 0 is always the execution Put with the CAS condition, and it is the only conditioned item, so:
    a failed condition there is a lost race (``conflict``); any reason that cannot heal by itself
    (validation, collection size, a failed condition elsewhere) is ``fatal``, even if mixed with
    retryable ones; otherwise throttling / conflicting transactions are worth a retry (``retry``).
    Without reasons (old emulators) the seed's reading applies: a cancelled transaction is a conflict.
    """
    norm = [c or "None" for c in codes]
    if not norm or norm[0] == "ConditionalCheckFailed":
        return "conflict"
    real = [c for c in norm if c != "None"]
    if not real or any(c not in RETRYABLE_REASONS for c in real):
        return "fatal"
    return "retry"


def classify(exc: BaseException) -> Verdict:
    code = error_code(exc)
    if code == "TransactionCanceledException":
        return classify_reasons([r.get("Code") for r in cancellation_reasons(exc)])
    if code == "ConditionalCheckFailedException":  # a single conditional write; older moto in a txn
        return "conflict"
    if code in RETRYABLE_CODES:
        return "retry"
    return "fatal"


def translate(exc: BaseException, where: str) -> BaseException:
    """Turn botocore's can't-reach-it errors into :class:`StoreUnavailable` saying what to check."""
    try:
        from botocore import exceptions as bx  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a client exists, so botocore does
        return exc
    new: BaseException | None = None
    if isinstance(exc, bx.NoCredentialsError):
        new = StoreUnavailable(
            f"no AWS credentials for DynamoDB at {where}: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY (any dummy values work for LocalStack and moto)"
        )
    elif isinstance(exc, bx.NoRegionError):
        new = StoreUnavailable("no AWS region for DynamoDB: pass region=… or set AWS_REGION")
    elif isinstance(exc, (bx.ConnectionError, bx.HTTPClientError)):
        new = StoreUnavailable(
            f"DynamoDB at {where} did not answer ({exc}); check that the endpoint is running and "
            "reachable (LocalStack or moto_server for a local endpoint), the endpoint URL, the region "
            "and the network"
        )
    if new is None:
        return exc
    new.__cause__ = exc
    return new


# -- building a client -------------------------------------------------------------------------------
DUMMY_CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
"""What a local endpoint (LocalStack, moto) gets when no real credentials are configured."""


def client_settings(
    endpoint_url: str | None, region: str | None, have_credentials: bool
) -> tuple[dict[str, Any], str | None, str]:
    """The client kwargs both stores' ``create`` use, the endpoint (None: AWS) and a description.

    A local endpoint gets dummy credentials when none exist (LocalStack and moto accept anything) and
    ``us-east-1`` when no region is configured; real AWS must find both in the usual places.
    """
    env = os.environ
    endpoint = endpoint_url or env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL")
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    kwargs: dict[str, Any] = {}
    if endpoint_url:
        kwargs["endpoint_url"] = endpoint_url
    if endpoint and not region:
        region = "us-east-1"
    if region:
        kwargs["region_name"] = region
    if endpoint and not have_credentials:
        kwargs.update(DUMMY_CREDENTIALS)
    if not region:
        raise StoreUnavailable(
            "no AWS region for DynamoDB: pass region=… (or ?region= in the store URL) or set AWS_REGION"
        )
    return kwargs, endpoint, endpoint or f"AWS {region}"


def retry_config(max_attempts: int, connect_timeout: float, read_timeout: float) -> dict[str, Any]:
    """botocore ``Config`` arguments: standard retry mode (throttling and 5xx retried with backoff by
    botocore itself, at most ``max_attempts`` tries in all) and explicit timeouts, so a dead endpoint fails in
    seconds instead of botocore's 60 s default."""
    return {
        "retries": {"mode": "standard", "total_max_attempts": max_attempts},
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
    }


# -- the shared core ----------------------------------------------------------------------------------
_TABLE_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def shard_of(execution_id: str) -> str:
    return str(zlib.crc32(execution_id.encode("utf-8")) % TIMER_SHARDS)


def queue_shard(seq: int) -> str:
    """The partition key of an outbox / spawns entry: derived from its seq, so a seq names its item."""
    return str(seq % QUEUE_SHARDS)


def execution_shard(execution_id: str) -> int:
    """The shard every outbox / spawns entry of ``execution_id`` is written to (stable across processes)."""
    return zlib.crc32(execution_id.encode("utf-8")) % QUEUE_SHARDS


def queue_key(seq: int) -> Item:
    """The full primary key of the outbox / spawns entry ``seq``."""
    return {"shard": S(queue_shard(seq)), "seq": N(seq)}


# -- the filter of spilled event ids ------------------------------------------------------------------
def _bloom_positions(event_id: str) -> list[int]:
    digest = hashlib.blake2b(event_id.encode("utf-8"), digest_size=16).digest()
    h1, h2 = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1
    return [(h1 + i * h2) % BLOOM_BITS for i in range(BLOOM_HASHES)]


def bloom_add(bloom: bytes, event_ids: Iterable[str]) -> bytes:
    """``bloom`` with ``event_ids`` added (``b""`` is the empty filter; a non-empty one is 128 bytes)."""
    ids = list(event_ids)
    if not ids:
        return bloom
    bits = bytearray(bloom or bytes(BLOOM_BITS // 8))
    for event_id in ids:
        for pos in _bloom_positions(event_id):
            bits[pos >> 3] |= 1 << (pos & 7)
    return bytes(bits)


def bloom_may_contain(bloom: bytes, event_id: str) -> bool:
    """False proves ``event_id`` was never added; True means it may have been."""
    if not bloom:
        return False
    return all(bloom[pos >> 3] & (1 << (pos & 7)) for pos in _bloom_positions(event_id))


def bloom_false_positive_rate(bloom: bytes) -> float:
    """The chance that an id never added still tests positive, from the filter's fill."""
    if not bloom:
        return 0.0
    ones = sum(bin(b).count("1") for b in bloom)
    return float((ones / BLOOM_BITS) ** BLOOM_HASHES)


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
    recent: tuple[str, ...]
    spill: bytes | None
    evicted: tuple[str, ...]
    outbox: list[Item]
    spawns: list[Item]
    processed: Item | None
    timers: list[TimerOp]
    trace: str | None

    @property
    def single(self) -> bool:
        return not (self.outbox or self.spawns or self.processed or self.timers or self.trace is not None)


class DynamoCore:
    """Configuration, caches and the operation generators shared by the sync and async stores.

    Options (keyword-only, the same on both stores):

    - ``trace_max``: trace ring size per execution (``DEFAULT_TRACE_MAX``; 0/None keeps every step).
    - ``recent_events``: applied event ids kept inside the execution item (default 8; 0 = the seed's
      layout, one ``processed`` item written in every commit's transaction).
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
    ) -> None:
        if not prefix or not set(prefix) <= _TABLE_NAME_OK or len(prefix) > 200:
            raise ValueError(f"bad table prefix {prefix!r}: use letters, digits, '_', '-' or '.'")
        if not 0 <= recent_events <= BATCH_WRITE_MAX - 1:
            raise ValueError(f"recent_events must be between 0 and {BATCH_WRITE_MAX - 1}")
        self.prefix = prefix
        self.trace_max: int | None = trace_max
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
        # has none). A (id, version) pair names exactly one stored item, so an entry is never stale, only
        # possibly superseded; it saves the read of ``rids`` and ``spill`` a commit would otherwise need.
        self._known: OrderedDict[str, tuple[int, tuple[str, ...], bytes | None]] = OrderedDict()
        # execution id -> (version, next trace index) after a commit through this store: the next
        # traced commit from that version skips the max-index Query (single writer per execution).
        self._trace_next: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._where = "?"

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
        self, execution_id: str, version: int, recent: tuple[str, ...], spill: bytes | None
    ) -> None:
        with self._lock:
            self._known[execution_id] = (version, recent, spill)
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

    def _recall(self, execution_id: str, version: int) -> tuple[tuple[str, ...], bytes | None] | None:
        """The stored ``rids`` and ``spill`` of ``(execution_id, version)`` if known (a new execution's
        are known: nothing applied, nothing spilled)."""
        if version == 0:
            return (), b""
        with self._lock:
            hit = self._known.get(execution_id)
        return (hit[1], hit[2]) if hit is not None and hit[0] == version else None

    def _batch_read_pays(self, execution_id: str) -> bool:
        """Whether the dedupe check should read the execution and the mark together (one BatchGetItem,
        two read units) rather than the execution first (one GetItem, one read unit, plus a second
        request when its filter cannot rule the event out): with the seed layout (every mark in
        ``processed``), and for an execution last seen without a filter or with a saturated one, where
        the second request is (nearly) certain. A superseded entry only costs: both paths are exact."""
        if self.recent_events == 0:
            return True
        with self._lock:
            hit = self._known.get(execution_id)
        if hit is None:
            return False
        return hit[2] is None or bloom_false_positive_rate(hit[2]) >= 0.5

    def _forget(self, execution_id: str) -> None:
        with self._lock:
            self._known.pop(execution_id, None)
            self._trace_next.pop(execution_id, None)

    @staticmethod
    def _rids(item: Item | None) -> tuple[str, ...]:
        if not item or "rids" not in item:
            return ()
        return tuple(v["S"] for v in item["rids"]["L"])

    @staticmethod
    def _spill(item: Item | None) -> bytes | None:
        """The item's filter of spilled ids; None when it has none (written by the seed layout, or
        before the filter existed): then nothing can be ruled out without reading ``processed``."""
        if not item or "spill" not in item:
            return None
        return bytes(item["spill"]["B"])

    def _call(self, op: str, kwargs: dict[str, Any]) -> Ops[dict[str, Any]]:
        """One API call, retried with backoff while the error is transient (bounded)."""
        attempt = 0
        while True:
            try:
                response: dict[str, Any] = yield Call(op, kwargs)
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
                want = [(k["AttributeName"], k["KeyType"]) for k in _key_schema(spec.keys)]
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
                if missing:
                    raise StoreUnavailable(
                        f"table {name} exists without the index {missing[0]!r} durastate queries; create it "
                        "with this version of durastate (DynamoDBStore.create() or the CDK stack), or "
                        "delete the table and let create() rebuild it"
                    )
                if desc.get("TableStatus") == "ACTIVE" and all(s == "ACTIVE" for s in indexes.values()):
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
    def _execution(self, item: Item | None) -> Execution | None:
        if not item:
            return None
        exe = Execution.model_validate_json(item["data"]["S"])
        self._remember(exe.id, int(item["version"]["N"]), self._rids(item), self._spill(item))
        return exe

    _LOAD_NAMES = {"#d": "data", "#v": "version", "#r": "rids", "#f": "spill"}
    _MARK_NAMES = {"#v": "version", "#r": "rids", "#f": "spill"}

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
        return self._execution(resp.get("Item"))

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
        or behind it for ids it already holds in ``rids``) and executions are never deleted.
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
        if spill is not None and not bloom_may_contain(spill, event_id):
            return item, False
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

    def load_for_event_ops(self, execution_id: str, event_id: str) -> Ops[tuple[Execution | None, bool]]:
        item, seen = yield from self._dedupe_read(execution_id, event_id, self._LOAD_NAMES)
        return self._execution(item), seen

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
        self, recent: tuple[str, ...], event_id: str | None
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the new ``rids``, the ids to write to ``processed`` first)."""
        ids = list(recent)
        if event_id is not None and self.recent_events > 0 and event_id not in ids:
            ids.append(event_id)
        if len(ids) <= self.recent_events:
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
    ) -> _Plan:
        exe.version = old + 1
        try:
            data = exe.model_dump_json()
        finally:
            exe.version = old
        new_recent, evicted = self._next_recent(recent, processed_event_id)
        # The filter must hold every applied id that is not in ``rids``. The seed layout writes marks only
        # to ``processed`` (and spills every id it finds in ``rids``), so it drops the filter; and an item
        # without one (written by the seed layout, or before filters) never gets one back.
        new_spill = None if self.recent_events == 0 or spill is None else bloom_add(spill, evicted)
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
        if new_recent:
            item["rids"] = {"L": [S(i) for i in new_recent]}
        if new_spill is not None:
            item["spill"] = {"B": new_spill}
        hint = "keep large payloads out of the context and event data (store them elsewhere, keep a key)"
        size = item_size(item)
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
        plan = _Plan(
            item, data, new_recent, new_spill, evicted, outbox, spawn_items, processed, timers, trace_json
        )
        if not plan.single:
            self._check_transaction(exe.id, plan, placeholder)
        return plan

    def _check_transaction(self, execution_id: str, plan: _Plan, placeholder: int) -> None:
        sizes = [item_size(plan.exe_item)]
        sizes += [item_size(o) for o in plan.outbox] + [item_size(s) for s in plan.spawns]
        if plan.processed is not None:
            sizes.append(item_size(plan.processed))
        sizes += [item_size(self._timer_item(execution_id, op)) for op in plan.timers]
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
            if self.trace_max:
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
        recent, spill = known if known is not None else ((), b"")
        plan = self._plan(
            exe, old, recent, spill, emit_list, processed_event_id, timer_ops, spawn_list, trace
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
            )
        if plan.evicted:
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
        traced: int | None = None
        try:
            if plan.single:
                yield from self._call("put_item", put)
            else:
                txn, traced = yield from self._transaction(exe.id, old, plan, put)
                yield from self._call("transact_write_items", {"TransactItems": txn})
        except Exception as exc:
            if classify(exc) != "conflict":
                raise
            response = getattr(exc, "response", {})
            reasons = cancellation_reasons(exc)
            stored = reasons[0].get("Item") if reasons else response.get("Item")
            retried = bool(response.get("ResponseMetadata", {}).get("RetryAttempts"))
            yield from self._settle_conflict(exe.id, old, plan.data, stored, retried)
        self._remember(exe.id, old + 1, plan.recent, plan.spill)
        self._remember_trace(exe.id, old, traced)
        exe.version = old + 1

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
            if self.trace_max and idx - self.trace_max >= 0:
                gone = {"execution_id": S(execution_id), "idx": N(idx - self.trace_max)}
                txn.append({"Delete": {"TableName": self.table("trace"), "Key": gone}})
        return txn, idx

    def _settle_conflict(
        self, execution_id: str, old: int, data: str, stored: Item | None, retried: bool
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
                    "ProjectionExpression": "#v, #d",
                    "ExpressionAttributeNames": {"#v": "version", "#d": "data"},
                },
            )
            stored = resp.get("Item")
        found = int(stored["version"]["N"]) if stored else None
        if retried and found == old + 1 and stored is not None and stored.get("data", {}).get("S") == data:
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
    def pending_outbox_ops(self, limit: int | None = None) -> Ops[list[OutboxEntry]]:
        # No cut is needed: all of one execution's entries live in one shard (see _next_seqs), and a
        # Query of a shard returns them in seq order, so a pass never sees a later entry of an
        # execution without the earlier ones, whatever commits land between its per-shard Queries.
        rows = yield from self._oldest("outbox", limit)
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

    def pending_spawns_ops(self, limit: int | None = None) -> Ops[list[SpawnEntry]]:
        rows = yield from self._oldest("spawns", limit)
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

    def _oldest(self, table: str, limit: int | None) -> Ops[list[Item]]:
        """The ``limit`` entries of a queue table with the lowest seqs (all of them for None), in seq
        order: a merge of per-shard Queries in seq order.

        Each shard is read from its oldest entry, ``limit / QUEUE_SHARDS + 1`` items at first (executions
        spread evenly over the shards, so that is often all it takes); then, while fewer than
        ``limit`` items are known to be the oldest — those at or below the lowest last-read seq of the
        shards that have more — the next page of that shard is read. A pass reads about its budget,
        whatever the backlog.
        """
        if limit is not None and limit <= 0:
            return []
        per = None if limit is None else limit // QUEUE_SHARDS + 1
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

        for n in range(QUEUE_SHARDS):
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

    def due_timers_ops(self, now: float) -> Ops[list[tuple[str, str, float]]]:
        out: list[tuple[str, str, float]] = []
        for shard in range(TIMER_SHARDS):
            rows = yield from self._pages(
                "query",
                {
                    "TableName": self.table("timers"),
                    "IndexName": "due",
                    "KeyConditionExpression": "#sh = :sh AND #fa <= :now",
                    "ExpressionAttributeNames": {"#sh": "shard", "#fa": "fire_at"},
                    "ExpressionAttributeValues": {":sh": S(str(shard)), ":now": N(now)},
                },
            )
            out += [(r["execution_id"]["S"], r["path"]["S"], float(r["fire_at"]["N"])) for r in rows]
        out.sort(key=lambda t: (t[2], t[0], t[1]))  # oldest due first, deterministic ties
        return out

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
    ) -> Ops[ExecutionPage]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        statuses = normalize_status(status)
        after: str | None = None
        if cursor:
            decoded = decode_cursor(cursor)
            if not isinstance(decoded, dict) or not isinstance(decoded.get("after"), str):
                raise ValueError(f"invalid cursor {cursor!r}: pass back a next_cursor this store returned")
            after = decoded["after"]
        ids: list[str] = []
        for st in sorted(statuses) if statuses is not None else STATUSES:
            ids += yield from self._status_ids(st, definition_id, roots_only, after, limit + 1)
        ids = sorted(set(ids))
        page = ids[:limit]
        summaries = yield from self._summaries(page)
        items = [s for s in summaries if summary_matches(s, definition_id, statuses, roots_only)]
        return ExecutionPage(items, encode_cursor({"after": page[-1]}) if len(ids) > limit else None)

    def _status_ids(
        self, status: str, definition_id: str | None, roots_only: bool, after: str | None, want: int
    ) -> Ops[list[str]]:
        """The first ``want`` ids (in id order, after the cursor) in one status of the index."""
        names = {"#st": "status"}
        values: dict[str, Any] = {":st": S(status)}
        key = "#st = :st"
        if after:
            key += " AND #id > :after"
            names["#id"] = "id"
            values[":after"] = S(after)
        filters = []
        if definition_id is not None:
            filters.append("#def = :def")
            names["#def"] = "definition_id"
            values[":def"] = S(definition_id)
        if roots_only:
            filters.append("attribute_not_exists(#pid)")
            names["#pid"] = "parent_id"
        kw: dict[str, Any] = {
            "TableName": self.table("executions"),
            "IndexName": "by_status",
            "KeyConditionExpression": key,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "Limit": want,
        }
        if filters:
            kw["FilterExpression"] = " AND ".join(filters)
        ids: list[str] = []
        while len(ids) < want:
            resp = yield from self._call("query", kw)
            ids += [r["id"]["S"] for r in resp.get("Items", [])]
            last = resp.get("LastEvaluatedKey")
            if not last:
                break
            kw = {**kw, "ExclusiveStartKey": last}
        return ids[:want]

    def _summaries(self, ids: list[str]) -> Ops[list[ExecutionSummary]]:
        """Summaries of the page's ids (eventually consistent: the index they come from is, too)."""
        exe_t = self.table("executions")
        found: dict[str, ExecutionSummary] = {}
        names = {
            "#i": "id",
            "#def": "definition_id",
            "#v": "version",
            "#st": "status",
            "#oc": "outcome",
            "#ap": "active_path",
            "#pid": "parent_id",
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

                found[r["id"]["S"]] = ExecutionSummary(
                    r["id"]["S"],
                    r["definition_id"]["S"],
                    int(r["version"]["N"]),
                    r["status"]["S"],
                    opt("outcome"),
                    opt("active_path"),
                    opt("parent_id"),
                )
        return [found[i] for i in ids if i in found]

    # -- trace ------------------------------------------------------------------------------------------
    def read_trace_ops(self, execution_id: str) -> Ops[list[dict[str, Any]]]:
        rows = yield from self._pages(
            "query",
            {
                "TableName": self.table("trace"),
                "KeyConditionExpression": "#e = :e",
                "ExpressionAttributeNames": {"#e": "execution_id"},
                "ExpressionAttributeValues": {":e": S(execution_id)},
                "ScanIndexForward": True,
                "ConsistentRead": True,
            },
        )
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
        if self.trace_max and idx - self.trace_max >= 0:
            yield from self._call(
                "delete_item",
                {
                    "TableName": self.table("trace"),
                    "Key": {"execution_id": S(execution_id), "idx": N(idx - self.trace_max)},
                },
            )
