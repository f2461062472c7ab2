"""Which partition key an item gets, where one key would be a hot partition.

Why a module of its own: the shard counts and the hash that picks a shard are part of the stored data's
meaning — every process must agree on them, or timers go unswept and queue entries undelivered — and
several places use them (the commit writes shard keys, the relay and the sweeper query every shard, the
tests and benchmarks build items by them). See :mod:`durastate.store.dynamodb.layout` for the tables
they spread.
"""

from __future__ import annotations

import zlib

from durastate.store.dynamodb.limits import Item, N, S

TIMER_SHARDS = 4
"""Partition keys of the ``due`` index. Fixed: every process must agree on it, or timers go unswept."""

QUEUE_SHARDS = 4
"""Partition keys (``shard`` = ``seq % QUEUE_SHARDS``) of the outbox and spawns tables, whose sort key is
``seq``. Fixed: every process must agree on it, or entries go undelivered.

Why 4: a partition takes at most 1,000 write units a second, and a monotonically increasing sort key
defeats DynamoDB's split-for-heat (every new entry lands at the tail of its shard), so each shard is one
hot partition. An entry costs 3 write units there (its transactional Put, 2; its ack's Delete, 1). An
execution's entries all go to one shard (by a hash of its id, :func:`execution_shard`, for ordering:
see :meth:`~durastate.store.dynamodb.core.DynamoCore._next_seqs`), so executions spread the load over
the shards. The seq allocator is one item of the counters table, so at most ~1,000 commits a second
can emit or spawn at all: at that ceiling, one entry each, 4 shards carry ~750 write units a second
each, under the limit. More shards would add nothing the allocator lets through, and a relay pass
without named shards (the scheduled backstop, over a table that is not empty) queries every shard (one
request and one read unit each, even when empty), so the count is kept at that ceiling."""


def shard_of(execution_id: str) -> str:
    return str(zlib.crc32(execution_id.encode("utf-8")) % TIMER_SHARDS)


def ended_shard(status: str, execution_id_or_shard: str | int) -> str:
    """The partition key of the ``ended`` index: ``{status}#{shard}`` (shard as :func:`shard_of`). Per
    status, so a purge of some statuses reads only theirs; sharded, so executions ending together do not
    all write one index partition (its sort key, the end time, only grows)."""
    shard = execution_id_or_shard if isinstance(execution_id_or_shard, int) else shard_of(execution_id_or_shard)
    return f"{status}#{shard}"


def queue_shard(seq: int) -> str:
    """The partition key of an outbox / spawns entry: derived from its seq, so a seq names its item."""
    return str(seq % QUEUE_SHARDS)


def execution_shard(execution_id: str) -> int:
    """The shard every outbox / spawns entry of ``execution_id`` is written to (stable across processes)."""
    return zlib.crc32(execution_id.encode("utf-8")) % QUEUE_SHARDS


def queue_key(seq: int) -> Item:
    """The full primary key of the outbox / spawns entry ``seq``."""
    return {"shard": S(queue_shard(seq)), "seq": N(seq)}
