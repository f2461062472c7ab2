"""The PostgreSQL connection plumbing a store shares with its queue: DSNs, schemas, connect-with-retry,
and :class:`PgLink`, one connection used under a lock and reconnected when it drops.

``PostgresStore`` and ``PostgresTransport`` both build on it, so the transport never imports the store.
psycopg is an optional extra: it is imported only where a connection is made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from durastate.errors import StoreUnavailable

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEFAULT_SCHEMA",
    "NUL_SUBSTITUTE",
    "PgLink",
    "conn_lost",
    "connect_with_retry",
    "describe_dsn",
    "is_autocommit",
    "nul_safe",
    "quote_ident",
    "split_schema",
    "unreachable_message",
]

DEFAULT_SCHEMA = "public"


# -- naming ---------------------------------------------------------------------------------------------
def quote_ident(name: str) -> str:
    """A safely double-quoted SQL identifier (schema names come from users and DSNs)."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid PostgreSQL schema name {name!r}")
    return '"' + name.replace('"', '""') + '"'


def split_schema(dsn: str, schema: str | None = None) -> tuple[str, str]:
    """Take durastate's own ``schema`` query option out of a URL DSN (libpq rejects unknown options).

    An explicit ``schema`` argument wins over the DSN's; the default is ``public``. The other options are
    left exactly as written: decoding and re-encoding them would turn ``options=-c%20…`` into
    ``-c+…``, and libpq does not read ``+`` as a space.
    """
    found: str | None = None
    if "://" in dsn:
        parts = urlsplit(dsn)
        kept: list[str] = []
        for option in filter(None, parts.query.split("&")):
            key, _, value = option.partition("=")
            if unquote(key) != "schema":
                kept.append(option)
            elif found is None:
                found = unquote_plus(value)
        dsn = urlunsplit(parts._replace(query="&".join(kept)))
    return dsn, schema or found or DEFAULT_SCHEMA


def describe_dsn(dsn: str) -> str:
    """``user@host:port/dbname`` for error messages — never the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(dsn)
    except Exception:
        return "the given DSN"
    host = info.get("host") or "localhost (unix socket)"
    user = info.get("user") or "(default user)"
    return f"{user}@{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


NUL_SUBSTITUTE = "\x1a"
"""What a NUL in a text parameter is sent as (ASCII SUB, "substitute")."""

_NUL_SAFE: list[type[Any]] = []
_Conn = TypeVar("_Conn")


def nul_safe(conn: _Conn) -> _Conn:
    """Make ``conn`` (a psycopg connection, sync or async) send a text parameter holding NUL with each NUL
    replaced by :data:`NUL_SUBSTITUTE`, instead of raising ``psycopg.DataError``; returns ``conn``.

    PostgreSQL's TEXT cannot hold NUL, and psycopg refuses such a parameter outright, so every entry point
    given an id with a NUL (``load``, a dead letter's ``get``/``drop``/``replay``, ``pending``…) failed with an
    untyped error where the other stores answer "no such id". No id durastate stores can hold a NUL or the
    substitute (both are control characters, refused by :func:`durastate.engine.values.id_problem`), so a
    lookup by such an id now finds nothing — the same answer as SQLite's and the in-memory store's, and
    each entry point's own typed error (``UnknownDeadLetter``, ``None``) follows — with one fix here for
    the whole class rather than a check in each method.
    """
    if not _NUL_SAFE:
        from psycopg.types import string

        for base in (string.StrBinaryDumperName, string.StrBinaryDumperVarchar, string.StrBinaryDumper,
                     string.StrDumperName, string.StrDumperVarchar, string.StrDumper, string.StrDumperUnknown):
            _NUL_SAFE.append(type(f"NulSafe{base.__name__}", (base,), {"dump": _dump_nul_safe}))
    adapters = conn.adapters  # type: ignore[attr-defined]
    for dumper in _NUL_SAFE:  # in psycopg's own order: the last one registered is the default
        adapters.register_dumper(str, dumper)
    return conn


def _dump_nul_safe(self: Any, obj: str) -> Any:
    if "\x00" in obj:
        obj = obj.replace("\x00", NUL_SUBSTITUTE)
    return super(type(self), self).dump(obj)


def connect_with_retry(
    dsn: str,
    *,
    attempts: int = 15,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    **kwargs: Any,
) -> psycopg.Connection[Any]:
    """``psycopg.connect`` retried ``attempts`` times, ``interval`` seconds apart.

    A worker container often starts before the database accepts connections; waiting a little beats
    crashing on startup. After the last attempt: :class:`StoreUnavailable` saying what to check.
    """
    import psycopg

    last: Exception | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            sleep(interval)
        try:
            return nul_safe(psycopg.connect(dsn, **kwargs))
        except psycopg.OperationalError as exc:
            last = exc
    raise StoreUnavailable(unreachable_message(dsn, attempts, interval, last)) from last


def unreachable_message(dsn: str, attempts: int, interval: float, last: Exception | None) -> str:
    detail = str(last).strip().splitlines()[0] if last and str(last).strip() else repr(last)
    return (
        f"cannot connect to PostgreSQL at {describe_dsn(dsn)} after {max(1, attempts)} attempt(s) "
        f"{interval:g}s apart: {detail}. Check that the server is running and reachable, and the DSN's "
        "host, port, user, password and database (and pg_hba.conf)"
    )


def is_autocommit(conn: Any) -> bool:
    return bool(getattr(conn, "autocommit", False))


def conn_lost(conn: Any) -> bool:
    return bool(getattr(conn, "closed", False) or getattr(conn, "broken", False))


# -- one connection, shared by the store and the transport ----------------------------------------------
class PgLink:
    """One connection used under a lock, reconnected if it dropped (when it was made from a DSN).

    The lock serialises this object's use of its connection, so a runtime that shares a store between
    threads cannot interleave two transactions on it. A connection that broke mid-operation surfaces as
    :class:`StoreUnavailable`; the next operation reconnects if ``_connect`` is set.
    """

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self._connect: Callable[[], Any] | None = None

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        """One operation: the store's lock, a live connection, a cursor; a dropped link is typed."""
        with self._lock:
            if self._connect is not None and conn_lost(self._conn):
                self._conn = self._connect()
            try:
                with self._conn.cursor() as cur:
                    yield cur
            except Exception as exc:
                if conn_lost(self._conn):
                    raise StoreUnavailable(
                        f"lost the connection to PostgreSQL ({exc}); the next call reconnects"
                        if self._connect
                        else f"the PostgreSQL connection is closed or broken ({exc})"
                    ) from exc
                self._rollback()
                raise

    def _rollback(self) -> None:
        with suppress(Exception):  # the connection may be gone; the transaction is then gone with it
            self._conn.rollback()

    def close(self) -> None:
        """Close the connection (an injected one too); a closed link does not reconnect."""
        with self._lock:
            self._connect = None
            self._conn.close()
