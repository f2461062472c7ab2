"""How both stores build and reach their DynamoDB client: endpoint, region, credentials, retries.

Why a module of its own: ``DynamoDBStore.create`` (boto3) and ``AsyncDynamoDBStore.create``
(aiobotocore) must configure their clients identically — a local endpoint (LocalStack, moto) works with
no AWS setup, botocore's own retries and timeouts are bounded the same way, and the endpoint is probed
at the same address — without the request-generating core importing or knowing about a client library.
"""

from __future__ import annotations

import os
from typing import Any

from durastate.errors import StoreUnavailable

DUMMY_CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
"""What a local endpoint (LocalStack, moto) gets when no real credentials are configured."""


def client_settings(
    endpoint_url: str | None, region: str | None, have_credentials: bool
) -> tuple[dict[str, Any], str | None, str]:
    """The client kwargs both stores' ``create`` use, the endpoint (None: AWS) and a description.

    A local endpoint gets dummy credentials when none exist (LocalStack and moto accept anything) and
    ``us-east-1`` when no region is configured; real AWS must find both in the usual places.
    """
    env = os.environ
    endpoint = endpoint_url or env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL")
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    kwargs: dict[str, Any] = {}
    if endpoint_url:
        kwargs["endpoint_url"] = endpoint_url
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


def retry_config(max_attempts: int, connect_timeout: float, read_timeout: float) -> dict[str, Any]:
    """botocore ``Config`` arguments: standard retry mode (throttling and 5xx retried with backoff by
    botocore itself, at most ``max_attempts`` tries in all) and explicit timeouts, so a dead endpoint fails in
    seconds instead of botocore's 60 s default."""
    return {
        "retries": {"mode": "standard", "total_max_attempts": max_attempts},
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
    }


def endpoint_address(url: str | None) -> tuple[str | None, int]:
    """(host, port) of an endpoint URL to probe; (None, 0) for AWS's own endpoints."""
    if not url:
        return None, 0
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
