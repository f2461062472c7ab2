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
- :func:`list_query` builds the listing ``WHERE`` (definition, status list, roots only, parent, updated
  time; system records left out) with keyset
  (cursor) paging on ``id``: the cursor is the last id returned, so each page costs what it returns.

Two ways to update: ``update_execution`` sets every listing column in one statement (right for
PostgreSQL, whose HOT updates skip index maintenance when an indexed value did not change);
``update_keep_status`` leaves the indexed ``status`` (and its retention columns) alone, and the SQLite store
uses it when its ``commit_read`` shows they did not change (SQLite rewrites an index entry for every column
named in SET, i.e. one more 4 KB WAL frame per commit; status changes a handful of times in an execution's
life).

The dedupe marks of recent events live in the execution row (``rids``), as the DynamoDB store keeps them
in its item — see :func:`next_recent` for the layout, the spill to ``processed_events`` and why every
applied event id is always in one of the two.

Why broken-out columns: the hot path (CAS) compares ``version`` and listing filters on ``definition_id``,
``status`` and ``parent_id`` without ever parsing the JSON ``data`` blob, which stays the single source of
truth for ``load`` — with the context, when it is kept apart (:func:`context_apart`: a commit that did not
change it neither serialises nor writes it).

The trace ring's shape: the SQLite store keeps the newest steps in the execution row (``tsteps``, ``tnext``:
:func:`tail_start`) and moves them to the ``trace`` table in batches; the PostgreSQL store (whose row
update is logged as the bytes that changed, where a tail would cost more than the row it saves) writes a
``trace`` row per step. In the table, ``trace_insert`` computes the next index inside the INSERT
(``COALESCE(MAX(idx), -1) + 1`` over the execution's rows, on the transaction's own connection, so there is
no read-modify-write race and a rolled-back commit leaves no gap) and RETURNs it; ``trace_trim`` deletes every
step at or below ``idx - trace_max`` in batches. An explicit ``"index"`` in an entry is kept inside the entry
and wins on read (``read_trace`` does ``entry.setdefault("index", idx)``), while the stored ``idx`` keeps
climbing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_json

from durastate.engine.ids import SYSTEM_PREFIX
from durastate.engine.model import Execution
from durastate.engine.search import Condition, index_entries, index_entry, index_plan
from durastate.errors import InvalidCursor
from durastate.store.base import ExecutionSummary, decode_cursor, encode_cursor, hides_system
from durastate.store.retention import ended_index_value

__all__ = [
    "CONTEXT_INLINE_MAX",
    "POSTGRES",
    "RECENT_EVENTS",
    "SCHEMA_VERSION",
    "SQLITE",
    "TABLES",
    "Column",
    "Dialect",
    "Index",
    "Statements",
    "Table",
    "applied",
    "context_apart",
    "context_text",
    "create_statements",
    "cursor_after",
    "execution_row",
    "list_query",
    "load_execution",
    "next_cursor",
    "next_recent",
    "recent_ids",
    "row_state",
    "search_writes",
    "statements",
    "summary_columns",
    "summary_from_row",
    "tail_rows",
    "tail_start",
    "trace_entry",
    "whole_json",
    "without_context",
]

SCHEMA_VERSION = 6
"""Bumped when the tables change shape; stores record it (SQLite: ``PRAGMA user_version``).
2: ``executions.ended_at`` / ``expires_at`` and their partial indexes (retention), added on open.
3: ``executions.rids``, the recent dedupe ids (:func:`next_recent`), added on open.
4: ``executions.tnext`` / ``tsteps``, the newest trace steps in the row (:func:`tail_start`), added on open.
5: the ``search`` table, the index of the definitions' search fields (:func:`search_writes`), created on open
(empty: an execution stored before is indexed by its next commit).
6: the context apart from ``data`` (:func:`context_apart`): SQLite's ``contexts`` table, PostgreSQL's
``executions.context`` column, created on open (empty: a row stored before keeps its context in ``data``,
where it is read, until its next commit writes it apart)."""

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
    add_column_if_missing: bool = False
    """``ALTER TABLE … ADD COLUMN IF NOT EXISTS`` exists (PostgreSQL): a guard for two processes upgrading
    one database at once (the stores add only :func:`missing_columns`, found before the DDL)."""
    data_number: str = "json_extract(data, '$.{key}')"
    """A top-level number of the execution's JSON ``data`` as an SQL expression (``{key}``: its field name).
    ``created_at`` and ``updated_at`` are read this way (no column of their own, so no schema change):
    the listing shows them and filters on ``updated_at`` with it — a filter no index serves, which scans
    the rows the other filters leave."""

    def data_field(self, key: str) -> str:
        return self.data_number.format(key=key)

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
    add_column_if_missing=True,
    # PostgreSQL's JSON functions refuse a text holding the escape \u0000 (a NUL, which a TEXT column keeps
    # only escaped): reading any field of such a row would fail the whole listing. Rewriting the five
    # characters "u0000" after a backslash to "u0020" keeps the JSON valid whether that backslash starts an
    # escape or is itself escaped, and leaves every number as it is.
    data_number="(replace(data, '\\u0000', '\\u0020')::json ->> '{key}')::double precision",
)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = False
    only: str | None = None
    """The one dialect (its ``name``) that has this column; ``None``: every dialect."""


@dataclass(frozen=True, slots=True)
class Index:
    name: str
    columns: tuple[str, ...]
    where: str | None = None
    """A partial index's predicate: only the rows it holds are indexed (and cost index writes)."""


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    """Composite key; empty when a ``serial`` column is the key."""
    indexes: tuple[Index, ...] = ()
    rowid: bool = False
    """SQLite: a rowid table even with a ``primary_key`` (its key then gets a unique index). A ``WITHOUT ROWID``
    table is stored as an index b-tree, which keeps at most ~1 KB of a row in its page and the rest in
    overflow pages that every update rewrites; a rowid table keeps up to ~4 KB in the page."""
    only: str | None = None
    """The one dialect (its ``name``) that has this table; ``None``: every dialect."""


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
            Column("ended_at", "float", nullable=True),
            Column("expires_at", "float", nullable=True),
            Column("rids", "text", nullable=True),
            Column("tnext", "bigint", nullable=True),
            Column("tsteps", "text", nullable=True),
            # The context, apart from ``data`` (see context_apart): an UPDATE that does not name it leaves
            # its TOASTed value as it is (PostgreSQL reuses it; SQLite would rewrite it: its own table).
            Column("context", "text", nullable=True, only="postgres"),
        ),
        primary_key=("id",),
        indexes=(
            Index("executions_status_id", ("status", "id")),
            Index("executions_definition_id", ("definition_id", "id")),
            # A definition's executions in one status (`durastate list --definition D --status S`, redrive of a
            # definition's failures, the console's counts per status), read without passing the others.
            Index("executions_definition_status_id", ("definition_id", "status", "id")),
            # Retention: only ended (purgeable) executions and tombstones are in these, so a purge reads
            # what it purges, and running executions never pay an index write for them.
            Index("executions_ended", ("ended_at",), where="ended_at IS NOT NULL"),
            Index("executions_expires", ("expires_at",), where="expires_at IS NOT NULL"),
        ),
        # Rows hold the execution's JSON, its recent dedupe ids and its trace tail: often more than 1 KB.
        rowid=True,
    ),
    Table(
        # SQLite: an execution's context, when it is kept apart from ``data`` (see context_apart). Its own
        # table, not a column: SQLite writes a whole record on any UPDATE of it, overflow pages included.
        "contexts",
        (Column("id", "text"), Column("context", "text")),
        primary_key=("id",),
        rowid=True,
        only="sqlite",
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
    Table(
        # One row per search value of an execution (durastate.engine.search.index_entry: the key carries
        # the type; a string in text_value, a number or bool in num_value), written by its commit.
        "search",
        (Column("execution_id", "text"), Column("name", "text"), Column("text_value", "text", nullable=True),
         Column("num_value", "float", nullable=True)),
        primary_key=("execution_id", "name"),
        indexes=(
            # ``name = ? AND text_value = ?`` in id order: an equality filter reads the page it returns.
            Index("search_text", ("name", "text_value", "execution_id")),
            Index("search_number", ("name", "num_value", "execution_id")),
        ),
    ),
)


ADDED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("executions", "ended_at"), ("executions", "expires_at"), ("executions", "rids"),
    ("executions", "tnext"), ("executions", "tsteps"), ("executions", "context"),
)
"""Columns added after schema version 1, as (table, column): a database made before them gets them on open
(their rows then have no end time, so executions that ended before the upgrade are purged only once
touched again; see docs/retention.md; and no recent ids: a NULL ``rids`` is an empty list, every mark
made before is in ``processed_events``, where it stays valid; and no trace steps in the row: a NULL ``tnext``
means the next step's index is found in the ``trace`` table, as before; and no context apart: a NULL
``context`` means ``data`` holds the whole execution, see :func:`context_apart`)."""


def _column(table: Table, name: str) -> Column:
    return next(c for c in table.columns if c.name == name)


def add_column_statements(
    dialect: Dialect, tables: Sequence[Table], missing: Sequence[tuple[str, str]]
) -> list[str]:
    """``ALTER TABLE … ADD COLUMN`` for each (table, column) of ``missing`` (``tables``' names may be
    schema-qualified: matched by their last part)."""
    out = []
    guard = " IF NOT EXISTS" if dialect.add_column_if_missing else ""
    for t in tables:
        for table, name in missing:
            if t.name.rsplit(".", 1)[-1] == table:
                col = _column(t, name)
                out.append(f"ALTER TABLE {t.name} ADD COLUMN{guard} {col.name} {dialect.types[col.type]}")
    return out


def missing_columns(dialect: Dialect, present: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The :data:`ADDED_COLUMNS` of ``dialect`` absent from existing tables (``present``: table -> its
    columns; a table not in it does not exist yet, and is created whole)."""
    return [(t, c) for t, c in ADDED_COLUMNS if t in present and c not in present[t]
            and _column(next(x for x in TABLES if x.name == t), c).only in (None, dialect.name)]


def create_statements(dialect: Dialect, tables: Sequence[Table] = TABLES,
                      missing: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Idempotent DDL (``IF NOT EXISTS``) for ``tables`` in ``dialect``: tables, then the ``missing``
    columns of existing tables (:func:`missing_columns`), then the indexes, which may name those columns."""
    out: list[str] = []
    indexes: list[str] = []
    for t in tables:
        if t.only not in (None, dialect.name):
            continue
        cols = []
        for c in t.columns:
            if c.only not in (None, dialect.name):
                continue
            if c.type == "serial":
                cols.append(f"{c.name} {dialect.serial_pk}")
            else:
                cols.append(f"{c.name} {dialect.types[c.type]}{'' if c.nullable else ' NOT NULL'}")
        if t.primary_key:
            cols.append(f"PRIMARY KEY ({', '.join(t.primary_key)})")
        tail = " WITHOUT ROWID" if dialect.without_rowid and t.primary_key and not t.rowid else ""
        out.append(f"CREATE TABLE IF NOT EXISTS {t.name} ({', '.join(cols)}){tail}")
        indexes.extend(
            f"CREATE INDEX IF NOT EXISTS {ix.name} ON {t.name} ({', '.join(ix.columns)})"
            + (f" WHERE {ix.where}" if ix.where else "")
            for ix in t.indexes
        )
    return out + add_column_statements(dialect, tables, missing) + indexes


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of the SQL family, rendered for one dialect. Parameters are listed per statement."""

    load: str  # (id) -> data, context apart (NULL: in data)
    load_for_event: str  # (id, id, execution_id, event_id[, id]) -> (data | NULL, rids | NULL, marked 0/1[,
    # PostgreSQL: context apart | NULL]): one row
    version_for_event: str  # (id, id, execution_id, event_id) -> (version | NULL, rids | NULL, marked 0/1)
    commit_read: str  # (id) -> version, status, ended_at, expires_at, rids, tnext, the tail's first index and
    # length, whether the context is apart, tsteps: what a SQLite commit builds on (ROW_STATE, then the tail)
    insert_execution: str  # execution_row(exe, data, rids, tnext, tsteps); ON CONFLICT DO NOTHING: rowcount 0 =
    # conflict
    update_execution: str  # (data, version, status, active_path, outcome, ended_at, expires_at, rids, id,
    # old_version)
    update_keep_status: str  # (data, version, active_path, outcome, rids, id, old_version): the indexed columns
    # (status and its retention columns) left alone, for a commit that did not change them
    select_version: str  # (id) -> version   (only to report a conflict)
    insert_outbox: str  # (target_id, event_json)
    insert_processed: str  # (execution_id, event_id); idempotent
    upsert_timer: str  # (execution_id, path, fire_at)
    cancel_timer: str  # (execution_id, path)
    insert_spawn: str  # (parent_id, child_id, root_path, context_json)
    trace_insert: str  # (execution_id, entry_json, execution_id) RETURNING idx
    trace_trim: str  # (execution_id, max_idx_to_delete)
    read_trace: str  # (execution_id) -> (idx, entry) ordered
    read_trace_newest: str  # (execution_id, n) -> the newest n (idx, entry), ordered: a kept history's ring
    pending_outbox: str  # (limit) -> (seq, target_id, event), oldest first
    ack_outbox: str  # (seq)
    pending_spawns: str  # (limit) -> (seq, parent_id, child_id, root_path, context)
    ack_spawn: str  # (seq)
    due_timers: str  # (since, now) -> (execution_id, path, fire_at) oldest first (see due_timers_floor)
    delete_timer: str  # (execution_id, path, fire_at) guarded by fire_at
    tombstone: str  # (data, version, expires_at, id, old_version): a purge's CAS conversion
    delete_trace: str  # (execution_id)
    expired: str  # (now, limit) -> id: tombstones whose expiry passed
    delete_expired: str  # (id, now) guarded by the expiry
    delete_marks: str  # (execution_id)
    delete_search: str  # (execution_id): a purged execution leaves the search index
    upsert_search: str  # (execution_id, name, text_value, num_value); writes only a changed value


_SUMMARY_COLUMNS = "id, definition_id, version, status, outcome, active_path, parent_id"
_SUMMARY_WIDTH = 9  # those and the two times (summary_columns)

def row_state(alias: str = "", contexts: bool = True) -> str:
    """The columns of :data:`ROW_STATE`, of the table aliased ``alias`` (``"e"``: ``e.version``, …);
    ``contexts``: the file has a ``contexts`` table (one made before schema version 6, opened read-only, has
    none: every context is in ``data``)."""
    a = f"{alias}." if alias else ""
    apart = f"EXISTS (SELECT 1 FROM contexts c WHERE c.id = {alias or 'executions'}.id)" if contexts else "0"
    return (f"{a}version, {a}status, {a}ended_at, {a}expires_at, {a}rids, {a}tnext, CAST({a}tsteps AS INTEGER), "
            f"length({a}tsteps), {apart}")


ROW_STATE = row_state()
"""What a SQLite commit needs to know of the row it replaces, without ``data``: the version (its CAS), the
indexed columns (named in the ``UPDATE`` only when they change), the recent dedupe ids, the trace tail's
next index, first index (SQLite's ``CAST`` reads the number that starts ``tsteps``) and length, and whether
its context is kept apart (a ``contexts`` row: :func:`context_apart`)."""


CONTEXT_INLINE_MAX = 2048
"""SQLite: a context whose JSON is at most this long stays in ``data`` (:func:`context_apart`), so a commit of
a small context that changes writes one row (one page), not two."""

_NOT_CONTEXT: set[str] = {"context"}


def context_apart(dialect: Dialect, context_json: str) -> bool:
    """Whether a context (its JSON) is stored apart from the rest of the execution (``data``).

    Why apart: a commit that did not change the context (``commit(..., context_unchanged=True)``) then neither
    serialises it nor writes it — the cost of an event is what it changed, not what the execution holds.
    PostgreSQL keeps it in the ``executions.context`` column, always: an ``UPDATE`` that does not set a
    TOASTed column keeps its value untouched. SQLite keeps it in the ``contexts`` table when it is larger than
    :data:`CONTEXT_INLINE_MAX` (SQLite writes the whole record on any ``UPDATE``, overflow pages included:
    a 100 KB context in the row measured 250 µs and 238 KB of WAL per commit that did not touch it, in its own
    table 11 µs and 4 KB); a smaller one stays in ``data``, where a change to it costs no second row.

    The read rule, for both stores and for every row written before this layout: the context apart is
    ``NULL`` (no ``contexts`` row) → ``data`` holds the whole execution; else ``data`` holds it without its
    context (:func:`whole_json` joins them)."""
    return dialect.name == "postgres" or len(context_json) > CONTEXT_INLINE_MAX


def without_context(exe: Execution) -> str:
    """The JSON of ``exe`` without its context: ``data`` of a row whose context is apart."""
    return exe.model_dump_json(exclude=_NOT_CONTEXT)


def context_text(exe: Execution) -> str:
    """The JSON of ``exe``'s context, as :meth:`Execution.model_dump_json` writes it inside the execution."""
    return to_json(exe.context).decode()


def whole_json(data: str, context: str | None) -> str:
    """The execution's JSON from a row: ``data``, and its context apart (``None``: ``data`` holds it).
    ``data`` is an object with at least an id, so the context goes before its closing brace."""
    return data if context is None else f'{data[:-1]},"context":{context}}}'


def load_execution(data: str, context: str | None) -> Execution:
    """The execution a row holds (see :func:`context_apart` for the two forms)."""
    return Execution.model_validate_json(whole_json(data, context))


def summary_columns(dialect: Dialect) -> str:
    """The listing's columns, in :func:`summary_from_row`'s order: the broken-out ones, then the times."""
    return f"{_SUMMARY_COLUMNS}, {dialect.data_field('created_at')}, {dialect.data_field('updated_at')}"


def statements(dialect: Dialect) -> Statements:
    r = dialect.render
    return Statements(
        load=r("SELECT e.data, c.context FROM executions e LEFT JOIN contexts c ON c.id = e.id WHERE e.id = ?"
               if dialect.name == "sqlite" else "SELECT data, context FROM executions WHERE id = ?"),
        load_for_event=r(
            "SELECT (SELECT data FROM executions WHERE id = ?), (SELECT rids FROM executions WHERE id = ?), "
            "EXISTS (SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?)"
            + (", (SELECT context FROM executions WHERE id = ?)" if dialect.name == "postgres" else "")
        ),
        version_for_event=r(
            "SELECT (SELECT version FROM executions WHERE id = ?), (SELECT rids FROM executions WHERE id = ?), "
            "EXISTS (SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?)"
        ),
        commit_read=r(f"SELECT {ROW_STATE}, tsteps FROM executions WHERE id = ?"),
        insert_execution=r(
            "INSERT INTO executions (id, definition_id, version, status, parent_id, active_path, outcome, data, "
            "ended_at, expires_at, rids, tnext, tsteps) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING"
        ),
        update_execution=r(
            "UPDATE executions SET data = ?, version = ?, status = ?, active_path = ?, outcome = ?, "
            "ended_at = ?, expires_at = ?, rids = ? WHERE id = ? AND version = ?"
        ),
        update_keep_status=r(
            "UPDATE executions SET data = ?, version = ?, active_path = ?, outcome = ?, rids = ? "
            "WHERE id = ? AND version = ?"
        ),
        select_version=r("SELECT version FROM executions WHERE id = ?"),
        insert_outbox=r("INSERT INTO outbox (target_id, event) VALUES (?, ?)"),
        insert_processed=r(
            "INSERT INTO processed_events (execution_id, event_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
        ),
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
        read_trace_newest=r("SELECT idx, entry FROM (SELECT idx, entry FROM trace WHERE execution_id = ? "
                            "ORDER BY idx DESC LIMIT ?) AS newest ORDER BY idx"),
        pending_outbox=r("SELECT seq, target_id, event FROM outbox ORDER BY seq LIMIT ?"),
        ack_outbox=r("DELETE FROM outbox WHERE seq = ?"),
        pending_spawns=r(
            "SELECT seq, parent_id, child_id, root_path, context FROM spawns ORDER BY seq LIMIT ?"
        ),
        ack_spawn=r("DELETE FROM spawns WHERE seq = ?"),
        due_timers=r("SELECT execution_id, path, fire_at FROM timers WHERE fire_at BETWEEN ? AND ? ORDER BY fire_at"),
        delete_timer=r("DELETE FROM timers WHERE execution_id = ? AND path = ? AND fire_at = ?"),
        tombstone=r(
            "UPDATE executions SET data = ?, version = ?, status = 'purged', active_path = NULL, "
            "ended_at = NULL, expires_at = ?, tsteps = NULL WHERE id = ? AND version = ?"
        ),
        delete_trace=r("DELETE FROM trace WHERE execution_id = ?"),
        expired=r("SELECT id FROM executions WHERE expires_at <= ? ORDER BY expires_at LIMIT ?"),
        delete_expired=r("DELETE FROM executions WHERE id = ? AND expires_at <= ?"),
        delete_marks=r("DELETE FROM processed_events WHERE execution_id = ?"),
        delete_search=r("DELETE FROM search WHERE execution_id = ?"),
        upsert_search=r(
            "INSERT INTO search (execution_id, name, text_value, num_value) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (execution_id, name) DO UPDATE SET text_value = excluded.text_value, "
            "num_value = excluded.num_value "
            "WHERE search.text_value <> excluded.text_value OR search.num_value <> excluded.num_value"
        ),
    )


def search_writes(dialect: Dialect, upsert: str, exe: Execution) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The statements (SQL, parameter rows) that bring the ``search`` index of ``exe`` up to its values, in
    its commit's transaction: none for an execution without search fields (``exe.search`` empty); else
    one ``DELETE`` of its entries that are no longer among them (a value gone, or of another type) and
    the upserts of the others, which write only a value that changed — so a commit that changes no
    search value costs reads of the execution's few index rows, not writes."""
    if not exe.search:
        return []
    entries = index_entries(exe.search)
    keys = [key for key, _, _ in entries]
    stale = "DELETE FROM search WHERE execution_id = ?"
    if keys:
        stale += f" AND name NOT IN ({', '.join('?' for _ in keys)})"
    out: list[tuple[str, list[tuple[Any, ...]]]] = [(dialect.render(stale), [(exe.id, *keys)])]
    if entries:
        out.append((upsert, [(exe.id, key, text, num) for key, text, num in entries]))
    return out


def execution_row(exe: Execution, data: str, rids: str | None = None, tnext: int | None = None,
                  tsteps: str | None = None) -> tuple[Any, ...]:
    """Parameters of ``insert_execution`` for ``exe`` already serialised to ``data`` (``rids``: its recent
    dedupe ids, :func:`next_recent`; ``tnext``/``tsteps``: its trace tail, :func:`tail_start`)."""
    return (
        exe.id,
        exe.definition_id,
        exe.version,
        exe.status,
        exe.parent_id,
        exe.active_path,
        exe.outcome,
        data,
        ended_index_value(exe),
        exe.expires_at,
        rids,
        tnext,
        tsteps,
    )


def purge_query(
    dialect: Dialect, ended_before: float, statuses: Sequence[str], definition_id: str | None, limit: int
) -> tuple[str, list[Any]]:
    """The SELECT of a purge batch: ``id, version, data`` of up to ``limit + 1`` ended executions, oldest
    first (one more than the batch, to tell whether there is more). It walks the partial
    ``executions_ended`` index in end-time order, which holds only ended executions (not tombstones, not
    running ones), and stops at the limit: with the default statuses it reads what it purges; a status or
    definition filter also reads past the ended executions it leaves out."""
    where = f"status IN ({', '.join('?' for _ in statuses)}) AND ended_at < ?"
    params: list[Any] = [*statuses, ended_before]
    if definition_id is not None:
        where += " AND definition_id = ?"
        params.append(definition_id)
    params.append(limit + 1)
    # SQLite's planner, without statistics, prefers the (status, id) index for ``status IN`` and then sorts
    # every ended execution: name the index (an error, not a silent scan, if it ever cannot serve).
    hint = " INDEXED BY executions_ended" if dialect.name == "sqlite" else ""
    sql = f"SELECT id, version, data FROM executions{hint} WHERE {where} ORDER BY ended_at LIMIT ?"
    return dialect.render(sql), params


RECENT_EVENTS = 16
"""How many applied event ids an execution row keeps in ``rids`` before they spill to ``processed_events``
(:func:`next_recent`): the SQL stores' default — on SQLite it saves a WAL page per event, on PostgreSQL a
statement and an index entry (see ``PG_RECENT_EVENTS``); 0 writes every mark to ``processed_events`` in its
commit."""

RIDS_SEPARATOR = "\n"
"""Between the ids in ``rids``: a control character, which :func:`~durastate.engine.values.check_event_id`
never lets into an id, so splitting on it gives back exactly the ids."""


def due_timers_floor(since: float | None) -> float:
    """The lower bound of ``due_timers``' range: ``since``, or none at all (every overdue timer)."""
    return float("-inf") if since is None else float(since)


def recent_ids(rids: str | None) -> list[str]:
    """The ids a ``rids`` value holds, newest first (``NULL``, a row from before the column: none)."""
    return rids.split(RIDS_SEPARATOR) if rids else []


def next_recent(rids: str | None, event_id: str | None, keep: int = RECENT_EVENTS) -> tuple[str | None, list[str]]:
    """(the ``rids`` to store with the commit that applies ``event_id``, the ids to insert into
    ``processed_events`` in the same transaction).

    Layout: ``rids`` holds up to ``keep`` applied event ids, newest first, joined by
    :data:`RIDS_SEPARATOR`. A commit that applies an event puts its id in front; a commit that finds
    ``rids`` full first moves every id it holds to ``processed_events`` — one multi-row insert every
    ``keep`` events, in the commit's transaction — and starts ``rids`` again with the new id alone.
    ``keep=0``: the id goes straight to ``processed_events`` (one row per event, the layout before).
    Newest first because PostgreSQL logs an updated row without the tail it shares with the old one:
    prepending costs the WAL the new id only, where appending would log the whole list each time.

    Why every applied id is always in ``rids`` or in ``processed_events`` (what the dedupe check, which
    reads both, relies on): an id enters ``rids`` in the very commit that applies it; it leaves only in
    a commit that inserts it into ``processed_events`` in the same transaction; and the ``rids`` a commit
    writes is computed from the ``rids`` of the version it replaces — the version compare-and-swap
    guarantees the stored row is that version (SQLite reads it under the write lock; PostgreSQL's
    ``durastate_commit_cas`` reads it and updates ``WHERE version = old``, so a row changed in between
    makes the commit write nothing). Commits without an event (``save``, a control write) carry ``rids``
    over. A purge's tombstone keeps ``rids``; deleting an expired tombstone deletes both.
    """
    ids = recent_ids(rids)
    if event_id is None or event_id in ids:
        return rids, []
    if keep <= 0:
        return rids, [event_id]
    if len(ids) >= keep:
        return event_id, ids
    return RIDS_SEPARATOR.join([event_id, *ids]), []


def applied(event_id: str, rids: str | None, marked: Any) -> bool:
    """Whether ``event_id`` was applied, from a row's ``rids`` and its ``processed_events`` mark."""
    return bool(marked) or event_id in recent_ids(rids)


def summary_from_row(row: Sequence[Any]) -> ExecutionSummary:
    """A listing row (``_SUMMARY_COLUMNS`` order) as an :class:`ExecutionSummary`."""
    return ExecutionSummary(row[0], row[1], int(row[2]), row[3], row[4], row[5], row[6],
                            _float_or_none(row[7]), _float_or_none(row[8]))


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


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


TAIL_STEPS = 16
"""The most trace steps an execution row holds (``tsteps``) before they move to the ``trace`` table."""
TAIL_CHARS = 3000
"""... and the most characters: the tail stops growing before the row outgrows a 4 KB page (SQLite then
writes overflow pages with every commit); a step that would pass it moves the tail out first."""


def tail_start(idx: int, entry_json: str) -> str:
    """A trace tail (``executions.tsteps``) holding one step, ``idx``.

    Layout: the first step's index, then each step's JSON, oldest first, one per line (compact JSON never
    holds a raw newline, :func:`json_text`); the steps' indexes follow from the first. A commit appends a step
    with ``tsteps || char(10) || ?`` and sets ``tnext`` (the next step's index) — the row the commit writes
    anyway, so a traced step costs no row, index entry or page of its own. When the tail is full
    (:data:`TAIL_STEPS`, :data:`TAIL_CHARS`) the commit moves its steps to the ``trace`` table in one
    multi-row insert, trims the ring there, and starts the tail again with the new step. A read takes the
    table's rows and the tail (:func:`tail_rows`) in one statement.
    """
    return f"{idx}\n{entry_json}"


def tail_rows(tsteps: str | None) -> list[tuple[int, str]]:
    """The ``(idx, entry_json)`` steps of a trace tail (``NULL``: none), oldest first."""
    if not tsteps:
        return []
    first, *entries = tsteps.split("\n")
    start = int(first)
    return [(start + i, entry) for i, entry in enumerate(entries)]


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


def cursor_after(cursor: str | None) -> str | list[Any] | None:
    """Where a cursor points after: an id, or ``[number, id]`` for a listing driven by a number range
    (``InvalidCursor`` for anything this family did not hand out; :func:`list_query` checks which fits)."""
    if cursor is None:
        return None
    value = decode_cursor(cursor)
    if isinstance(value, str):
        return value
    if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], int | float)
            and not isinstance(value[0], bool) and isinstance(value[1], str)):
        return value
    raise InvalidCursor(cursor)


def next_cursor(items: list[ExecutionSummary], rows: Sequence[Sequence[Any]], limit: int) -> str | None:
    """``list_query`` fetches ``limit + 1`` rows: a cursor exists only when the extra one came back. A
    range listing's rows end with the number they were read at: its cursor is ``[number, id]``."""
    if len(rows) <= limit or not items:
        return None
    last = rows[limit - 1]
    return encode_cursor([float(last[_SUMMARY_WIDTH]), items[-1].id] if len(last) > _SUMMARY_WIDTH
                         else items[-1].id)


def list_query(
    dialect: Dialect,
    definition_id: str | None,
    statuses: frozenset[str] | None,
    roots_only: bool,
    after_id: str | list[Any] | None,
    limit: int,
    parent_id: str | None = None,
    updated_after: float | None = None,
    updated_before: float | None = None,
    where: Sequence[Condition] = (),
) -> tuple[str, list[Any]] | None:
    """The listing SELECT and its parameters, or ``None`` when nothing can match (an empty status list).

    ``where`` (checked conditions on search values): the first equality drives the query from the
    ``search_text`` / ``search_number`` index, in id order, so a page reads what it returns however many
    executions there are; every other condition is an ``EXISTS`` on the execution's own index rows (its
    primary key). Without an equality, a number range (``total>100``, ``total>=10`` with ``total<20``: every
    ordered condition on the first ordered field is a bound) drives a range scan of ``search_number`` in
    (value, id) order, its cursor ``[value, id]``; only ``!=`` conditions read the executions in id order.

    Keyset paging: ``id > after_id ORDER BY id LIMIT limit + 1`` — stable under concurrent inserts and
    served by the primary key (or the ``(status, id)`` / ``(definition_id, id)`` indexes when filtered).
    System records are left out unless ``definition_id`` names their kind (:func:`~durastate.store.base.
    hides_system`); the time filters read ``updated_at`` from ``data`` (see :attr:`Dialect.data_number`).
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    clauses: list[str] = []
    params: list[Any] = []
    if definition_id is not None:
        clauses.append("definition_id = ?")
        params.append(definition_id)
    if statuses is not None:
        if not statuses:
            return None
        ordered = sorted(statuses)
        clauses.append(f"status IN ({', '.join('?' for _ in ordered)})")
        params.extend(ordered)
    if hides_system(definition_id):
        clauses.append("definition_id NOT LIKE ?")
        params.append(SYSTEM_PREFIX + "%")
    if parent_id is not None:
        clauses.append("parent_id = ?")
        params.append(parent_id)
    if updated_after is not None:
        clauses.append(f"{dialect.data_field('updated_at')} >= ?")
        params.append(updated_after)
    if updated_before is not None:
        clauses.append(f"{dialect.data_field('updated_at')} < ?")
        params.append(updated_before)
    if roots_only:
        clauses.append("parent_id IS NULL")
    plan = index_plan(where)
    ranged = plan is not None and plan.ranged
    if after_id is not None and isinstance(after_id, str) == ranged:
        raise InvalidCursor(encode_cursor(after_id))
    key = "id"
    table = "executions"
    columns = summary_columns(dialect)
    if plan is not None:
        table = "search s JOIN executions ON id = s.execution_id"
        key = "s.execution_id"
        if ranged:
            # A range scan of search_number (name, num_value, execution_id): read in value then id order.
            bounds = ["s.name = ?"]
            bound_params: list[Any] = [plan.key]
            if plan.low is not None:
                bounds.append(f"s.num_value {'>=' if plan.low_inclusive else '>'} ?")
                bound_params.append(plan.low)
            if plan.high is not None:
                bounds.append(f"s.num_value {'<=' if plan.high_inclusive else '<'} ?")
                bound_params.append(plan.high)
            clauses[:0] = bounds
            params[:0] = bound_params
            columns += ", s.num_value"
        else:
            column = "text_value" if isinstance(plan.equal, str) else "num_value"
            clauses.insert(0, f"s.name = ? AND s.{column} = ?")
            params[:0] = [plan.key, plan.equal]
    for c in where:
        name, column, value = _index_term(c)
        if plan is not None and name == plan.key and (
                c.op in _ORDERED_SQL if ranged else c.op == "=" and value == plan.equal):
            continue  # the driving equality, or a bound of the driving range: the scan applies it
        clauses.append(f"EXISTS (SELECT 1 FROM search x WHERE x.execution_id = id AND x.name = ? "
                       f"AND x.{column} {_SQL_OPS[c.op]} ?)")
        params += [name, value]
    order = f"ORDER BY {key}"
    if after_id is not None:
        if ranged:
            assert isinstance(after_id, list)
            # A row value: the index range starts at the cursor (an OR would scan from the low bound).
            clauses.append("(s.num_value, s.execution_id) > (?, ?)")
            params += [float(after_id[0]), after_id[1]]
        else:
            clauses.append(f"{key} > ?")
            params.append(after_id)
    if ranged:
        order = "ORDER BY s.num_value, s.execution_id"
    sql = f"SELECT {columns} FROM {table}"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += f" {order} LIMIT ?"
    params.append(limit + 1)
    return dialect.render(sql), params


_ORDERED_SQL = frozenset((">", ">=", "<", "<="))
_SQL_OPS = {"=": "=", "!=": "<>", ">": ">", ">=": ">=", "<": "<", "<=": "<="}


def _index_term(c: Condition) -> tuple[str, str, Any]:
    """(index key, column, value) a condition compares (:func:`~durastate.engine.search.index_entry`)."""
    key, text, num = index_entry(c.name, c.value)
    return (key, "text_value", text) if text is not None else (key, "num_value", num)
