# ruff: noqa: RUF002  (the report's typography)
"""Capacity accounting from the requests a boto3 client actually sends (botocore event hooks).

:class:`Meter` registers ``provide-client-params`` and ``after-call`` handlers on a DynamoDB client and
an SQS client, and bills every request by the published on-demand rules:

- **writes**: 1 WRU per started KB of the item (the larger of its before and after images, as DynamoDB
  bills an overwrite), a failed conditional write included; ×2 inside ``TransactWriteItems``;
  ``BatchWriteItem`` bills each item; plus the writes a global secondary index takes when the item's
  projection changes (a put and/or a delete of the index entry, 1 WRU per KB each);
- **reads**: 1 RRU per started 4 KB (½ when eventually consistent, always for an index), at least one
  unit per ``GetItem``/``BatchGetItem`` key (a missing item too) and per ``Query``/``Scan`` page; a
  ``ProjectionExpression`` does not lower it (the whole item is read) — the meter keeps a shadow copy of
  every item it has seen written, so it knows each item's full size;
- **SQS**: one request per 64 KB chunk of a request's payload (a batch of 10 small messages is one).

Nothing here trusts a ``ConsumedCapacity`` answer (moto does not compute one): the bill is derived from
the request and response bodies alone, so it holds for any backend.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from durastate.store.dynamodb import limits

KB = 1024


def item_size(item: dict[str, Any] | None) -> int:
    """The billed size of an item the meter saw (the store's own rules: one copy of them)."""
    return limits.item_size(item) if item else 0


@dataclass
class Tally:
    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    wru: float = 0.0
    rru: float = 0.0
    sqs_requests: float = 0.0
    items_read: int = 0

    @property
    def dynamo_requests(self) -> int:
        return sum(n for op, n in self.requests.items() if not op.startswith("sqs:"))

    def add(self, other: Tally) -> None:
        for k, v in other.requests.items():
            self.requests[k] += v
        self.wru += other.wru
        self.rru += other.rru
        self.sqs_requests += other.sqs_requests
        self.items_read += other.items_read

    def scaled(self, f: float) -> dict[str, Any]:
        return {"requests": self.dynamo_requests * f, "wru": self.wru * f, "rru": self.rru * f,
                "sqs": self.sqs_requests * f, "ops": {k: v * f for k, v in sorted(self.requests.items())}}


@dataclass(frozen=True)
class IndexDef:
    name: str
    keys: tuple[str, ...]
    include: tuple[str, ...]


class Meter:
    """Bills the requests of the clients it is attached to, into the tally of the current ``tag``."""

    def __init__(self, prefix: str, table_keys: dict[str, tuple[str, ...]],
                 indexes: dict[str, list[IndexDef]]) -> None:
        self.prefix = prefix
        self.keys = table_keys
        self.indexes = indexes
        self.shadow: dict[tuple[str, str], dict[str, Any]] = {}
        self.tallies: dict[str, Tally] = defaultdict(Tally)
        self.tag = "setup"
        self._pending: list[tuple[str, dict[str, Any]]] = []

    @classmethod
    def for_durastate(cls, prefix: str) -> Meter:
        from durastate.store.dynamodb import layout as _dynamo

        keys = {t.name: tuple(k for k, _ in t.keys) for t in _dynamo.TABLES}
        idx = {t.name: [IndexDef(i.name, tuple(k for k, _ in i.keys), tuple(i.include)) for i in t.indexes]
               for t in _dynamo.TABLES}
        return cls(prefix, keys, idx)

    # -- wiring ----------------------------------------------------------------------------------------
    def attach(self, client: Any, service: str) -> None:
        client.meta.events.register(f"provide-client-params.{service}.*", self._before)
        client.meta.events.register(f"after-call.{service}.*", self._after)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._pending.append((model.name, params))

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        name, params = self._pending.pop()
        assert name == model.name, (name, model.name)
        service = model.service_model.service_name
        t = self.tallies[self.tag]
        if service == "sqs":
            t.requests["sqs:" + name] += 1
            t.sqs_requests += max(1, math.ceil(len(json.dumps(params).encode()) / (64 * KB)))
            return
        t.requests[name] += 1
        ok = "Error" not in parsed
        getattr(self, "_" + name, self._other)(t, params, parsed, ok)

    # -- helpers ---------------------------------------------------------------------------------------
    def _logical(self, table: str) -> str:
        return table[len(self.prefix) + 1:] if table.startswith(self.prefix + "_") else table

    def _key(self, table: str, item: dict[str, Any]) -> tuple[str, str]:
        names = self.keys.get(table, ())
        return table, json.dumps([item.get(k) for k in names], sort_keys=True)

    def _write(self, t: Tally, table: str, key_or_item: dict[str, Any], new: dict[str, Any] | None,
               factor: int, apply: bool) -> None:
        table = self._logical(table)
        k = self._key(table, key_or_item)
        old = self.shadow.get(k)
        size = max(item_size(old), item_size(new))
        t.wru += factor * max(1, math.ceil(size / KB))
        for ix in self.indexes.get(table, []):
            before, after = self._entry(table, ix, old), self._entry(table, ix, new)
            if before == after:
                continue
            if before is not None:
                t.wru += max(1, math.ceil(item_size(before) / KB))
            if after is not None:
                t.wru += max(1, math.ceil(item_size(after) / KB))
        if apply:
            if new is None:
                self.shadow.pop(k, None)
            else:
                self.shadow[k] = new

    def _entry(self, table: str, ix: IndexDef, item: dict[str, Any] | None) -> dict[str, Any] | None:
        if item is None or any(k not in item for k in ix.keys):
            return None
        names = set(self.keys[table]) | set(ix.keys) | set(ix.include)
        return {k: v for k, v in item.items() if k in names}

    def _read_items(self, t: Tally, table: str, sizes: list[int], consistent: bool, per_item: bool) -> None:
        unit = 1.0 if consistent else 0.5
        t.items_read += len(sizes)
        if per_item:
            t.rru += sum(unit * max(1, math.ceil(s / (4 * KB))) for s in sizes)
        else:
            t.rru += unit * max(1, math.ceil(sum(sizes) / (4 * KB)))

    def _full(self, table: str, item: dict[str, Any]) -> int:
        logical = self._logical(table)
        return item_size(self.shadow.get(self._key(logical, item)) or item)

    # -- operations ------------------------------------------------------------------------------------
    def _PutItem(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        self._write(t, p["TableName"], p["Item"], p["Item"], 1, ok)

    def _DeleteItem(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        self._write(t, p["TableName"], p["Key"], None, 1, ok)

    def _UpdateItem(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        table = self._logical(p["TableName"])
        old = self.shadow.get(self._key(table, p["Key"])) or dict(p["Key"])
        new = {**old, **(r.get("Attributes") or {})}
        self._write(t, p["TableName"], p["Key"], new, 1, ok)

    def _TransactWriteItems(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        for entry in p["TransactItems"]:
            ((kind, body),) = entry.items()
            if kind == "Put":
                self._write(t, body["TableName"], body["Item"], body["Item"], 2, ok)
            elif kind == "Delete":
                self._write(t, body["TableName"], body["Key"], None, 2, ok)
            elif kind == "Update":
                table = self._logical(body["TableName"])
                old = self.shadow.get(self._key(table, body["Key"])) or dict(body["Key"])
                self._write(t, body["TableName"], body["Key"], old, 2, False)
            else:  # ConditionCheck
                table = self._logical(body["TableName"])
                size = item_size(self.shadow.get(self._key(table, body["Key"])))
                t.wru += 2 * max(1, math.ceil(size / KB))

    def _BatchWriteItem(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        for table, reqs in p["RequestItems"].items():
            for req in reqs:
                if "PutRequest" in req:
                    item = req["PutRequest"]["Item"]
                    self._write(t, table, item, item, 1, ok)
                else:
                    self._write(t, table, req["DeleteRequest"]["Key"], None, 1, ok)

    def _GetItem(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        size = self._full(p["TableName"], p["Key"]) if r.get("Item") else 0
        self._read_items(t, p["TableName"], [size], bool(p.get("ConsistentRead")), per_item=True)

    def _BatchGetItem(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        for table, spec in p["RequestItems"].items():
            found = {self._key(self._logical(table), it)[1] for it in r.get("Responses", {}).get(table, [])}
            sizes = []
            for key in spec["Keys"]:
                k = self._key(self._logical(table), key)
                sizes.append(self._full(table, key) if k[1] in found else 0)
            self._read_items(t, table, sizes, bool(spec.get("ConsistentRead")), per_item=True)

    def _Query(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        items = r.get("Items", [])
        if p.get("IndexName"):
            sizes = [item_size(i) for i in items]  # the index entries themselves
            consistent = False
        else:
            sizes = [self._full(p["TableName"], i) for i in items]
            consistent = bool(p.get("ConsistentRead"))
        scanned, count = r.get("ScannedCount", len(items)), r.get("Count", len(items))
        if scanned > count and sizes:  # filtered out after the read: billed too, at the average size
            sizes += [sum(sizes) // len(sizes)] * (scanned - count)
        self._read_items(t, p["TableName"], sizes, consistent, per_item=False)

    _Scan = _Query

    def _other(self, t: Tally, p: dict[str, Any], r: dict[str, Any], ok: bool) -> None:
        """Control-plane calls (CreateTable, DescribeTable, ListTables): not billed per request."""
