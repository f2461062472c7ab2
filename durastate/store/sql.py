"""The SQL family's shared shape: schema, statements, row mapping and the listing query.

``SqliteStore`` and ``PostgresStore`` differ in dialect, not in structure. Everything here is
dialect-neutral data and pure functions — no connection, no driver import — so both stores build the same
tables and run the same statements, and a fix to the shape lands in both:

- :data:`TABLES` describes the six tables; :func:`create_statements` renders their DDL for a
  :class:`Dialect` (placeholder style, column types, the auto-increment key, ``WITHOUT ROWID``).
- :class:`Statements` holds every statement a store runs, rendered once per dialect by
  :func:`statements` (SQL is written with ``?`` and rendered to ``%s`` for psycopg).
- :func:`execution_row` / :func:`summary_from_row` map an :class:`Execution` to the broken-out columns and
  a listing row back to an :class:`ExecutionSummary`.
- :func:`list_query` builds the listing ``WHERE`` (definition, status list, roots only) with keyset
  (cursor) paging on ``id``: the cursor is the last id returned, so each page costs what it returns.

Two ways to update: ``update_execution`` sets every listing column in one statement (right for
PostgreSQL, whose HOT updates skip index maintenance when an indexed value did not change);
``update_keep_status`` leaves the indexed ``status`` alone and RETURNs the stored one, and the store runs
``update_status`` only when it changed (SQLite rewrites an index entry for every column named in SET, i.e.
one more 4 KB WAL frame per commit; status changes a handful of times in an execution's life).

Why broken-out columns: the hot path (CAS) compares ``version`` and listing filters on ``definition_id``,
``status`` and ``parent_id`` without ever parsing the JSON ``data`` blob, which stays the single source of
truth for ``load``.

The trace ring's shape: ``trace_insert`` computes the next index inside the INSERT
(``COALESCE(MAX(idx), -1) + 1`` over the execution's rows, on the transaction's own connection, so there is
no read-modify-write race and a rolled-back commit leaves no gap) and RETURNs it; the store then runs
``trace_trim`` only when that index has reached ``trace_max``, deleting every step at or below
``idx - trace_max``. An explicit ``"index"`` in an entry is kept inside the entry and wins on read
(``read_trace`` does ``entry.setdefault("index", idx)``), while the stored ``idx`` keeps climbing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_json

from durastate.engine.model import Execution
from durastate.errors import InvalidCursor
from durastate.store.base import ExecutionSummary, decode_cursor, encode_cursor

__all__ = [
    "POSTGRES",
    "SCHEMA_VERSION",
    "SQLITE",
    "TABLES",
    "Column",
    "Dialect",
    "Index",
    "Statements",
    "Table",
    "create_statements",
    "cursor_after",
    "execution_row",
    "list_query",
    "next_cursor",
    "statements",
    "summary_from_row",
    "trace_entry",
]

SCHEMA_VERSION = 1
"""Bumped when the tables change shape; stores record it (SQLite: ``PRAGMA user_version``)."""

ColumnType = Literal["text", "int", "bigint", "float", "serial"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between SQL engines for this schema."""

    name: str
    param: str
    """The driver's placeholder: ``?`` (sqlite3) or ``%s`` (psycopg)."""
    types: dict[str, str]
    """Column type names for ``text``, ``int``, ``bigint``, ``float``."""
    serial_pk: str
    """A monotonic, never-reused integer primary key (outbox/spawn seq)."""
    without_rowid: bool
    """SQLite: store composite-key tables clustered on their key."""
    no_limit: int | None
    """The ``LIMIT ?`` argument that means "all rows": -1 in SQLite, NULL in PostgreSQL."""

    def limit(self, limit: int | None) -> int | None:
        """The ``LIMIT`` argument for an optional row limit (a relay pass reads only its budget)."""
        return self.no_limit if limit is None else max(0, limit)

    def render(self, sql: str) -> str:
        return sql if self.param == "?" else sql.replace("?", self.param)


SQLITE = Dialect(
    name="sqlite",
    param="?",
    types={"text": "TEXT", "int": "INTEGER", "bigint": "INTEGER", "float": "REAL"},
    # AUTOINCREMENT: a plain rowid reuses max(rowid)+1 after the newest row is acked; seqs must not repeat.
    serial_pk="INTEGER PRIMARY KEY AUTOINCREMENT",
    without_rowid=True,
    no_limit=-1,
)
POSTGRES = Dialect(
    name="postgres",
    param="%s",
    types={"text": "TEXT", "int": "INTEGER", "bigint": "BIGINT", "float": "DOUBLE PRECISION"},
    serial_pk="BIGSERIAL PRIMARY KEY",
    no_limit=None,
    without_rowid=False,
)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Index:
    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    """Composite key; empty when a ``serial`` column is the key."""
    indexes: tuple[Index, ...] = ()


TABLES: tuple[Table, ...] = (
    Table(
        "executions",
        (
            Column("id", "text"),
            Column("definition_id", "text"),
            Column("version", "bigint"),
            Column("status", "text"),
            Column("parent_id", "text", nullable=True),
            Column("active_path", "text", nullable=True),
            Column("outcome", "text", nullable=True),
            Column("data", "text"),
        ),
        primary_key=("id",),
        indexes=(
            Index("executions_status_id", ("status", "id")),
            Index("executions_definition_id", ("definition_id", "id")),
        ),
    ),
    Table(
        "outbox",
        (Column("seq", "serial"), Column("target_id", "text", nullable=True), Column("event", "text")),
    ),
    Table(
        "processed_events",
        (Column("execution_id", "text"), Column("event_id", "text")),
        primary_key=("execution_id", "event_id"),
    ),
    Table(
        "timers",
        (Column("execution_id", "text"), Column("path", "text"), Column("fire_at", "float")),
        primary_key=("execution_id", "path"),
        indexes=(Index("timers_fire_at", ("fire_at",)),),
    ),
    Table(
        "spawns",
        (
            Column("seq", "serial"),
            Column("parent_id", "text"),
            Column("child_id", "text"),
            Column("root_path", "text"),
            Column("context", "text"),
        ),
    ),
    Table(
        "trace",
        (Column("execution_id", "text"), Column("idx", "bigint"), Column("entry", "text")),
        primary_key=("execution_id", "idx"),
    ),
)


def create_statements(dialect: Dialect, tables: Sequence[Table] = TABLES) -> list[str]:
    """Idempotent DDL (``IF NOT EXISTS``) for ``tables`` in ``dialect``, tables before their indexes."""
    out: list[str] = []
    for t in tables:
        cols = []
        for c in t.columns:
            if c.type == "serial":
                cols.append(f"{c.name} {dialect.serial_pk}")
            else:
                cols.append(f"{c.name} {dialect.types[c.type]}{'' if c.nullable else ' NOT NULL'}")
        if t.primary_key:
            cols.append(f"PRIMARY KEY ({', '.join(t.primary_key)})")
        tail = " WITHOUT ROWID" if dialect.without_rowid and t.primary_key else ""
        out.append(f"CREATE TABLE IF NOT EXISTS {t.name} ({', '.join(cols)}){tail}")
        out.extend(
            f"CREATE INDEX IF NOT EXISTS {ix.name} ON {t.name} ({', '.join(ix.columns)})" for ix in t.indexes
        )
    return out


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of the SQL family, rendered for one dialect. Parameters are listed per statement."""

    load: str  # (id) -> data
    load_for_event: str  # (id, execution_id, event_id) -> (data | NULL, processed 0/1): always one row
    insert_execution: str  # execution_row(exe) + () ; ON CONFLICT DO NOTHING: rowcount 0 = conflict
    update_execution: str  # (data, version, status, active_path, outcome, id, old_version)
    update_keep_status: str  # (data, version, active_path, outcome, id, old_version) RETURNING status
    update_status: str  # (status, id)
    select_version: str  # (id) -> version   (only to report a conflict)
    insert_outbox: str  # (target_id, event_json)
    insert_processed: str  # (execution_id, event_id); idempotent
    is_processed: str  # (execution_id, event_id) -> 1
    upsert_timer: str  # (execution_id, path, fire_at)
    cancel_timer: str  # (execution_id, path)
    insert_spawn: str  # (parent_id, child_id, root_path, context_json)
    trace_insert: str  # (execution_id, entry_json, execution_id) RETURNING idx
    trace_trim: str  # (execution_id, max_idx_to_delete)
    read_trace: str  # (execution_id) -> (idx, entry) ordered
    pending_outbox: str  # (limit) -> (seq, target_id, event), oldest first
    ack_outbox: str  # (seq)
    pending_spawns: str  # (limit) -> (seq, parent_id, child_id, root_path, context)
    ack_spawn: str  # (seq)
    due_timers: str  # (now) -> (execution_id, path, fire_at) oldest first
    delete_timer: str  # (execution_id, path, fire_at) guarded by fire_at


_SUMMARY_COLUMNS = "id, definition_id, version, status, outcome, active_path, parent_id"


def statements(dialect: Dialect) -> Statements:
    r = dialect.render
    return Statements(
        load=r("SELECT data FROM executions WHERE id = ?"),
        load_for_event=r(
            "SELECT (SELECT data FROM executions WHERE id = ?), "
            "EXISTS (SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?)"
        ),
        insert_execution=r(
            "INSERT INTO executions "
            "(id, definition_id, version, status, parent_id, active_path, outcome, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
        ),
        update_execution=r(
            "UPDATE executions SET data = ?, version = ?, status = ?, active_path = ?, outcome = ? "
            "WHERE id = ? AND version = ?"
        ),
        update_keep_status=r(
            "UPDATE executions SET data = ?, version = ?, active_path = ?, outcome = ? "
            "WHERE id = ? AND version = ? RETURNING status"
        ),
        update_status=r("UPDATE executions SET status = ? WHERE id = ?"),
        select_version=r("SELECT version FROM executions WHERE id = ?"),
        insert_outbox=r("INSERT INTO outbox (target_id, event) VALUES (?, ?)"),
        insert_processed=r(
            "INSERT INTO processed_events (execution_id, event_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
        ),
        is_processed=r("SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?"),
        upsert_timer=r(
            "INSERT INTO timers (execution_id, path, fire_at) VALUES (?, ?, ?) "
            "ON CONFLICT (execution_id, path) DO UPDATE SET fire_at = excluded.fire_at"
        ),
        cancel_timer=r("DELETE FROM timers WHERE execution_id = ? AND path = ?"),
        insert_spawn=r("INSERT INTO spawns (parent_id, child_id, root_path, context) VALUES (?, ?, ?, ?)"),
        trace_insert=r(
            "INSERT INTO trace (execution_id, idx, entry) "
            "SELECT ?, COALESCE(MAX(idx), -1) + 1, ? FROM trace WHERE execution_id = ? RETURNING idx"
        ),
        trace_trim=r("DELETE FROM trace WHERE execution_id = ? AND idx <= ?"),
        read_trace=r("SELECT idx, entry FROM trace WHERE execution_id = ? ORDER BY idx"),
        pending_outbox=r("SELECT seq, target_id, event FROM outbox ORDER BY seq LIMIT ?"),
        ack_outbox=r("DELETE FROM outbox WHERE seq = ?"),
        pending_spawns=r(
            "SELECT seq, parent_id, child_id, root_path, context FROM spawns ORDER BY seq LIMIT ?"
        ),
        ack_spawn=r("DELETE FROM spawns WHERE seq = ?"),
        due_timers=r("SELECT execution_id, path, fire_at FROM timers WHERE fire_at <= ? ORDER BY fire_at"),
        delete_timer=r("DELETE FROM timers WHERE execution_id = ? AND path = ? AND fire_at = ?"),
    )


def execution_row(exe: Execution, data: str) -> tuple[Any, ...]:
    """Parameters of ``insert_execution`` for ``exe`` already serialised to ``data``."""
    return (
        exe.id,
        exe.definition_id,
        exe.version,
        exe.status,
        exe.parent_id,
        exe.active_path,
        exe.outcome,
        data,
    )


def summary_from_row(row: Sequence[Any]) -> ExecutionSummary:
    """A listing row (``_SUMMARY_COLUMNS`` order) as an :class:`ExecutionSummary`."""
    return ExecutionSummary(row[0], row[1], int(row[2]), row[3], row[4], row[5], row[6])


def json_text(value: Any) -> str:
    """Compact JSON text of a trace step or a seed context, as the SQL stores keep it.

    ``pydantic_core.to_json`` (already a dependency, via pydantic) writes it ~5x faster than
    ``json.dumps`` — a few microseconds of every traced event — and what it writes ``json.loads`` reads.
    """
    return to_json(value).decode()


TRIM_EVERY = 16
"""The trace ring is trimmed on every 16th step (deleting what fell out of it in one statement), not on
every step: a ring may hold up to ``trace_max + 15`` rows, and reads return the newest ``trace_max``.
One delete per 16 steps instead of one per step saves a statement and, mostly, a WAL page per event
(the oldest rows sit on another page than the newest)."""


def trace_ring(rows: Sequence[Sequence[Any]], trace_max: int | None) -> list[dict[str, Any]]:
    """``read_trace``'s answer from ``(idx, entry)`` rows in idx order: the newest ``trace_max`` of them."""
    if trace_max and len(rows) > trace_max:
        rows = rows[len(rows) - trace_max:]
    return [trace_entry(idx, entry) for idx, entry in rows]


def trace_entry(idx: int, entry_json: str) -> dict[str, Any]:
    """A stored trace step as ``read_trace`` returns it: an explicit ``index`` in the entry wins."""
    entry: dict[str, Any] = json.loads(entry_json)
    entry.setdefault("index", idx)
    return entry


def cursor_after(cursor: str | None) -> str | None:
    """The id a cursor points after (``ValueError`` for anything this family did not hand out)."""
    if cursor is None:
        return None
    value = decode_cursor(cursor)
    if not isinstance(value, str):
        raise InvalidCursor(cursor)
    return value


def next_cursor(items: list[ExecutionSummary], fetched: int, limit: int) -> str | None:
    """``list_query`` fetches ``limit + 1`` rows: a cursor exists only when the extra one came back."""
    return encode_cursor(items[-1].id) if fetched > limit and items else None


def list_query(
    dialect: Dialect,
    definition_id: str | None,
    statuses: frozenset[str] | None,
    roots_only: bool,
    after_id: str | None,
    limit: int,
) -> tuple[str, list[Any]] | None:
    """The listing SELECT and its parameters, or ``None`` when nothing can match (an empty status list).

    Keyset paging: ``id > after_id ORDER BY id LIMIT limit + 1`` — stable under concurrent inserts and
    served by the primary key (or the ``(status, id)`` / ``(definition_id, id)`` indexes when filtered).
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    where: list[str] = []
    params: list[Any] = []
    if definition_id is not None:
        where.append("definition_id = ?")
        params.append(definition_id)
    if statuses is not None:
        if not statuses:
            return None
        ordered = sorted(statuses)
        where.append(f"status IN ({', '.join('?' for _ in ordered)})")
        params.extend(ordered)
    if roots_only:
        where.append("parent_id IS NULL")
    if after_id is not None:
        where.append("id > ?")
        params.append(after_id)
    sql = f"SELECT {_SUMMARY_COLUMNS} FROM executions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY id LIMIT ?"
    params.append(limit + 1)
    return dialect.render(sql), params
