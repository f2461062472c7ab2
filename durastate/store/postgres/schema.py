"""The PostgreSQL store's SQL, for one schema: :class:`PgSql`. Text only — no connection, no driver.

The tables and most statements are the SQL family's (:mod:`durastate.store.sql`: the same schema
description and statement text as the SQLite store), rendered for PostgreSQL and qualified with the
schema; what only PostgreSQL has is added here:

* ``durastate_commit_cas(…)``, the commit's server-side function: the CAS (insert-or-conflict), the
  dedupe mark (in the row's ``rids`` and its spill, or a ``processed_events`` row:
  :func:`~durastate.store.sql.next_recent`), the ``check_event`` check and the trace step in one
  statement. On the fast path it returns false on a lost CAS and never raises, so the transaction it runs
  in stays clean; the multi-statement path calls it with ``p_raise``, so a lost CAS raises instead.
* ``durastate_conflict()``, which raises SQLSTATE :data:`CONFLICT_SQLSTATE`: ``durastate_commit_cas``
  calls it (``p_raise``) when its CAS or check fails, which is what lets the multi-statement path be sent
  as one pipeline (see :mod:`durastate.store.postgres.core`).
* the trace step as one statement (insert and ring trim), the post-conflict probe, the advisory lock key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from durastate.db.postgres import quote_ident
from durastate.engine.model import Execution
from durastate.engine.search import Condition
from durastate.store.sql import (
    POSTGRES,
    TABLES,
    TRIM_EVERY,
    Statements,
    create_statements,
    list_query,
    purge_query,
    search_writes,
    statements,
)

__all__ = ["CONFLICT_SQLSTATE", "PgSql"]

CONFLICT_SQLSTATE = "HR409"
"""The SQLSTATE ``durastate_conflict()`` raises when the multi-statement path's CAS matches no row."""

_TABLE_NAMES = tuple(t.name for t in TABLES)
_TABLE_REF = re.compile(r"\b(FROM|INTO|UPDATE|JOIN)\s+(" + "|".join(_TABLE_NAMES) + r")\b")

_FUNCTION_BODY = """
DECLARE
  v_idx bigint;
  v_version bigint;
  v_rids text;
  v_ids text[];
  v_spill text[];
  v_whole boolean;
BEGIN
  -- The recent dedupe ids (durastate.store.sql.next_recent): newest first, spilled as one batch when full.
  IF p_old <> 0 THEN
    SELECT version, rids, context IS NULL INTO v_version, v_rids, v_whole FROM {s}.executions WHERE id = p_id;
    IF v_version IS DISTINCT FROM p_old THEN
      IF p_raise THEN PERFORM {s}.durastate_conflict(); END IF;
      RETURN false;  -- a lost CAS: nothing written, the transaction stays clean (no RAISE)
    END IF;
  END IF;
  v_ids := COALESCE(string_to_array(v_rids, E'\\n'), '{{}}');
  IF p_event <> '' THEN
    IF p_check AND (p_event = ANY (v_ids) OR EXISTS (
         SELECT 1 FROM {s}.processed_events WHERE execution_id = p_id AND event_id = p_event)) THEN
      IF p_raise THEN PERFORM {s}.durastate_conflict(); END IF;
      RETURN false;  -- check_event: the event was applied before; write nothing
    END IF;
    IF p_keep <= 0 THEN
      v_spill := ARRAY[p_event];
    ELSIF p_event = ANY (v_ids) THEN
      NULL;  -- marked already (a commit without check_event): nothing to add
    ELSIF cardinality(v_ids) >= p_keep THEN
      v_spill := v_ids;
      v_rids := p_event;
    ELSE
      v_rids := array_to_string(p_event || v_ids, E'\\n');
    END IF;
  END IF;
  IF p_old = 0 THEN
    INSERT INTO {s}.executions (id, definition_id, version, status, parent_id, active_path, outcome, data,
                                ended_at, expires_at, rids, context)
    VALUES (p_id, p_definition_id, 1, p_status, p_parent_id, p_active_path, p_outcome, p_data, p_ended,
            p_expires, v_rids, p_context)
    ON CONFLICT (id) DO NOTHING;
  ELSIF p_context IS NOT NULL THEN
    UPDATE {s}.executions
       SET data = p_data, version = p_old + 1, status = p_status, active_path = p_active_path,
           outcome = p_outcome, ended_at = p_ended, expires_at = p_expires, rids = v_rids, context = p_context
     WHERE id = p_id AND version = p_old;
  ELSIF v_whole THEN
    -- No context sent for a row that holds it in its data (the client sends it unless it saw this version's
    -- context apart): never write data without it. A conflict: the client reloads.
    IF p_raise THEN PERFORM {s}.durastate_conflict(); END IF;
    RETURN false;
  ELSE
    -- The context did not change: not named, so its (TOASTed) value stays as it is, not written again.
    UPDATE {s}.executions
       SET data = p_data, version = p_old + 1, status = p_status, active_path = p_active_path,
           outcome = p_outcome, ended_at = p_ended, expires_at = p_expires, rids = v_rids
     WHERE id = p_id AND version = p_old;
  END IF;
  IF NOT FOUND THEN
    IF p_raise THEN PERFORM {s}.durastate_conflict(); END IF;
    RETURN false;  -- a lost CAS: nothing written, the transaction stays clean (no RAISE)
  END IF;
  IF v_spill IS NOT NULL THEN  -- after the CAS won: these ids are applied, their marks always true
    -- NOT EXISTS rather than ON CONFLICT: no speculative insertion, so no confirm record in the WAL per
    -- row. Race-free: the UPDATE above holds the execution's row lock, and only a commit of this
    -- execution (holding it too) writes its marks.
    INSERT INTO {s}.processed_events (execution_id, event_id)
    SELECT p_id, x FROM unnest(v_spill) AS x
     WHERE NOT EXISTS (SELECT 1 FROM {s}.processed_events m WHERE m.execution_id = p_id AND m.event_id = x);
  END IF;
  IF p_trace IS NOT NULL THEN
    INSERT INTO {s}.trace (execution_id, idx, entry)
    SELECT p_id, COALESCE(MAX(t.idx), -1) + 1, p_trace FROM {s}.trace t WHERE t.execution_id = p_id
    RETURNING idx INTO v_idx;
    IF p_trace_max > 0 AND v_idx >= p_trace_max AND v_idx % {trim_every} = 0 THEN  -- see _sql.TRIM_EVERY
      DELETE FROM {s}.trace WHERE execution_id = p_id AND idx <= v_idx - p_trace_max;
    END IF;
  END IF;
  RETURN true;
END
"""


class PgSql:
    """Every statement of the store, qualified with one schema. Shared by the sync and async stores."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.s = s = quote_ident(schema)
        base = statements(POSTGRES)
        self.stmt = Statements(**{f.name: self.qualify(getattr(base, f.name)) for f in fields(Statements)})
        self.lock_key = f"durastate:{schema}"
        self.lock = "SELECT pg_advisory_xact_lock(hashtext(%s))"
        commit_cas = _FUNCTION_BODY.format(s=s, trim_every=TRIM_EVERY)
        conflict = (
            "\nBEGIN\n  RAISE EXCEPTION 'durastate: version conflict' "
            f"USING ERRCODE = '{CONFLICT_SQLSTATE}';\nEND\n"
        )
        # name -> (body, DDL). Bodies are compared with the installed ones to skip a needless
        # CREATE OR REPLACE (it rewrites pg_proc and invalidates other sessions' cached plans).
        self.functions: dict[str, tuple[str, str]] = {
            "durastate_commit_cas": (
                commit_cas,
                # The first statements drop the earlier signatures (one function, no overloads).
                f"DROP FUNCTION IF EXISTS {s}.durastate_commit_cas(text, text, text, bigint, text, text, text, "
                "text, text, text, bigint); "
                f"DROP FUNCTION IF EXISTS {s}.durastate_commit_cas(text, text, text, bigint, text, text, text, "
                "text, text, text, bigint, boolean); "
                f"DROP FUNCTION IF EXISTS {s}.durastate_commit_cas(text, text, text, bigint, text, text, text, "
                "text, text, text, bigint, boolean, integer, boolean); "
                f"DROP FUNCTION IF EXISTS {s}.durastate_commit_cas(text, text, text, bigint, text, text, text, "
                "text, text, text, bigint, boolean, integer, boolean, double precision, double precision); "
                f"CREATE OR REPLACE FUNCTION {s}.durastate_commit_cas(p_id text, p_definition_id text, "
                "p_data text, p_old bigint, p_event text, p_status text, p_outcome text, "
                "p_active_path text, p_parent_id text, p_trace text, p_trace_max bigint, p_check boolean, "
                "p_keep integer, p_raise boolean, p_ended double precision, p_expires double precision, "
                "p_context text) "
                "RETURNS boolean LANGUAGE plpgsql AS $durastate$" + commit_cas + "$durastate$",
            ),
            "durastate_conflict": (
                conflict,
                f"CREATE OR REPLACE FUNCTION {s}.durastate_conflict() RETURNS boolean LANGUAGE plpgsql "
                "VOLATILE AS $durastate$" + conflict + "$durastate$",
            ),
        }
        self.function_source = (
            "SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname IN ('durastate_commit_cas', 'durastate_conflict')"
        )
        self.fast_commit = (
            f"SELECT {s}.durastate_commit_cas(%s::text, %s::text, %s::text, %s::bigint, %s::text, %s::text, "
            "%s::text, %s::text, %s::text, %s::text, %s::bigint, %s::boolean, %s::integer, %s::boolean, "
            "%s::double precision, %s::double precision, %s::text)"
        )
        # After a failed commit (the rare path): the winning version, its rids and whether the event was
        # marked (params: id, id, id, event) — the same statement as a kept copy's check.
        self.conflict_state = self.stmt.version_for_event
        # Trace step in ONE statement (pipeline-friendly: nothing waits for the new index client-side):
        # the INSERT computes idx; the DELETE, on the statement's snapshot, trims at or below
        # new_idx - trace_max. Params: id, entry, id, id, trace_max, trace_max.
        self.write_trace = (
            f"WITH ins AS (INSERT INTO {s}.trace (execution_id, idx, entry) "
            f"SELECT %s, COALESCE(MAX(t.idx), -1) + 1, %s FROM {s}.trace t WHERE t.execution_id = %s "
            "RETURNING idx) "
            f"DELETE FROM {s}.trace WHERE execution_id = %s AND %s::bigint > 0 "
            f"AND (SELECT idx FROM ins) %% {TRIM_EVERY} = 0 AND idx <= (SELECT idx FROM ins) - %s::bigint"
        )

    def search_writes(self, exe: Execution) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The family's index writes of a commit (:func:`~durastate.store.sql.search_writes`), qualified."""
        return [(self.qualify(sql), rows) for sql, rows in search_writes(POSTGRES, self.stmt.upsert_search, exe)]

    def qualify(self, sql: str) -> str:
        """Prefix every table reference of a family statement with this schema."""
        return _TABLE_REF.sub(lambda m: f"{m.group(1)} {self.s}.{m.group(2)}", sql)

    def ddl(self, missing: Sequence[tuple[str, str]] = ()) -> list[str]:
        """The schema's DDL; ``missing``: columns of existing tables to add first (:func:`missing_columns`)."""
        tables = [replace(t, name=f"{self.s}.{t.name}") for t in TABLES]
        return [f"CREATE SCHEMA IF NOT EXISTS {self.s}", *create_statements(POSTGRES, tables, missing)]

    #: (schema) -> (table, column) of this schema's tables that may lack an added column.
    existing_columns = (
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s "
        "AND table_name IN ('executions')"
    )

    @property
    def purge_tombstones(self) -> str:
        """A purge batch's conversions in ONE statement: each (id, old version, tombstone data, expiry) of
        the arrays replaces its execution if the version still matches (a CAS per row), and the trace of
        every row converted goes with it; returns the ids converted."""
        s = self.s
        return (
            "WITH v AS (SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::double precision[]) "
            "AS v(id, old, data, expires_at)), "
            f"t AS (UPDATE {s}.executions e SET data = v.data, version = v.old + 1, status = 'purged', "
            "active_path = NULL, ended_at = NULL, expires_at = v.expires_at, context = NULL "
            "FROM v WHERE e.id = v.id AND e.version = v.old RETURNING e.id), "
            f"d AS (DELETE FROM {s}.trace WHERE execution_id IN (SELECT id FROM t)), "
            f"x AS (DELETE FROM {s}.search WHERE execution_id IN (SELECT id FROM t)) "
            "SELECT id FROM t"
        )

    @property
    def purge_expired(self) -> str:
        """Up to N tombstones whose expiry passed, deleted with their dedupe marks and trace in ONE
        statement (params: now, N, now); returns their ids."""
        s = self.s
        return (
            f"WITH x AS (DELETE FROM {s}.executions WHERE id IN (SELECT id FROM {s}.executions "
            "WHERE expires_at <= %s ORDER BY expires_at LIMIT %s) AND expires_at <= %s RETURNING id), "
            f"m AS (DELETE FROM {s}.processed_events WHERE execution_id IN (SELECT id FROM x)), "
            f"r AS (DELETE FROM {s}.trace WHERE execution_id IN (SELECT id FROM x)), "
            f"i AS (DELETE FROM {s}.search WHERE execution_id IN (SELECT id FROM x)) "
            "SELECT id FROM x"
        )

    def purge_select(
        self, ended_before: float, statuses: tuple[str, ...], definition_id: str | None, limit: int
    ) -> tuple[str, list[Any]]:
        """The family's purge batch SELECT (on the partial ``executions_ended`` index), qualified."""
        query, params = purge_query(POSTGRES, ended_before, statuses, definition_id, limit)
        return self.qualify(query), params

    def list_executions(
        self,
        definition_id: str | None,
        statuses: frozenset[str] | None,
        roots_only: bool,
        after: str | list[Any] | None,
        limit: int,
        parent_id: str | None = None,
        updated_after: float | None = None,
        updated_before: float | None = None,
        where: Sequence[Condition] = (),
    ) -> tuple[str, list[Any]] | None:
        """The family's keyset listing (summary columns and the two times read from ``data``), qualified."""
        query = list_query(POSTGRES, definition_id, statuses, roots_only, after, limit, parent_id, updated_after,
                           updated_before, where)
        return None if query is None else (self.qualify(query[0]), query[1])
