"""``open_store(url)``: one URL picks and configures a backend.

memory://                                   DictStore
sqlite:///relative/path.db, sqlite:////abs  SqliteStore
postgresql://user@host:5432/db              PostgresStore (psycopg extra)
dynamodb://PREFIX?endpoint_url=…&region=…   DynamoDBStore (boto3 extra)
    &context_bucket=NAME&claim_check_bytes=N    executions over N bytes (default 200000) kept in S3

Any of them takes ``?history=1`` (or ``&history=1``): keep every trace step of an execution, not only the
ring's newest (``read_history``, ``durastate history``; see :mod:`durastate.store.base`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

from durastate.errors import DurastateError

if TYPE_CHECKING:
    from durastate.store.base import ExecutionStore

SCHEMES = ("memory", "sqlite", "postgresql", "postgres", "dynamodb")


def open_store(url: str) -> ExecutionStore:
    """Build a store from its URL. Raises ``ValueError`` naming the accepted forms for anything else."""
    url, history = split_history(url)
    store = _open(url)
    store.history = history
    return store


def split_history(url: str) -> tuple[str, bool]:
    """The URL without its ``history`` option, and whether that option asked to keep whole histories."""
    base, sep, query = url.partition("?")  # textually: urlunsplit would rewrite sqlite:/// paths
    pairs = parse_qsl(query, keep_blank_values=True) if sep else []
    wanted = [v.lower() for k, v in pairs if k == "history"]
    if not wanted:
        return url, False
    if wanted[-1] not in ("1", "true", "yes", "0", "false", "no"):
        raise ValueError(f"bad store URL {url!r}: history= takes 1 or 0")
    rest = urlencode([(k, v) for k, v in pairs if k != "history"])
    return (f"{base}?{rest}" if rest else base), wanted[-1] in ("1", "true", "yes")


def _open(url: str) -> ExecutionStore:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        from durastate.store.memory.sync import DictStore

        return DictStore()
    if scheme == "sqlite":
        from durastate.store.sqlite.sync import SqliteStore

        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
        if not path:
            raise ValueError(f"bad store URL {url!r}: use sqlite:///relative.db or sqlite:////abs/path.db")
        return SqliteStore(path)
    if scheme in ("postgresql", "postgres"):
        with _extra("postgres", "psycopg", "psycopg_pool"):
            from durastate.store.postgres.sync import PostgresStore

            return PostgresStore.from_dsn(url)
    if scheme == "dynamodb":
        with _extra("dynamodb", "boto3", "botocore"):
            from durastate.store.dynamodb.sync import DynamoDBStore

            return DynamoDBStore.create(**dynamodb_url(url))
    raise ValueError(
        f"unknown store URL {url!r}: expected one of memory://, sqlite:///path.db, "
        "postgresql://…, dynamodb://PREFIX?endpoint_url=…&region=…"
    )


def dynamodb_url(url: str) -> dict[str, Any]:
    """``DynamoDBStore.create``'s keywords from a ``dynamodb://PREFIX?…`` URL: the prefix, ``endpoint_url``,
    ``region``, and the claim check's ``context_bucket`` and ``claim_check_bytes`` when given."""
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    options: dict[str, Any] = {"prefix": parts.netloc or "durastate", "endpoint_url": query.get("endpoint_url"),
                               "region": query.get("region")}
    if query.get("context_bucket"):
        options["context_bucket"] = query["context_bucket"]
    if query.get("claim_check_bytes"):
        raw = query["claim_check_bytes"]
        if not raw.isdigit():
            raise ValueError(f"bad store URL {url!r}: claim_check_bytes must be a whole number of bytes, got {raw!r}")
        options["claim_check_bytes"] = int(raw)
    return options


@contextlib.contextmanager
def _extra(extra: str, *modules: str) -> Iterator[None]:
    """A backend whose client library is not installed says which extra brings it."""
    try:
        yield
    except ImportError as exc:
        if exc.name not in modules:
            raise
        raise DurastateError(f"this store needs {exc.name}, which is not installed: "
                             f"pip install 'durastate[{extra}]'") from None
