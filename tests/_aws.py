"""Shared AWS test helpers: moto's HTTP server on 127.0.0.1 and clients that talk to it or to moto
in-process. Import it as ``from tests._aws import …``.

One :class:`ThreadedMotoServer` per test session (:func:`shared_moto_server`), started on first use on
a free port and stopped at exit. Tests isolate themselves by a unique table prefix, never by a server.
Note that moto keeps one in-process state for ``mock_aws`` and the server alike, and ``mock_aws`` resets
it when it exits, so never keep data on the shared server across tests.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

REGION = "us-east-1"
DUMMY = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": REGION}


def free_port() -> int:
    """A TCP port nothing listens on right now (bind to 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unique_prefix(stem: str = "t") -> str:
    return f"{stem}{uuid.uuid4().hex[:12]}"


class MotoServer:
    """moto's ThreadedMotoServer on 127.0.0.1 (``port=None``: a free one), as a start/stop object."""

    def __init__(self, port: int | None = None) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request in test output
        self.port = port if port is not None else free_port()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.running = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        self._server.start()
        self.running = True
        return self

    def stop(self) -> None:
        if self.running:
            self.running = False
            self._server.stop()


_shared: MotoServer | None = None
_shared_lock = threading.Lock()


def shared_moto_server() -> MotoServer:
    """The session's one moto HTTP server (started lazily, stopped at interpreter exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MotoServer().start()
            atexit.register(_shared.stop)
        return _shared


@contextlib.contextmanager
def late_server(port: int) -> Iterator[tuple[threading.Event, threading.Event, MotoServer]]:
    """A moto server that starts on ``port`` only when ``go`` is set; ``up`` is set once it listens.

    Lets a test show that a client retries until an endpoint comes up, synchronised by events, not by
    sleeping: the client's injected ``sleep`` sets ``go`` and waits for ``up``.
    """
    go, up = threading.Event(), threading.Event()
    server = MotoServer(port)

    def run() -> None:
        if go.wait(timeout=60):
            server.start()
            up.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield go, up, server
    finally:
        go.set()
        thread.join(timeout=60)
        server.stop()


_clients: dict[str, Any] = {}


def shared_server_client(service: str) -> Any:
    """One boto3 client per service for the session, on the shared moto server (boto3 clients are
    thread-safe; building one takes longer than most tests)."""
    if service not in _clients:
        _clients[service] = boto3_client(service, shared_moto_server().url)
    return _clients[service]


def boto3_client(service: str, endpoint_url: str | None = None) -> Any:
    """A boto3 client with dummy credentials (moto in-process when ``endpoint_url`` is None)."""
    import boto3

    return boto3.client(service, endpoint_url=endpoint_url, **DUMMY)
