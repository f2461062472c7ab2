"""Lambda's DynamoDB Streams event source mapping, played for the relay: shard iterators, filters, records.

Why this exists: moto keeps the outbox and spawns tables' streams but never invokes the function mapped to
them. The local stack reads them with the DynamoDB Streams API instead — one :class:`StreamCursor` per
mapping, holding an iterator per shard — keeps the records the mapping's ``FilterCriteria`` lets through
(:func:`matches`) and hands them over as Lambda does, as JSON (:func:`jsonable`). Retrying a failed batch
is the stack's part (it invokes the function).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from durastate.devstack.errors import LocalStackError
from durastate.devstack.template import StreamTrigger

__all__ = ["StreamCursor", "jsonable", "matches", "open_cursor", "read_new_records", "stream_arn"]


@dataclass
class StreamCursor:
    trigger: StreamTrigger
    stream_arn: str
    iterators: dict[str, str | None] = field(default_factory=dict)
    retries: int = 0


def stream_arn(ddb: Any, table_name: str) -> str:
    """The table's latest stream (what the template's ``Fn::GetAtt [Table, StreamArn]`` deploys as)."""
    arn = ddb.describe_table(TableName=table_name)["Table"].get("LatestStreamArn")
    if not arn:
        raise LocalStackError(f"table {table_name} has no stream, but the template maps one to a function")
    return str(arn)


def open_cursor(streams: Any, trigger: StreamTrigger, arn: str, position: str) -> StreamCursor:
    """A cursor on a stream, every shard's iterator at ``position`` (``TRIM_HORIZON``/``LATEST``).

    Only Streams calls, as the event source mapping makes them with the function's role."""
    cursor = StreamCursor(trigger, arn)
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"].get("Shards", []):
        cursor.iterators[shard["ShardId"]] = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType=position)["ShardIterator"]
    return cursor


def read_new_records(streams: Any, cursor: StreamCursor, region: str
                     ) -> tuple[list[dict[str, Any]], dict[str, str | None]]:
    """The records since the cursor that pass its filters, and the iterators past them (not yet stored:
    the caller moves the cursor once the batch was delivered)."""
    records: list[dict[str, Any]] = []
    advanced: dict[str, str | None] = {}
    for shard, iterator in cursor.iterators.items():
        if iterator is None:
            continue
        got = streams.get_records(ShardIterator=iterator, Limit=cursor.trigger.batch_size)
        advanced[shard] = got.get("NextShardIterator")
        for rec in got.get("Records", []):
            rec.setdefault("eventSourceARN", cursor.stream_arn)
            rec.setdefault("awsRegion", region)
            rec.setdefault("eventSource", "aws:dynamodb")
            if matches(rec, cursor.trigger.patterns):
                records.append(jsonable(rec))
    return records, advanced


def matches(record: Mapping[str, Any], patterns: list[dict[str, Any]]) -> bool:
    """Lambda event filtering, for the literal-value patterns the stack uses (``{"eventName": ["INSERT"]}``).

    Anything richer (prefix, numeric, exists) is out of scope: the stack's mappings don't use it.
    """
    if not patterns:
        return True

    def match(value: Any, pattern: Any) -> bool:
        if isinstance(pattern, dict):
            return isinstance(value, Mapping) and all(match(value.get(k), p) for k, p in pattern.items())
        if isinstance(pattern, list):
            return value in pattern
        return bool(value == pattern)

    return any(match(record, p) for p in patterns)


def jsonable(value: Any) -> Any:
    """Stream records from boto3 carry datetimes; Lambda delivers JSON (epoch seconds)."""
    from datetime import datetime

    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode()
    return value

