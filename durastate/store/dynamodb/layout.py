"""The DynamoDB store's table layout: the seven tables, their keys and indexes, as data.

Why a module of its own: the layout is the store's contract with what is stored — every process, every
version and the CDK stack (``infra/schema.py`` keeps a copy, checked against this one by
``tests/infra/test_schema.py``) must agree on it — so it lives apart from the logic that reads and writes it
(:mod:`durastate.store.dynamodb.core`), and this docstring is where the layout and every choice made
beyond the seed design are written down. Names such as :data:`sharding.QUEUE_SHARDS` below are of this
package's other modules (:mod:`durastate.store.dynamodb`).

Layout (seven tables ``{prefix}_{name}``, on-demand; the seed's key schemas except the outbox's and
the spawns', plus four indexes):

==========  =====================================  ==============================================
table       key                                    holds
==========  =====================================  ==============================================
executions  id (S)                                 ``data`` (the Execution JSON), ``version``,
                                                   ``definition_id``, the summary fields broken out
                                                   (``status``, ``outcome``, ``active_path``,
                                                   ``parent_id``), ``rids`` (recent event ids) and
                                                   ``spill`` (B: a filter of the ids spilled from
                                                   ``rids``); when ended: ``ended_shard``,
                                                   ``ended_at`` (the ``ended`` index); a tombstone:
                                                   ``expires_at`` (TTL)
outbox      shard (S), seq (N)                     ``target_id``, ``event`` (JSON)
spawns      shard (S), seq (N)                     ``parent_id``, ``child_id``, ``root_path``,
                                                   ``context`` (JSON)
timers      execution_id (S), path (S)             ``fire_at`` (N), ``shard`` (S)
processed   execution_id (S), event_id (S)         chunks of spilled event ids (``event_id`` =
                                                   ``~spill~{version}``, ``ids`` SS); single marks
                                                   of the seed layout and of items without a filter
counters    id (S)                                 ``n``: the outbox / spawn seq allocators
trace       execution_id (S), idx (N)              ``entry`` (JSON): the trace ring
==========  =====================================  ==============================================

Beyond the seed, and why (the seed's behaviour stays the contract):

* **State-only commits are one conditional PutItem.** A commit with no emits, spawns, timers or
  trace writes only the execution item, so it needs no transaction: a single-item conditional write is
  atomic on its own and costs half the write units of a transactional one. The dedupe mark of such a
  commit lives *inside* the execution item, in ``rids`` (the recently applied event ids), so it lands
  atomically with the state change. ``rids`` holds at least :data:`core.RECENT_FLOOR` (8) ids and
  grows to ``recent_events`` (default 24) while the item stays within the kilobyte it needs anyway
  (an id never costs a write unit of its own); a uuid id is kept as its 16 bytes, any other as text
  (:mod:`recent_ids`: lossless, so twice as many uuids fit before a spill). When it is full, all its
  ids but the newest *spill*:
  they are written first — as **one chunk item** of ``processed`` (``event_id`` =
  ``~spill~{version}``, the version whose write drops them; ``ids``: a string set), one PutItem and 1
  write unit for up to 24 uuid-sized ids; inside the commit's transaction instead when the commit is
  one anyway, which spares the request — and only then dropped from the item. Writing them early is
  always true (they are committed), and every writer from one stored version spills the same ids
  (that version's ``rids``) under the same key, so a racing writer overwrites a chunk with itself.
  Every applied event id is therefore always in ``rids`` or in a chunk. The price of a spill is one
  write unit per spill instead of one per id (the layout before chunks: 1 WRU per event in the steady
  state, now about 1/23 for a small execution with uuid ids); a strict 1 WRU per event at every point
  is impossible with exact dedupe
  in a bounded item: the ids must go somewhere, and any write costs at least a unit. Items without a
  filter (below) spill one mark per id, as before, because their check reads a mark by its key.
  ``recent_events=0`` restores the seed's layout exactly (the mark is a ``processed`` Put inside the
  commit's transaction).
* **The dedupe check is one GetItem** (1 read unit) in the common case, not a read of the execution
  and its ``processed`` mark (2). The write that drops ids from ``rids`` also adds them to ``spill``,
  a Bloom filter in the execution item (:data:`bloom.BLOOM_BITS` bits, :data:`bloom.BLOOM_HASHES`
  hashes; ``b""`` until the first spill), which every later commit carries forward — so every applied id not in
  ``rids`` is in the filter of every later version. ``load_for_event`` / ``is_processed`` read the
  item alone: an id in ``rids`` is applied; an id the filter rules out is not; only a filter
  positive (a spilled id, or a false positive) reads the execution's chunks too, for the exact answer:
  a Query of its ``processed`` items, newest first, a few per page, stopping at the id (a duplicate is
  usually recent: one page, one read unit; a false positive reads them all, about one read unit per
  100 spilled ids). A false positive costs that Query, never correctness; its rate grows with the
  spilled ids (about 0.5 % at 64, 1.6 % at 100, 9 % at 200, 33 % at 400, 85 % at 1,000: see
  :data:`bloom.BLOOM_HASHES`), so an execution with hundreds of events pays it on a growing share of
  them — the limit of this layout for very long-lived executions (a ``processed_ttl`` bounds the
  chunks read; the filter is never reset). 128 bytes keep the cost benchmark's state-only execution
  item under 1 KB (1 write unit). No item means not applied, with no second read: a mark is only ever written
  for an id its execution holds (in the commit's transaction, or behind it for ids in ``rids``) and
  an execution item is only ever deleted as an expired tombstone (by TTL, see Retention below), after
  which its id is meant to be free again: a mark left without its item no longer counts. The seed
  layout (every mark in ``processed``) writes no filter
  and drops one it finds (its marks are not in it); an item without a filter (written by the seed
  layout, or by a durastate before the filter) never gets one back, and its dedupe check always reads
  the mark by its key. There the check reads the execution and the mark in one BatchGetItem instead
  (1 request, 2 units). Single marks a durastate before chunks wrote for an item *with* a filter are
  found by the same Query as its chunks.
* **The relay reads the oldest entries by Query, not by Scan.** The seed keys the outbox and spawns
  by ``seq`` alone, so the oldest entries can only be found by scanning every pending one (a Scan is
  unordered) — a pass over a backlog of N read N. Here they are keyed by ``shard`` (``seq %``
  :data:`sharding.QUEUE_SHARDS`, so a seq still names exactly one item and an ack deletes by it) and
  ``seq``: a pass Queries each shard from its oldest entry (strongly consistent) and merges by seq,
  reading about its budget whatever the backlog (:meth:`core.DynamoCore._oldest`). Why sharded, and
  why :data:`sharding.QUEUE_SHARDS` = 4: see that constant (one partition's write limit, and the seq
  allocator's ceiling). A pass reads only the shards that have work: the relay's stream trigger names
  the shards its inserts went to (the relay then Queries each named shard of both tables: a parent's
  spawn intents and the events it forwards to its regions share its shard, so the spawns-before-events
  order holds), and a pass without names (the scheduled backstop) first Scans one item of the table —
  an empty table costs that one request, not a Query per shard. The Queries of one pass run one after the other,
  so a commit may land between them; but every entry of one execution is written to one shard (its
  seqs are drawn from that shard's residue class, :meth:`core.DynamoCore._next_seqs`), where a Query
  returns it in seq order, so a pass never delivers a later entry of an execution — of the same
  commit or a later one — ahead of an earlier one. Changing a table's key means a new table:
  :meth:`core.DynamoCore.ensure_tables_ops` refuses one with the seed's key (drain it with the
  previous version's relay, delete it, create it again; it holds only undelivered work).
* **Due timers come from a sparse index**, ``due`` on the timers table (hash ``shard``, range
  ``fire_at``, keys only), so a sweep reads the timers that are due, not every armed timer; a sweep
  that hops timers ahead of time reads what is due (open below: an overdue timer is never skipped) and
  then only the window after what it already hopped (``fire_at BETWEEN``), not every timer waiting
  for its hop.
  ``shard`` (:func:`sharding.shard_of`) spreads the index over :data:`sharding.TIMER_SHARDS`
  partition keys so timer arms never concentrate on one hot index partition (a time-ordered range key
  defeats DynamoDB's split-for-heat); the sweep queries each shard — after one Scan of a single item
  of the timers table, so a sweep with no timer armed at all (an idle deployment) is one request.
* **A commit that only arms timers needs no transaction.** Its timers are Put *ahead* of the
  execution write, each conditional on its path holding no timer armed at another time, and the
  execution is then one PutItem (1 + 1 write units and the index entry, where the 2-item transaction
  cost 2 + 2). A timer armed ahead of a commit that then fails fires a timeout whose ``fire_at`` the
  stored execution does not hold: the engine ignores it as stale. Replacing an armed timer is left to
  the transaction (the condition refuses it), so a stored execution's timer is never replaced by one
  it does not hold. (A timeout's cancel of the timer that fired is left out of its commit by the
  worker, which deletes it afterwards guarded by ``fire_at`` — unless the timeout says ``swept``: its
  sweeper deletes it, and a second delete of a missing item would still cost a write unit.)
* **Listing reads the ``by_status`` index** (hash ``status``, range ``id``, with ``definition_id``
  and ``parent_id`` projected), so a page of executions by status costs the page, not the table;
  summaries come from a BatchGetItem of the page's ids. Pages come back in id order, full (``limit``
  items while more match), with an opaque ``after`` cursor. The index carries no attribute that
  changes on every commit (not ``version``), so ordinary commits never write to it.
* **Retention: a sparse** ``ended`` **index and tombstones.** An ended execution (not a system record)
  carries ``ended_shard`` (``{status}#{shard}``, :func:`sharding.ended_shard`) and ``ended_at``, the keys
  of the ``ended`` index (``definition_id`` projected); running ones carry neither, so they are not in
  it and their commits never write it. A purge Queries it per status and shard for ``ended_at`` below
  its cutoff — reading the executions it purges, not the table — then reads each (consistent) and
  replaces it by its *tombstone* with a Put conditional on the version read (a commit that lands first
  wins; the purge skips that one): the same item, status ``purged``, the data stripped to identity,
  outcome and times, ``rids``/``spill`` kept (the dedupe marks inside the item), without the index keys
  and with :data:`TTL_ATTRIBUTE` = the tombstone's expiry; its trace items are deleted. The worker
  ignores every event for a tombstone, a repeated start included. DynamoDB's TTL (enabled on the
  executions table by the CDK stack) deletes the tombstone when it expires; its ``processed`` marks and
  trace steps expire by their own TTLs. The index was added after the first layout:
  :meth:`core.DynamoCore.ensure_tables_ops` adds it to an existing table (UpdateTable); executions that
  ended before it carry no keys and are purged only if touched again.
* **Search fields: entry items and a sparse** ``by_search`` **index.** Each search value of an execution
  (:mod:`durastate.engine.search`) is an item of the executions table of its own, id
  ``~search~{execution id}~{field}``, holding ``execution`` (the execution's id) and ``term``
  (``{typed key}={value}``, :func:`core.search_term`) — the keys of ``by_search`` (hash ``term``, range
  ``execution``, keys only); executions carry neither, so only entries are in it. The execution item
  breaks its values out as ``search`` (compact JSON). A commit puts the entries of the fields whose value
  changed from the stored item's (known from the load, or read with the version) inside its transaction, so
  a commit that changes no search value stays a single PutItem; a value gone is an entry without
  ``term``, out of the index. Entries are written with the ``PutItem`` grant every committing function
  has on the table: no table, action or transaction of its own. A listing with an equality filter
  Queries ``by_search`` for its term in id order from the cursor and checks every id it finds against the
  execution's ``search`` (read with the summaries), so an entry the index shows late or stale (the index
  is eventually consistent; a purged execution's entries stay behind its tombstone) never lists a wrong
  execution. Other filters read the ``by_status`` pages and check the values the same way: the value is in the
  hash key (``total#n=120.0``) and the range key is the id, so no KeyConditionExpression can ask for a range
  of numbers (the SQL and in-memory stores scan one). The index was
  added after the first layout (``ADDED_INDEXES``).
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
  (400,000 bytes, 4,000,000 bytes), with item sizes computed by DynamoDB's documented rules
  (:mod:`limits`; the classification is :mod:`errors`).
* **Fewer reads per commit.** The stored version, ``rids`` and ``spill`` of an execution loaded
  through this store, and the next trace index after a traced commit, are remembered (keyed by version: an
  ``(id, version)`` pair names exactly one stored item), so a commit normally makes no read of its own.
* **Optional TTL** (``expires_at``, :data:`TTL_ATTRIBUTE`) on dedupe marks and trace steps, for the stack's TTL
  setting; always on tombstones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TTL_ATTRIBUTE = "expires_at"
"""Epoch seconds after which DynamoDB's TTL deletes an item (dedupe marks and trace steps, if configured;
tombstones, always)."""

_TABLE_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def check_prefix(prefix: str) -> None:
    """Refuse a table prefix DynamoDB would refuse in a table name (``{prefix}_{name}``)."""
    if not prefix or not set(prefix) <= _TABLE_NAME_OK or len(prefix) > 200:
        raise ValueError(f"bad table prefix {prefix!r}: use letters, digits, '_', '-' or '.'")


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
        (
            IndexSpec("by_status", (("status", "S"), ("id", "S")), ("definition_id", "parent_id")),
            IndexSpec("ended", (("ended_shard", "S"), ("ended_at", "N")), ("definition_id",)),
            IndexSpec("by_search", (("term", "S"), ("execution", "S"))),
        ),
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
ADDED_INDEXES = frozenset(("ended", "by_search"))
"""Indexes added after the first layout: ``ensure_tables`` adds them to an existing table."""


def key_schema(keys: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"AttributeName": a, "KeyType": role} for (a, _), role in zip(keys, ROLES, strict=False)]


def create_table_request(prefix: str, spec: TableSpec) -> dict[str, Any]:
    """The ``CreateTable`` arguments of one table (PAY_PER_REQUEST, with its indexes)."""
    attrs = dict(spec.keys)
    for index in spec.indexes:
        attrs.update(index.keys)
    req: dict[str, Any] = {
        "TableName": f"{prefix}_{spec.name}",
        "KeySchema": key_schema(spec.keys),
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": t} for a, t in attrs.items()],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if spec.indexes:
        req["GlobalSecondaryIndexes"] = [_index_request(index) for index in spec.indexes]
    return req


def _index_request(index: IndexSpec) -> dict[str, Any]:
    return {
        "IndexName": index.name,
        "KeySchema": key_schema(index.keys),
        "Projection": (
            {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.include)}
            if index.include
            else {"ProjectionType": "KEYS_ONLY"}
        ),
    }


def add_index_request(prefix: str, spec: TableSpec, index: IndexSpec) -> dict[str, Any]:
    """The ``UpdateTable`` arguments that add ``index`` to an existing table of ``spec``."""
    return {
        "TableName": f"{prefix}_{spec.name}",
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": t} for a, t in index.keys],
        "GlobalSecondaryIndexUpdates": [{"Create": _index_request(index)}],
    }
