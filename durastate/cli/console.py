"""``durastate ui``: the web console over a store, on 127.0.0.1, read-only unless ``--allow-control``.

Beyond loopback (``--host 0.0.0.0``, a LAN address) it asks for a login token: ``DURASTATE_UI_TOKEN``, or
for a read-only console one made and printed at start; control there without ``DURASTATE_UI_TOKEN`` is
refused before anything is served. It answers only to the loopback names, the address it is bound to and
each ``--allowed-host`` (:mod:`durastate.ui.guard` says why).

The store is opened the way every reading command opens it — and must already exist: a SQLite file that
is not there, a PostgreSQL schema without durastate's tables or a DynamoDB table prefix without its tables
is an error before anything is served (a typo in a URL must not show an empty store, or create one).
The console itself (:mod:`durastate.ui`) needs the ``ui`` extra and is imported only here.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qs, unquote, urlsplit

import typer

from durastate.cli import output
from durastate.cli.clock import command_clock
from durastate.cli.common import DefinitionsOption, StoreOption, session
from durastate.cli.delivery import deliver
from durastate.cli.session import Session, UsageError, redact
from durastate.engine.introspect import active_paths
from durastate.engine.model import Event
from durastate.engine.registry import DefinitionRegistry
from durastate.errors import DurastateError, StoreUnavailable
from durastate.runtime.definitions import BrokenFile, load_folder_partly

if TYPE_CHECKING:
    from durastate.ui.app import Console

UI_EXTRA = "pip install 'durastate[ui]'"
TOKEN_ENV = "DURASTATE_UI_TOKEN"
MIN_TOKEN_LENGTH = 16


class NoStoreAt(DurastateError):
    """The store URL names a database or table prefix without durastate's tables (a typo, most often)."""


def register(app: typer.Typer) -> None:
    app.command("ui")(ui)


def ui(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on. Beyond loopback the console asks "
                                                     f"for a login token (${TOKEN_ENV}).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535,
                                      help="Port to listen on; 0 picks a free one.")] = 8765,
    allow_control: Annotated[bool, typer.Option(
        "--allow-control", help="Offer send, cancel, redrive and replay (each asks for confirmation). "
                                "Without it the console only reads.")] = False,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", metavar="NAME",
        help="Also answer requests for this host name (as the browser's address bar has it); repeatable. "
             "By default only localhost, 127.0.0.1, ::1 and the --host address.")] = None,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Serve the web console: executions, each one's statechart and trace, definitions with live counts."""
    try:
        from durastate.ui import guard, server
    except ImportError as exc:
        raise UsageError(f"the console needs the ui extra ({exc.name} is not installed): {UI_EXTRA}") from None
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise UsageError(f"{TOKEN_ENV} is {len(token)} characters: use at least {MIN_TOKEN_LENGTH} random ones "
                         "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    sess = session(ctx, store, definitions)
    console = build_console(sess, allow_control)
    try:
        sock = server.bind(host, port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port "
                         "(0 picks a free one)") from None
    bound = sock.getsockname()[0]
    made = None
    if token is None and not guard.is_loopback(bound):
        if allow_control:
            sock.close()
            raise UsageError(f"--allow-control on {host} (beyond this machine) needs a login token: set "
                             f"{TOKEN_ENV} to a long random secret, or keep --host 127.0.0.1")
        token = made = secrets.token_urlsafe(24)
    console.access = guard.Access.for_address(bound, [host, *(allowed_host or [])], token)
    mode = "control enabled" if allow_control else "read-only"
    url = server.address(sock)

    def ready() -> None:
        output.say(f"durastate console on {url} ({mode}); Ctrl-C to stop")
        if made is not None:
            output.say(f"login token: {made} (set {TOKEN_ENV} to choose it)")
        output.console.file.flush()
        if guard.is_unspecified(bound):
            output.warn("listening on every interface: anyone who reaches this machine gets the login page; "
                        "browsers must use localhost, 127.0.0.1 or an --allowed-host name")

    server.serve(console, sock, on_ready=ready)


def build_console(sess: Session, allow_control: bool) -> Console:
    """The console over the session's store (which must exist), its inbox and its definitions."""
    from durastate.ui.app import Console

    check_exists(sess)
    store = sess.store
    registry: DefinitionRegistry | None = None
    broken: list[BrokenFile] = []
    if sess.definitions_dir is not None:  # a file that does not load is shown as such, not a refusal to start
        registry, broken = load_folder_partly(sess.definitions_dir)

    def send(target_id: str, event: Event) -> str:
        result = deliver(sess, target_id, event)
        return "queued; `durastate serve` applies it" if result.queued else result.outcome

    return Console(store=store, registry=registry, inbox=sess.inbox, deliver=send if allow_control else None,
                   allow_control=allow_control, store_label=redact(sess.store_url), active_paths=active_paths,
                   clock=command_clock(), broken=broken)


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
    from durastate.store.urls import split_history

    parts = urlsplit(split_history(url)[0])  # ``?history=1`` is the store's option, not libpq's
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
