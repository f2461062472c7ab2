"""The DynamoDB table layout the stack provisions, kept as plain data.

Why a copy and not an import of the store's own specs: the CDK app must synthesize from a fresh clone
without importing the ``durastate`` package (``infra`` depends on nothing in ``durastate`` at import time), so the
key schemas live here too. A test compares this copy with the store's table specs, so the two cannot
drift apart silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

AttributeType = Literal["S", "N", "B"]

#: The attribute DynamoDB's TTL deletes by (epoch seconds). Written by the store on items that may expire.
TTL_ATTRIBUTE = "expires_at"


@dataclass(frozen=True)
class IndexSpec:
    """A global secondary index: its name, keys and projection."""

    name: str
    partition: tuple[str, AttributeType]
    sort: tuple[str, AttributeType] | None = None
    projection: Literal["ALL", "KEYS_ONLY", "INCLUDE"] = "ALL"
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSpec:
    """One of the store's tables: keys, and what the stack enables on it."""

    partition: tuple[str, AttributeType]
    sort: tuple[str, AttributeType] | None = None
    #: Streams (new images) feed the relay, so an emitted event or a spawn is delivered at once.
    stream: bool = False
    #: Point-in-time recovery: the executions are the state of record.
    point_in_time_recovery: bool = False
    #: Items that only matter for a while (dedupe marks, trace steps, tombstones) carry a TTL attribute.
    ttl: bool = False
    indexes: tuple[IndexSpec, ...] = field(default=())


#: ``{prefix}_{name}`` for each entry, in the order the store creates them.
TABLES: dict[str, TableSpec] = {
    "executions": TableSpec(
        partition=("id", "S"),
        point_in_time_recovery=True,
        # Tombstones (what retention leaves of a purged execution) expire by TTL.
        ttl=True,
        # Listing by status reads a page, not the table; retention reads the ended executions only (the
        # sparse ``ended`` index: ``ended_shard`` = ``{status}#{shard}``, range the end time).
        indexes=(
            IndexSpec("by_status", ("status", "S"), ("id", "S"), "INCLUDE", ("definition_id", "parent_id")),
            IndexSpec("ended", ("ended_shard", "S"), ("ended_at", "N"), "INCLUDE", ("definition_id",)),
            # Listing by search field: the executions' search entries (items ``~search~…``), by value.
            IndexSpec("by_search", ("term", "S"), ("execution", "S"), "KEYS_ONLY"),
        ),
    ),
    # Partition ``shard`` = seq % 4, sort ``seq``: a relay pass Queries the oldest entries of each shard
    # (reading about its budget, not the backlog); 4 shards keep each under a partition's write limit.
    "outbox": TableSpec(partition=("shard", "S"), sort=("seq", "N"), stream=True),
    "spawns": TableSpec(partition=("shard", "S"), sort=("seq", "N"), stream=True),
    "timers": TableSpec(
        partition=("execution_id", "S"),
        sort=("path", "S"),
        # The sweeper queries the due timers per shard instead of scanning every armed timer.
        indexes=(IndexSpec("due", ("shard", "S"), ("fire_at", "N"), "KEYS_ONLY"),),
    ),
    "processed": TableSpec(partition=("execution_id", "S"), sort=("event_id", "S"), ttl=True),
    "counters": TableSpec(partition=("id", "S")),
    "trace": TableSpec(partition=("execution_id", "S"), sort=("idx", "N"), ttl=True),
}


def table_name(prefix: str, name: str) -> str:
    """The physical table name, exactly as the store derives it."""
    return f"{prefix}_{name}"
