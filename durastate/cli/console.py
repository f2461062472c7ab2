"""``durastate ui``: the web console over a store, on 127.0.0.1, read-only unless ``--allow-control``.

The store is opened the way every reading command opens it — and must already exist: a SQLite file that
is not there, a PostgreSQL schema without durastate's tables or a DynamoDB table prefix without its tables
is an error before anything is served (a typo in a URL must not show an empty store, or create one).
The console itself (:mod:`durastate.ui`) needs the ``ui`` extra and is imported only here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qs, unquote, urlsplit

import typer

from durastate.cli import output
from durastate.cli.common import DefinitionsOption, StoreOption, session
from durastate.cli.delivery import deliver
from durastate.cli.introspect import active_paths
from durastate.cli.session import Session, UsageError, redact
from durastate.engine.model import Event
from durastate.errors import DurastateError, StoreUnavailable

if TYPE_CHECKING:
    from durastate.ui.app import Console

UI_EXTRA = "pip install 'durastate[ui]'"


class NoStoreAt(DurastateError):
    """The store URL names a database or table prefix without durastate's tables (a typo, most often)."""


def register(app: typer.Typer) -> None:
    app.command("ui")(ui)


def ui(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (keep 127.0.0.1 unless the "
                                                     "machine's network is trusted).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535,
                                      help="Port to listen on; 0 picks a free one.")] = 8765,
    allow_control: Annotated[bool, typer.Option(
        "--allow-control", help="Offer send, cancel, redrive and replay (each asks for confirmation). "
                                "Without it the console only reads.")] = False,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Serve the web console: executions, each one's statechart and trace, definitions with live counts."""
    try:
        from durastate.ui import server
    except ImportError as exc:
        raise UsageError(f"the console needs the ui extra ({exc.name} is not installed): {UI_EXTRA}") from None
    sess = session(ctx, store, definitions)
    console = build_console(sess, allow_control)
    try:
        sock = server.bind(host, port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port "
                         "(0 picks a free one)") from None
    mode = "control enabled" if allow_control else "read-only"
    url = server.address(sock)

    def ready() -> None:
        output.say(f"durastate console on {url} ({mode}); Ctrl-C to stop")
        output.console.file.flush()

    server.serve(console, sock, on_ready=ready)


def build_console(sess: Session, allow_control: bool) -> Console:
    """The console over the session's store (which must exist), its inbox and its definitions."""
    from durastate.ui.app import Console

    check_exists(sess)
    store = sess.store
    registry = sess.registry if sess.definitions_dir is not None else None

    def send(target_id: str, event: Event) -> str:
        result = deliver(sess, target_id, event)
        return "queued; `durastate serve` applies it" if result.queued else result.outcome

    return Console(store=store, registry=registry, inbox=sess.inbox, deliver=send if allow_control else None,
                   allow_control=allow_control, store_label=redact(sess.store_url), active_paths=active_paths)


def check_exists(sess: Session) -> None:
    """Refuse a networked store URL whose tables are not there (opening it would create them)."""
    url = sess.store_url
    if sess.scheme == "postgresql":
        _check_postgres(url, sess.connect_retries)
    elif sess.scheme == "dynamodb":
        _check_dynamodb(url)


def _check_postgres(url: str, retries: int) -> None:
    import psycopg

    from durastate.cli.backends import with_connect_timeout

    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    schema = unquote(query.pop("schema", ["public"])[-1]) or "public"
    rest = "&".join(f"{k}={v}" for k, values in query.items() for v in values)
    dsn = with_connect_timeout(parts._replace(query=rest).geturl())
    last: Exception | None = None
    for _ in range(retries):
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".executions',)).fetchone()
            break
        except psycopg.OperationalError as exc:
            last = exc
    else:
        raise StoreUnavailable(f"cannot open store {redact(url)}: {' '.join(str(last).split())}; check --store "
                               "or DURASTATE_STORE")
    if row is None or row[0] is None:
        raise NoStoreAt(f"no store at {redact(url)}: schema {schema!r} has no durastate tables; check the URL "
                        "(`durastate start` or `durastate serve` creates a store)")


def _check_dynamodb(url: str) -> None:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]
    from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    prefix = parts.netloc or "durastate"
    table = f"{prefix}_executions"
    kwargs: dict[str, Any] = {"region_name": query.get("region")}
    if query.get("endpoint_url"):
        kwargs["endpoint_url"] = query["endpoint_url"]
    try:
        client = boto3.session.Session().client("dynamodb", config=Config(
            retries={"max_attempts": 2}, connect_timeout=3, read_timeout=10), **kwargs)
        client.describe_table(TableName=table)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise NoStoreAt(f"no store at {redact(url)}: there is no table {table}; check the table prefix "
                            "(`durastate start` or `durastate serve` creates a store)") from None
        raise
    except BotoCoreError:
        return  # unreachable or no credentials: opening the store says which, as every command does
