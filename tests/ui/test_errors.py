"""Bad input meets a clear answer: unknown ids and pages are 404 pages, bad filters 400, a store URL with a
typo or a store that does not answer stops ``durastate ui`` before it serves (creating nothing), and a
store that goes away while serving gives a 503 page naming the error."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import EXAMPLES, Served, cli_env, durastate, fill, screenshot

pytestmark = pytest.mark.slow

SERVER = "postgresql://postgres@127.0.0.1:5432/test"


def one_error_line(done: Any, *fragments: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def test_unknown_ids_and_pages_are_404_pages(sqlite_url: str, serve_console: Callable[..., Served],
                                             page: Any) -> None:
    fill(sqlite_url, [("o1", "durastate.start", {"definition_id": "order", "context": {}})])
    served = serve_console(sqlite_url)
    for path, says in (("/executions/nope", "no execution 'nope'"),
                       ("/executions/nope/trace", "no execution 'nope'"),
                       ("/definitions/nope", "nope"),
                       ("/no/such/page", "there is no page at /no/such/page")):
        answer = page.goto(served.url + path)
        assert answer is not None and answer.status == 404, path
        expect(page.locator("#error-message")).to_contain_text(says)
    screenshot(page, "not-found")
    assert page.request.get(served.url + "/api/executions/nope/version").json()["error"].startswith("no execution")


def test_bad_filters_are_400_pages(sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, [("o1", "durastate.start", {"definition_id": "order", "context": {}})])
    served = serve_console(sqlite_url)
    for query, says in (("status=bogus", "unknown status 'bogus'"), ("limit=lots", "not a whole number"),
                        ("since=soon", "soon"), ("cursor=%25%25garbage", "cursor")):
        answer = page.goto(f"{served.url}/?{query}")
        assert answer is not None and answer.status == 400, query
        expect(page.locator("#error-message")).to_contain_text(says)


def test_a_sqlite_url_with_a_typo_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "ordres.db"
    done = durastate("ui", "--store", f"sqlite:///{typo}", "--port", "0")
    one_error_line(done, "no store at", "ordres.db")
    assert not typo.exists()


def test_a_busy_port_is_one_line(sqlite_url: str, serve_console: Callable[..., Served]) -> None:
    fill(sqlite_url, [("o1", "durastate.start", {"definition_id": "order", "context": {}})])
    served = serve_console(sqlite_url)
    port = served.url.rsplit(":", 1)[1]
    one_error_line(durastate("ui", "--store", sqlite_url, "--port", port), "cannot listen on", "--port")


@pytest.fixture
def pg_url() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    schema = f"ui_{uuid.uuid4().hex[:10]}"
    try:
        psycopg.connect(SERVER, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {SERVER}: {exc}")
    yield f"{SERVER}?schema={schema}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def schema_exists(name: str) -> bool:
    import psycopg

    with psycopg.connect(SERVER, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (name,)).fetchone()
    return row is not None


def test_a_postgres_schema_with_a_typo_is_refused_and_not_created(pg_url: str) -> None:
    typo = f"typo_{uuid.uuid4().hex[:8]}"
    one_error_line(durastate("ui", "--store", f"{SERVER}?schema={typo}", "--port", "0"), "no store at", typo)
    assert not schema_exists(typo)


def test_an_unreachable_store_is_refused_before_serving() -> None:
    done = durastate("ui", "--store", "postgresql://postgres@127.0.0.1:9/test", "--port", "0")
    one_error_line(done, "cannot open store", "127.0.0.1:9")


def test_postgres_store_pages_and_a_store_that_goes_away(pg_url: str, serve_console: Callable[..., Served],
                                                         page: Any) -> None:
    import psycopg

    fill(pg_url, [("pg1", "durastate.start", {"definition_id": "order", "context": {}}),
                  ("pg1", "add_item", {"price": 3}), ("pg1", "submit", {})])
    served = serve_console(pg_url)
    page.goto(served.url + "/")
    expect(page.locator('#executions tr[data-id="pg1"]')).to_be_visible()
    page.goto(served.url + "/executions/pg1")
    expect(page.locator("#active-path")).to_have_text("processing.payment")
    expect(page.locator("#children tbody tr")).to_have_count(1)

    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    answer = page.goto(served.url + "/executions/pg1")
    assert answer is not None and answer.status == 503
    expect(page.locator("#error-message")).to_contain_text("did not answer")


def test_a_postgres_store_url_keeping_histories_is_served(pg_url: str, serve_console: Callable[..., Served],
                                                          page: Any) -> None:
    """``?history=1`` is the store's option (docs/cli.md): the console's check of the schema must not hand it
    to libpq, which refuses a parameter it does not know."""
    fill(pg_url, [("pg1", "durastate.start", {"definition_id": "order", "context": {}})])
    served = serve_console(f"{pg_url}&history=1")
    page.goto(served.url + "/")
    expect(page.locator('#executions tr[data-id="pg1"]')).to_be_visible()


def test_without_the_ui_extra_it_says_which_to_install(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, [("o1", "durastate.start", {"definition_id": "order", "context": {}})])
    blocker = tmp_path / "block" / "starlette"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no starlette here', name='starlette')\n")
    done = durastate("ui", "--store", sqlite_url, "--definitions", str(EXAMPLES),
                     env=cli_env(PYTHONPATH=str(blocker.parent)))
    one_error_line(done, "pip install 'durastate[ui]'")
