"""How a client of the AWS stack builds its boto3 clients: endpoint, region, credentials and retries.

One helper for every caller outside Lambda — ``DurastateClient.for_aws`` and the CLI's ``--queue-url`` and
``--dlq-url`` — so that a local endpoint (``durastate local``, moto's server, LocalStack) works the same
everywhere with no AWS configuration at all:

* **endpoint** — an explicit ``endpoint_url``; else the standard ``AWS_ENDPOINT_URL_<SERVICE>`` /
  ``AWS_ENDPOINT_URL`` variables (botocore resolves them itself); else, when the queue URL is on this
  machine, its own origin (a local server serves every service on one port).
* **credentials** — the configured ones (variables, profile, instance role); when there are none and the
  endpoint is local, stand-ins (local servers accept any); when there are none for real AWS,
  :class:`AwsSetupError` saying what to set, before any request.
* **region** — an explicit one, else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else the one in an AWS queue
  URL (``sqs.<region>.amazonaws.com``), else ``us-east-1`` (what local servers use).

The Lambda handlers do not use it: there the execution role's credentials and the region are always set.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any
from urllib.parse import urlsplit

from durastate.errors import DurastateError

__all__ = ["LOCAL_CREDENTIALS", "SET_CREDENTIALS", "AwsSetupError", "aws_client", "configured_endpoint",
           "is_local", "local_origin", "queue_region"]

LOCAL_CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
"""What a client of a local endpoint gets when no credentials are configured (local servers accept any)."""
SET_CREDENTIALS = ("set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (any values work for a "
                   "local endpoint such as `durastate local`)")


class AwsSetupError(DurastateError):
    """The AWS side is not configured (no credentials, no region) or does not answer."""


def is_local(url: str | None) -> bool:
    """Whether an endpoint or queue URL points at this machine (localhost, a loopback address)."""
    try:
        host = urlsplit(url).hostname if url else None
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def local_origin(url: str) -> str | None:
    """``scheme://host:port`` of a URL on this machine, else ``None``."""
    if not is_local(url):
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def configured_endpoint(service: str) -> str | None:
    """The endpoint the standard variables configure for ``service`` (``sqs``, ``dynamodb``), if any."""
    specific = f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}"
    return os.environ.get(specific) or os.environ.get("AWS_ENDPOINT_URL") or None


def queue_region(queue_url: str | None) -> str:
    """The region: ``AWS_REGION``/``AWS_DEFAULT_REGION``, else the one in an AWS queue URL, else us-east-1."""
    env = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if env:
        return env
    url = queue_url or ""
    host = url.split("/")[2] if url.count("/") >= 2 else ""
    parts = host.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "sqs" else "us-east-1"


def aws_client(service: str, *, url: str | None = None, region: str | None = None,
               endpoint_url: str | None = None, label: str | None = None, max_attempts: int = 8) -> Any:
    """A boto3 client for ``service``, configured as the module docstring says.

    ``url`` is the queue URL the client is for (its region, and its origin when it is on this machine);
    ``label`` names it in the error for missing credentials (default: the service and its endpoint).
    """
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    configured = endpoint_url or configured_endpoint(service)
    origin = local_origin(url) if url else None
    endpoint = configured or origin
    session = boto3.session.Session()
    credentials: dict[str, str] = {}
    if session.get_credentials() is None:
        if not is_local(endpoint):
            where = label or f"{service} at {endpoint or 'AWS'}"
            raise AwsSetupError(f"no AWS credentials for {where}: {SET_CREDENTIALS}")
        credentials = LOCAL_CREDENTIALS
    # botocore honours a configured endpoint itself; only an explicit one or the queue's origin is passed.
    return session.client(service, region_name=region or queue_region(url),
                          endpoint_url=endpoint_url or (None if configured else origin),
                          config=Config(retries={"mode": "standard", "max_attempts": max_attempts}),
                          **credentials)
