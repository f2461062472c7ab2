"""Serving the console with uvicorn on a socket this module binds, so port 0 (any free port) can be
printed before the first request: ``durastate ui --port 0`` says where it listens."""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn

from durastate.ui.app import Console, create_app


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0: a free one). Raises ``OSError`` if taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(console: Console, sock: socket.socket, on_ready: Callable[[], None] | None = None) -> None:
    """Serve until Ctrl-C (SIGINT) or SIGTERM; ``on_ready`` runs once the server accepts requests."""
    config = uvicorn.Config(create_app(console), log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    if on_ready is not None:
        started = server.startup

        async def startup(sockets: list[socket.socket] | None = None) -> None:
            await started(sockets)
            if server.started:
                on_ready()

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])
