"""moto's HTTP server, started in this process or attached to by URL, and boto3 clients for it.

Why this exists: moto's server is what stands in for AWS without Docker (LocalStack needs Docker and, past
4.14.0, an auth token). Starting it — moto is an optional dependency, imported only here and only when a
server is started — and building clients for its endpoint with the dummy credentials it accepts are the
only places the dev stack touches moto or builds a boto3 client. A stack attached to a server that is
already running (another ``durastate local``, a test's ``ThreadedMotoServer``) only needs the clients.
"""

from __future__ import annotations

import logging
from typing import Any

from durastate.devstack.errors import LocalStackError

__all__ = ["MOTO_CREDENTIALS", "MotoServer", "endpoint_client"]

MOTO_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
"""moto accepts any credentials; these mean no real ones are ever needed (or sent) locally."""


class MotoServer:
    """moto's ``ThreadedMotoServer`` on ``host:port`` (port 0: any free one); state is lost when stopped.

    moto keeps its state per *process*, not per server: a server started after another one in the same
    process would find the first one's tables, queues and items. So :meth:`stop` resets that state (moto's
    ``/moto-api/reset``) before it stops the server, as quitting ``durastate local`` loses it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.endpoint_url: str | None = None
        self._server: Any = None

    def start(self) -> str:
        """Start the server; returns its endpoint URL (``http://host:port``, the port it really got)."""
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise LocalStackError("the local stack needs moto's server: pip install 'moto[server]'") from exc
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log line per request
        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self.endpoint_url

    def stop(self) -> None:
        if self._server is not None:
            import urllib.request

            reset = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
            try:
                urllib.request.urlopen(reset, timeout=30).close()
            finally:
                self._server.stop()
            self._server = None
            self.endpoint_url = None


def endpoint_client(service: str, endpoint_url: str, region: str) -> Any:
    """A boto3 client for a moto endpoint (moto's dummy credentials, standard retries)."""
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.client(service, endpoint_url=endpoint_url, region_name=region, **MOTO_CREDENTIALS,
                        config=Config(retries={"mode": "standard", "max_attempts": 5}))
