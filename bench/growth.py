"""Growth: does the read cost of a sweep, a relay pass and a listing page grow with what it returns,
or with the table?

Each store is filled to two sizes (by default 10k and 100k rows; ``--quick``: 1k and 10k) and the same
three reads are costed at both:

- **sweep**: ``due_timers(now)`` with every row an armed timer, of which 10 are due;
- **relay pass**: the read a relay pass makes (``pending_spawns`` + ``pending_outbox``, each limited to the
  pass's budget) with the whole
  table as a backlog of undelivered outbox entries, against the 100 entries a pass with a budget of 100
  delivers;
- **listing**: one page (100) of ``list_executions(status="running")`` in a table where 1 % run;
- **purge batch**: one retention batch (``purge``, limit 100) in the same table, where one in ten finished
  executions ended before the cutoff: DynamoDB meters the whole batch (the ``ended`` index Query, the read
  of each execution, its tombstone's conditional Put and its trace Query); PostgreSQL explains the batch's
  SELECT on the partial ``executions_ended`` index.

DynamoDB (moto, in process): items read and read units, billed by :mod:`bench._meter` from the
requests and responses. PostgreSQL: ``EXPLAIN (ANALYZE, BUFFERS)`` of the store's own statements — rows
read and shared buffers touched. Rows are bulk-loaded (``BatchWriteItem`` / ``COPY``) in the stores'
own layouts: each DynamoDB item is a clone of one the store wrote itself, so the layout cannot drift
(and the outbox's seq allocator is left at the backlog's highest seq, as the store's own commits leave it).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from bench._meter import Meter
from durastate.store.sql import due_timers_floor

NOW = 1_700_000_000.0
DUE = 10
PAGE = 100
RELAY_BUDGET = 100
DAY = 86400.0
CUTOFF = NOW - 30 * DAY
"""The purge batch's cutoff (``--older-than 30d``); one row in ten ended 60 days ago, the others a day ago."""


def _ended_at(i: int) -> float:
    return NOW - (60 if i % 10 == 1 else 1) * DAY


# -- DynamoDB -------------------------------------------------------------------------------------------
def _dynamo_templates(store: Any, client: Any) -> dict[str, dict[str, Any]]:
    """One item per table, written by the store itself (an execution with an armed timer and an emit)."""
    from durastate.engine import DefinitionRegistry, Event, load_definition
    from durastate.runtime.worker import Worker

    reg = DefinitionRegistry()
    reg.register(load_definition(os.path.join(os.path.dirname(__file__), "defs", "costs.yaml")))
    w = Worker(store, reg, clock=lambda: NOW)
    w.handle(
        "tmpl",
        Event(
            id="tmpl:start",
            name="durastate.start",
            data={"definition_id": "costs", "context": {"peer": "someone"}},
        ),
    )
    w.handle("tmpl", Event(id="tmpl:1", name="notify"))
    w.handle("tmpl", Event(id="tmpl:2", name="arm"))
    out = {}
    for name in ("executions", "timers", "outbox"):
        items = client.scan(TableName=store.table(name))["Items"]
        out[name] = items[0]
        client.delete_item(TableName=store.table(name), Key={k: items[0][k] for k in _keys(name)})
    return out


def _keys(table: str) -> tuple[str, ...]:
    from durastate.store.dynamodb import layout as _dynamo

    for t in _dynamo.TABLES:
        if t.name == table:
            return tuple(k for k, _ in t.keys)
    raise KeyError(table)


def _batch_put(client: Any, table: str, items: list[dict[str, Any]]) -> None:
    """Bulk-load ``items`` (a fixture, not a measurement): straight into moto's in-process backend when
    it is there — its HTTP emulation loads ~1k items/s, far too slow for 100k — else BatchWriteItem."""
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        backend_table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(table)
    except Exception:
        backend_table = None
    if backend_table is not None:
        for it in items:
            backend_table.put_item(it)
        return
    for i in range(0, len(items), 25):
        pending: dict[str, Any] = {table: [{"PutRequest": {"Item": it}} for it in items[i : i + 25]]}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def _dynamo_fill(
    store: Any, client: Any, tmpl: dict[str, dict[str, Any]], start: int, end: int, outbox_max: int
) -> None:
    from durastate.store.dynamodb import sharding as _dynamo

    shard_of = getattr(_dynamo, "shard_of", None)
    queue_key = getattr(_dynamo, "queue_key", None)
    ended_shard = getattr(_dynamo, "ended_shard", None)
    timers, outbox, exes = [], [], []
    for i in range(start, end):
        eid = f"e{i:07d}"
        t = dict(tmpl["timers"])
        t["execution_id"] = {"S": eid}
        due = i < DUE
        t["fire_at"] = {"N": str(NOW - 100 + i if due else NOW + 3600 + i)}
        if shard_of is not None and "shard" in t:
            t["shard"] = {"S": shard_of(eid)}
        timers.append(t)
        o = dict(tmpl["outbox"])
        o.update(queue_key(i + 1000) if queue_key is not None else {"seq": {"N": str(i + 1000)}})
        o["target_id"] = {"S": eid}
        outbox.append(o)
        x = dict(tmpl["executions"])
        x["id"] = {"S": eid}
        status = "running" if i % 100 == 0 else "finished"
        x["status"] = {"S": status}
        ended = "" if status == "running" else f',"ended_at":{_ended_at(i)}'
        x["data"] = {
            "S": x["data"]["S"]
            .replace('"tmpl"', json.dumps(eid))
            .replace('"status":"running"', f'"status":"{status}"{ended}')
        }
        if ended and ended_shard is not None:  # the sparse ``ended`` index's keys, as a commit writes them
            x["ended_shard"] = {"S": ended_shard(status, eid)}
            x["ended_at"] = {"N": str(_ended_at(i))}
        exes.append(x)
    _batch_put(client, store.table("timers"), timers)
    loaded = outbox[: max(0, outbox_max - start)]
    _batch_put(client, store.table("outbox"), loaded)
    if loaded:  # the seq allocator's high-water mark, as the store's own commits would have left it
        top = int(loaded[-1]["seq"]["N"])
        _batch_put(client, store.table("counters"), [{"id": {"S": "outbox"}, "n": {"N": str(top)}}])
    _batch_put(client, store.table("executions"), exes)


def run_dynamo(sizes: tuple[int, ...], relay_max: int | None = None) -> dict[int, dict[str, Any]]:
    """``relay_max``: where the outbox backlog stops growing (None: it grows with the table). A relay
    pass Queries the oldest entries of each shard, so it reads about its budget at any backlog; a cap
    only mattered when the pass was a Scan of the whole backlog (moto needed minutes for 100k)."""
    import boto3
    from moto import mock_aws

    from durastate.store.dynamodb.sync import DynamoDBStore

    for k, v in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ.setdefault(k, v)
    out: dict[int, dict[str, Any]] = {}
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        store = DynamoDBStore(client, prefix="growth")
        store.ensure_tables()
        tmpl = _dynamo_templates(store, client)
        meter = Meter.for_durastate("growth")
        meter.attach(client, "dynamodb")
        filled = 0
        for size in sizes:
            meter.tag = "fill"
            t0 = time.perf_counter()
            _dynamo_fill(store, client, tmpl, filled, size, size if relay_max is None else relay_max)
            filled = size
            fill_s = time.perf_counter() - t0
            row: dict[str, Any] = {"fill_seconds": fill_s}
            for name, call in (
                ("sweep", lambda: store.due_timers(NOW)),
                (
                    "relay pass",
                    lambda: (store.pending_spawns(RELAY_BUDGET), store.pending_outbox(RELAY_BUDGET)),
                ),
                ("listing page", lambda: store.list_executions(status="running", limit=PAGE)),
                ("purge batch", lambda: store.purge(CUTOFF, limit=PAGE, now=NOW)),
            ):
                if name == "relay pass" and relay_max is not None and size > relay_max:
                    row[name] = None
                    continue
                meter.tag = f"{size}:{name}"
                result = call()
                got = (
                    len(result[1])
                    if name == "relay pass"
                    else len(result.items)
                    if name == "listing page"
                    else result.purged
                    if name == "purge batch"
                    else len(result)
                )
                t = meter.tallies[meter.tag]
                row[name] = {
                    "returned": got,
                    "items_read": t.items_read,
                    "rru": t.rru,
                    "requests": t.dynamo_requests,
                    "needed": RELAY_BUDGET if name == "relay pass" else PAGE if name == "purge batch" else got,
                }
            out[size] = row
    return out


# -- PostgreSQL -----------------------------------------------------------------------------------------
PG_SCHEMA = f"durastate_growth_{os.getpid()}"


def _pg_copy(conn: Any, schema: str, start: int, end: int) -> None:
    from durastate.engine.model import Event, Execution

    tmpl_exe = Execution(id="x", definition_id="costs", active_path="idle", version=3)
    ev = Event(id="e", name="pinged").model_dump_json()
    with conn.cursor() as cur:
        with cur.copy(f'COPY "{schema}".timers (execution_id, path, fire_at) FROM STDIN') as cp:
            for i in range(start, end):
                cp.write_row((f"e{i:07d}", "waiting", NOW - 100 + i if i < DUE else NOW + 3600 + i))
        with cur.copy(f'COPY "{schema}".outbox (target_id, event) FROM STDIN') as cp:
            for i in range(start, end):
                cp.write_row((f"e{i:07d}", ev))
        with cur.copy(
            f'COPY "{schema}".executions (id, definition_id, version, status, parent_id, '
            "active_path, outcome, data, ended_at) FROM STDIN"
        ) as cp:
            for i in range(start, end):
                eid = f"e{i:07d}"
                status = "running" if i % 100 == 0 else "finished"
                ended = None if status == "running" else _ended_at(i)
                tmpl_exe.id, tmpl_exe.status, tmpl_exe.ended_at = eid, status, ended  # type: ignore[assignment]
                cp.write_row((eid, "costs", 3, status, None, "idle", None, tmpl_exe.model_dump_json(), ended))
    conn.commit()
    with conn.cursor() as cur:
        for t in ("timers", "outbox", "executions"):
            cur.execute(f'VACUUM ANALYZE "{schema}".{t}')


def _explain(conn: Any, sql: str, params: Any) -> dict[str, Any]:
    import psycopg

    with psycopg.ClientCursor(conn) as cur:
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        plan = cur.fetchone()[0][0]
    top = plan["Plan"]
    nodes = []

    def walk(n: dict[str, Any]) -> None:
        nodes.append(n)
        for c in n.get("Plans", []):
            walk(c)

    walk(top)
    scanned = sum(
        n.get("Actual Rows", 0) * n.get("Actual Loops", 1) + n.get("Rows Removed by Filter", 0)
        for n in nodes
        if "Scan" in n.get("Node Type", "")
    )
    return {
        "returned": top.get("Actual Rows", 0),
        "rows_scanned": scanned,
        "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        "ms": plan.get("Execution Time", 0.0),
        "nodes": sorted(
            {
                n["Node Type"] + (f" on {n['Index Name']}" if n.get("Index Name") else "")
                for n in nodes
                if "Scan" in n.get("Node Type", "")
            }
        ),
    }


def run_postgres(sizes: tuple[int, ...]) -> dict[int, dict[str, Any]]:
    import psycopg

    from bench.stores import PG_DSN
    from durastate.store.postgres.sync import PostgresStore

    with psycopg.connect(PG_DSN, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{PG_SCHEMA}" CASCADE')
    store = PostgresStore.from_dsn(PG_DSN, schema=PG_SCHEMA)
    sql = store._sql
    out: dict[int, dict[str, Any]] = {}
    try:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            filled = 0
            for size in sizes:
                t0 = time.perf_counter()
                _pg_copy(conn, PG_SCHEMA, filled, size)
                filled = size
                row: dict[str, Any] = {"fill_seconds": time.perf_counter() - t0}
                row["sweep"] = _explain(conn, sql.stmt.due_timers, (due_timers_floor(None), NOW))
                row["relay pass"] = _explain(conn, sql.stmt.pending_outbox, (RELAY_BUDGET,))
                q = sql.list_executions(None, frozenset({"running"}), False, None, PAGE)
                assert q is not None
                row["listing page"] = _explain(conn, q[0], q[1])
                purge = sql.purge_select(CUTOFF, ("finished", "cancelled", "failed", "terminated"), None, PAGE)
                row["purge batch"] = {**_explain(conn, purge[0], purge[1]), "needed": PAGE + 1}
                row["relay pass"]["needed"] = RELAY_BUDGET
                out[size] = row
    finally:
        store.close()
        with psycopg.connect(PG_DSN, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{PG_SCHEMA}" CASCADE')
    return out
