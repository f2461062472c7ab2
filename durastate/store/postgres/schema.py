"""The PostgreSQL store's SQL, for one schema: :class:`PgSql`. Text only — no connection, no driver.

The tables and most statements are the SQL family's (:mod:`durastate.store.sql`: the same schema
description and statement text as the SQLite store), rendered for PostgreSQL and qualified with the
schema; what only PostgreSQL has is added here:

* ``durastate_commit_cas(…)``, the fast path's server-side function: the CAS (insert-or-conflict), the
  dedupe mark and the trace step in one statement. It returns false on a lost CAS and never raises, so
  the transaction it runs in stays clean.
* ``durastate_conflict()``, which raises SQLSTATE :data:`CONFLICT_SQLSTATE`: the multi-statement path's
  CAS calls it when it matches no row, which is what lets that path be sent as one pipeline (see
  :mod:`durastate.store.postgres.core`).
* the trace step as one statement (insert and ring trim), the post-conflict probe, the advisory lock key.
"""

from __future__ import annotations

import re
from dataclasses import fields, replace
from typing import Any

from durastate.db.postgres import quote_ident
from durastate.store.sql import (
    POSTGRES,
    TABLES,
    TRIM_EVERY,
    Statements,
    create_statements,
    list_query,
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
BEGIN
  IF p_check AND p_event <> '' AND EXISTS (
       SELECT 1 FROM {s}.processed_events WHERE execution_id = p_id AND event_id = p_event) THEN
    RETURN false;  -- check_event: the event was applied before; write nothing
  END IF;
  IF p_old = 0 THEN
    INSERT INTO {s}.executions (id, definition_id, version, status, parent_id, active_path, outcome, data)
    VALUES (p_id, p_definition_id, 1, p_status, p_parent_id, p_active_path, p_outcome, p_data)
    ON CONFLICT (id) DO NOTHING;
  ELSE
    UPDATE {s}.executions
       SET data = p_data, version = p_old + 1, status = p_status, active_path = p_active_path,
           outcome = p_outcome
     WHERE id = p_id AND version = p_old;
  END IF;
  IF NOT FOUND THEN
    RETURN false;  -- a lost CAS: nothing written, the transaction stays clean (no RAISE)
  END IF;
  IF p_event <> '' THEN
    INSERT INTO {s}.processed_events (execution_id, event_id) VALUES (p_id, p_event)
    ON CONFLICT DO NOTHING;
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
                # The first statement drops the signature before p_check (one function, no overloads).
                f"DROP FUNCTION IF EXISTS {s}.durastate_commit_cas(text, text, text, bigint, text, text, text, "
                "text, text, text, bigint); "
                f"CREATE OR REPLACE FUNCTION {s}.durastate_commit_cas(p_id text, p_definition_id text, "
                "p_data text, p_old bigint, p_event text, p_status text, p_outcome text, "
                "p_active_path text, p_parent_id text, p_trace text, p_trace_max bigint, p_check boolean) "
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
            "%s::text, %s::text, %s::text, %s::text, %s::bigint, %s::boolean)"
        )
        # The multi-statement path's CAS: the family's insert / guarded update, made to abort the
        # transaction when it matches no row, so that BEGIN, the CAS, the side effects and COMMIT can
        # go out as one pipeline — a lost CAS turns the COMMIT into a rollback of all of it.
        guard = (
            " RETURNING 1) SELECT CASE WHEN EXISTS (SELECT 1 FROM cas) THEN true "
            f"ELSE {s}.durastate_conflict() END"
        )
        self.insert_execution = "WITH cas AS (" + self.stmt.insert_execution + guard
        self.update_execution = "WITH cas AS (" + self.stmt.update_execution + guard
        # check_event's dedupe mark: the same guard, so an event marked before aborts the transaction.
        self.insert_processed_checked = "WITH cas AS (" + self.stmt.insert_processed + guard
        # After a failed commit (the rare path): the winning version and whether the event was marked.
        self.conflict_state = (
            f"SELECT (SELECT version FROM {s}.executions WHERE id = %s), "
            f"EXISTS (SELECT 1 FROM {s}.processed_events WHERE execution_id = %s AND event_id = %s)"
        )
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

    def qualify(self, sql: str) -> str:
        """Prefix every table reference of a family statement with this schema."""
        return _TABLE_REF.sub(lambda m: f"{m.group(1)} {self.s}.{m.group(2)}", sql)

    def ddl(self) -> list[str]:
        tables = [replace(t, name=f"{self.s}.{t.name}") for t in TABLES]
        return [f"CREATE SCHEMA IF NOT EXISTS {self.s}", *create_statements(POSTGRES, tables)]

    def list_executions(
        self,
        definition_id: str | None,
        statuses: frozenset[str] | None,
        roots_only: bool,
        after: str | None,
        limit: int,
    ) -> tuple[str, list[Any]] | None:
        """The family's keyset listing (summary columns only, never ``data``), qualified."""
        query = list_query(POSTGRES, definition_id, statuses, roots_only, after, limit)
        return None if query is None else (self.qualify(query[0]), query[1])
