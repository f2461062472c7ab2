"""What one ``durastate`` invocation works with: its settings, store, definitions and inbox.

Everything is opened lazily and at most once, so ``durastate validate`` never touches a store and
``durastate show`` never loads definitions it does not need. Settings resolve in one order everywhere:
the command's own option, then the option given before the command, then the environment, then the
default. Opening a store fails fast (small retry counts): a person at a prompt wants to hear that the
server is not there in a second or two, not after fifteen.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from durastate.errors import DurastateError, StoreUnavailable

if TYPE_CHECKING:
    from durastate.engine import DefinitionRegistry
    from durastate.store import ExecutionStore
    from durastate.transport import QueueTransport

DEFAULT_STORE = "sqlite:///./durastate.db"
STORE_ENV = "DURASTATE_STORE"
DEFINITIONS_ENV = "DURASTATE_DEFINITIONS"
RETRIES_ENV = "DURASTATE_CONNECT_RETRIES"
DEFAULT_CONNECT_RETRIES = 2
DEFAULT_DEFINITION_DIRS = ("definitions", "examples")
"""Searched in the working directory, in this order, when neither --definitions nor the env var is set."""


class UsageError(DurastateError):
    """A bad command-line value (JSON that does not parse, a URL of unknown form): fix the command."""


@dataclass
class Settings:
    """Values given before the command (``durastate --store URL start …``); ``None`` means not given."""

    store: str | None = None
    definitions: str | None = None
    connect_retries: int | None = None


def redact(url: str) -> str:
    """The URL with any password replaced, fit for an error message."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


class Session:
    """The resources of one invocation. Close it when the command ends (the app does)."""

    def __init__(self, settings: Settings, store: str | None = None, definitions: str | None = None, *,
                 creates: bool = False) -> None:
        self.settings = settings
        self.creates = creates
        """Whether this command may create the store (``start``, ``serve``); the others need it to exist."""
        self._store_opt = store
        self._definitions_opt = definitions
        self._closers: list[Any] = []
        from durastate.cli.clock import read_offset, use_store_offset  # it imports this module

        # Every clock of this command reads the offset its store keeps (``serve --advance`` moved it).
        use_store_offset(lambda: read_offset(self.store))

    # -- resolved settings ------------------------------------------------------------------------
    @cached_property
    def store_url(self) -> str:
        return (self._store_opt or self.settings.store or os.environ.get(STORE_ENV) or DEFAULT_STORE).strip()

    @cached_property
    def scheme(self) -> str:
        scheme = urlsplit(self.store_url).scheme.lower()
        return "postgresql" if scheme == "postgres" else scheme

    @cached_property
    def connect_retries(self) -> int:
        if self.settings.connect_retries is not None:
            return max(1, self.settings.connect_retries)
        raw = os.environ.get(RETRIES_ENV)
        if raw:
            try:
                return max(1, int(raw))
            except ValueError as exc:
                raise UsageError(f"{RETRIES_ENV}={raw!r} is not a whole number") from exc
        return DEFAULT_CONNECT_RETRIES

    @cached_property
    def definitions_dir(self) -> Path | None:
        given = self._definitions_opt or self.settings.definitions or os.environ.get(DEFINITIONS_ENV)
        if given:
            path = Path(given)
            if not path.is_dir():
                raise UsageError(f"definitions folder {given!r} does not exist; "
                                 f"pass --definitions DIR or set {DEFINITIONS_ENV}")
            return path
        for name in DEFAULT_DEFINITION_DIRS:
            if Path(name).is_dir():
                return Path(name)
        return None

    # -- resources --------------------------------------------------------------------------------
    @cached_property
    def registry(self) -> DefinitionRegistry:
        from durastate.runtime.definitions import load_folder

        folder = self.definitions_dir
        if folder is None:
            raise UsageError(
                "no definitions folder: pass --definitions DIR or set "
                f"{DEFINITIONS_ENV} (or create ./{DEFAULT_DEFINITION_DIRS[0]})"
            )
        return load_folder(folder)

    @cached_property
    def store(self) -> ExecutionStore:
        from durastate.cli.backends import open_cli_store

        url = self.store_url
        try:
            store = open_cli_store(url, self.connect_retries, create=self.creates)
        except DurastateError as exc:
            _check_credentials(exc, url)
            raise
        except ValueError as exc:
            raise UsageError(f"{exc} (from --store or {STORE_ENV})") from exc
        except ImportError as exc:
            raise UsageError(f"store {redact(url)} needs an optional extra that is not installed: {exc}"
                             ) from exc
        except Exception as exc:  # driver errors of every backend: one clear line, never a traceback
            _check_credentials(exc, url)
            raise StoreUnavailable(
                f"cannot open store {redact(url)}: {_one_line(exc)}; check --store or {STORE_ENV}"
            ) from exc
        self._closers.append(store.close)
        return store

    @cached_property
    def inbox(self) -> QueueTransport | None:
        """The durable queue that ``start``/``send`` write into and ``serve`` drains, or ``None``.

        ``None`` (memory:// and stores without a queue of their own) means events are applied in this
        process right away.
        """
        from durastate.cli.backends import open_inbox

        try:
            transport = open_inbox(self.scheme, self.store_url, self.store, self.connect_retries)
        except DurastateError:
            raise
        except Exception as exc:
            raise StoreUnavailable(
                f"cannot open the event queue of {redact(self.store_url)}: {_one_line(exc)}"
            ) from exc
        if transport is not None:
            close = getattr(transport, "close", None)
            if callable(close):
                self._closers.insert(0, close)
        return transport

    def close(self) -> None:
        from durastate.cli.clock import use_store_offset

        use_store_offset(None)  # the store is closed: a later session reads its own
        closers, self._closers = self._closers, []
        for close in closers:
            with contextlib.suppress(Exception):  # closing must never hide the command's result or error
                close()


def _check_credentials(exc: BaseException, url: str) -> None:
    """An AWS store that found no credentials says so (not "did not answer", not "unexpected")."""
    if "botocore" not in sys.modules:  # nothing AWS ran: the error is not about credentials
        return
    from durastate.cli.aws_queue import SET_CREDENTIALS, missing_credentials

    if missing_credentials(exc):
        raise StoreUnavailable(f"no AWS credentials for store {redact(url)}: {SET_CREDENTIALS}") from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
