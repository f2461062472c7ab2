"""A schema made before the context had its column (``executions.context``): its rows hold the whole
execution in ``data``; they read as they are, and their next commit moves the context to its column —
also one that says the context is unchanged (the store sends a context it did not see apart, and the commit
function refuses to write ``data`` without one over a row that holds it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from durastate.engine.model import Execution
from durastate.store import sql as family
from durastate.store.postgres.sync import PostgresStore

LARGE = {f"k{i:04d}": {"note": "x" * 40, "n": i, "nul": "a\x00b", "f": 1.0} for i in range(300)}
OLD_SIGNATURE = ("text, text, text, bigint, text, text, text, text, text, text, bigint, boolean, integer, boolean, "
                 "double precision, double precision")


def old_schema(admin: Any, schema: str) -> None:
    """The tables as they were before the context column, the commit function's signature then (a stub
    body: the store replaces it), and one execution written then, whole in ``data``."""
    s = f'"{schema}"'
    tables = [replace(t, name=f"{s}.{t.name}", columns=tuple(c for c in t.columns if c.name != "context"))
              for t in family.TABLES]
    admin.execute(f"CREATE SCHEMA {s}")
    for stmt in family.create_statements(family.POSTGRES, tables):
        admin.execute(stmt)
    params = ", ".join(f"p{i} {t}" for i, t in enumerate(OLD_SIGNATURE.split(", ")))
    admin.execute(f"CREATE FUNCTION {s}.durastate_commit_cas({params}) RETURNS boolean LANGUAGE sql AS 'SELECT false'")
    exe = Execution(id="old", definition_id="order", active_path="a", context=LARGE, version=2)
    admin.execute(f"INSERT INTO {s}.executions (id, definition_id, version, status, data) VALUES (%s, %s, %s, %s, %s)",
                  (exe.id, exe.definition_id, 2, "running", exe.model_dump_json()))


def test_an_old_row_reads_whole_and_its_next_commit_moves_the_context_to_its_column(
    dsn: str, schema: str, admin: Any
) -> None:
    old_schema(admin, schema)
    store = PostgresStore.from_dsn(dsn)
    try:
        functions = admin.execute(
            "SELECT pg_get_function_identity_arguments(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = "
            "p.pronamespace WHERE n.nspname = %s AND p.proname = 'durastate_commit_cas'", (schema,)).fetchall()
        assert len(functions) == 1 and "p_context text" in functions[0][0]  # the old signature dropped
        blind = Execution(id="old", definition_id="order", version=2)
        assert not admin.execute(store._sql.fast_commit, store._cas_params(
            blind, 2, (blind.model_dump_json(exclude={"context"}), None), None, None, False, False)).fetchone()[0]
        exe, seen = store.load_for_event("old", "e1")
        assert exe is not None and exe.context == LARGE and not seen
        assert isinstance(exe.context["k0001"]["f"], float)
        exe.active_path = "b"
        store.commit(exe, [], processed_event_id="e1", context_unchanged=True)
        data, context = admin.execute(f'SELECT data, context FROM "{schema}".executions WHERE id = %s',
                                      ("old",)).fetchone()
        assert '"context"' not in data and context is not None
        moved = family.load_execution(data, context)
        assert moved.context == LARGE and moved.active_path == "b" and moved.version == 3
        assert isinstance(moved.context["k0001"]["f"], float)  # the text as the old data wrote it
        exe.active_path = "c"
        store.commit(exe, [], processed_event_id="e2", context_unchanged=True)  # now left where it is
        assert admin.execute(f'SELECT context FROM "{schema}".executions WHERE id = %s',
                             ("old",)).fetchone()[0] == context
        again = store.load("old")
        assert again is not None and again.context == LARGE and again.active_path == "c" and again.version == 4
    finally:
        store.close()
