"""How both stores build and reach their DynamoDB client: endpoint, region, credentials, retries.

Why a module of its own: ``DynamoDBStore.create`` (boto3) and ``AsyncDynamoDBStore.create``
(aiobotocore) must configure their clients identically — a local endpoint (LocalStack, moto) works with
no AWS setup, botocore's own retries and timeouts are bounded the same way, and the endpoint is probed
at the same address — without the request-generating core importing or knowing about a client library.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from durastate.errors import StoreUnavailable

DUMMY_CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
"""What a local endpoint (LocalStack, moto) gets when no real credentials are configured."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Where DynamoDB is and how patiently to reach it: the keywords both stores' ``create`` take.

    Written once so that ``DynamoDBStore.create`` and ``AsyncDynamoDBStore.create`` accept the same
    settings with the same defaults; each ``create`` takes ``endpoint_url`` and ``region`` by name or
    position and the rest by keyword, among its ``**options`` (:meth:`take` sorts them out).

    - ``endpoint_url``: None means real AWS (or the standard ``AWS_ENDPOINT_URL*`` variables).
    - ``region``: None means the configured one (``AWS_REGION``…), ``us-east-1`` for a local endpoint.
    - ``connect_attempts``, ``connect_delay``: the endpoint is probed up to ``connect_attempts`` times,
      ``connect_delay`` seconds apart (a LocalStack still starting), then
      :class:`~durastate.errors.StoreUnavailable` says what to check.
    - ``max_attempts``, ``connect_timeout``, ``read_timeout``: botocore's own bounds (see :meth:`config`).
    """

    endpoint_url: str | None = None
    region: str | None = None
    connect_attempts: int = 15
    connect_delay: float = 1.0
    max_attempts: int = 5
    connect_timeout: float = 5.0
    read_timeout: float = 10.0

    @classmethod
    def take(cls, endpoint_url: str | None, region: str | None, options: dict[str, Any]) -> ClientSettings:
        """The settings given to ``create``; removes the keyword ones from ``options``, which keeps the
        store's own (``trace_max``, ``recent_events``, … — unknown names fail there)."""
        given = {f.name: options.pop(f.name) for f in fields(cls) if f.name in options}
        return cls(endpoint_url=endpoint_url, region=region, **given)

    def client_kwargs(self, have_credentials: bool) -> tuple[dict[str, Any], str | None, str]:
        """The client kwargs both stores' ``create`` use, the endpoint (None: AWS) and a description.

        A local endpoint gets dummy credentials when none exist (LocalStack and moto accept anything)
        and ``us-east-1`` when no region is configured; real AWS must find both in the usual places.
        """
        env = os.environ
        endpoint = self.endpoint_url or env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL")
        region = self.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        kwargs: dict[str, Any] = {}
        if self.endpoint_url:
            kwargs["endpoint_url"] = self.endpoint_url
        if endpoint and not region:
            region = "us-east-1"
        if region:
            kwargs["region_name"] = region
        if endpoint and not have_credentials:
            kwargs.update(DUMMY_CREDENTIALS)
        if not region:
            raise StoreUnavailable(
                "no AWS region for DynamoDB: pass region=… (or ?region= in the store URL) or set AWS_REGION"
            )
        return kwargs, endpoint, endpoint or f"AWS {region}"

    def patience(self) -> tuple[int, float, float]:
        """How the endpoint is waited for — ``DynamoCore.wait_ready_ops``'s attempts, delay and timeout."""
        return self.connect_attempts, self.connect_delay, self.connect_timeout

    def config(self) -> dict[str, Any]:
        """botocore ``Config`` arguments: standard retry mode (throttling and 5xx retried with backoff by
        botocore itself, at most ``max_attempts`` tries in all) and explicit timeouts, so a dead endpoint
        fails in seconds instead of botocore's 60 s default."""
        return {
            "retries": {"mode": "standard", "total_max_attempts": self.max_attempts},
            "connect_timeout": self.connect_timeout,
            "read_timeout": self.read_timeout,
        }


def endpoint_address(url: str | None) -> tuple[str | None, int]:
    """(host, port) of an endpoint URL to probe; (None, 0) for AWS's own endpoints."""
    if not url:
        return None, 0
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
