"""What a DynamoDB error means to the store: a lost race, a transient refusal, or a real failure.

Why a module of its own: botocore reports every refusal as a ``ClientError`` carrying a code (and, for a
cancelled transaction, one reason per item); the store's semantics hang on reading them right — only a
failed condition on the execution item is a :class:`~durastate.errors.StoreConflict`, throttling is
retried with bounded backoff, everything else re-raises — and can't-reach-it errors must say what to
check. The classification is pure (duck-typed, no botocore import until :func:`translate` needs it), so
it is tested on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from durastate.errors import StoreUnavailable

Verdict = Literal["conflict", "retry", "fatal"]

RETRYABLE_REASONS = frozenset(
    {
        "TransactionConflict",
        "ProvisionedThroughputExceeded",
        "ThrottlingError",
        "RequestLimitExceeded",
    }
)
"""``CancellationReasons`` codes that go away by themselves: retry with backoff."""

RETRYABLE_CODES = frozenset(
    {
        "TransactionConflictException",
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
        "SlowDown",
    }
)
"""Error codes that mean "not applied, try again later" (botocore retried them already; we add bounded
patience). Server errors (500/503) are not here: botocore retries those itself with the request's
idempotency token, while a retry of ours would carry a new token and could not tell a write that
landed from one that did not — they re-raise, and the queue redelivers the event (deduplicated)."""


DENIED_CODES = frozenset({"AccessDeniedException", "UnauthorizedOperation"})


def error_code(exc: BaseException) -> str | None:
    """The DynamoDB error code of a botocore ``ClientError`` (duck-typed; None for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    error = response.get("Error")
    code = error.get("Code") if isinstance(error, dict) else None
    return str(code) if code else None


def cancellation_reasons(exc: BaseException) -> list[dict[str, Any]]:
    response = getattr(exc, "response", None)
    reasons = response.get("CancellationReasons") if isinstance(response, dict) else None
    return [r if isinstance(r, dict) else {} for r in reasons or []]


def classify_reasons(codes: Sequence[str | None]) -> Verdict:
    """What a cancelled commit transaction means, from its per-item reason codes.

    Item 0 is always the execution Put with the CAS condition, and it is the only conditioned item, so:
    a failed condition there is a lost race (``conflict``); any reason that cannot heal by itself
    (validation, collection size, a failed condition elsewhere) is ``fatal``, even if mixed with
    retryable ones; otherwise throttling / conflicting transactions are worth a retry (``retry``).
    Without reasons (old emulators) the seed's reading applies: a cancelled transaction is a conflict.
    """
    norm = [c or "None" for c in codes]
    if not norm or norm[0] == "ConditionalCheckFailed":
        return "conflict"
    real = [c for c in norm if c != "None"]
    if not real or any(c not in RETRYABLE_REASONS for c in real):
        return "fatal"
    return "retry"


def classify(exc: BaseException) -> Verdict:
    code = error_code(exc)
    if code == "TransactionCanceledException":
        return classify_reasons([r.get("Code") for r in cancellation_reasons(exc)])
    if code == "ConditionalCheckFailedException":  # a single conditional write; older moto in a txn
        return "conflict"
    if code in RETRYABLE_CODES:
        return "retry"
    return "fatal"


def translate(exc: BaseException, where: str) -> BaseException:
    """Turn botocore's can't-reach-it errors into :class:`StoreUnavailable` saying what to check."""
    try:
        from botocore import exceptions as bx  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a client exists, so botocore does
        return exc
    new: BaseException | None = None
    if isinstance(exc, bx.NoCredentialsError):
        new = StoreUnavailable(
            f"no AWS credentials for DynamoDB at {where}: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY (any dummy values work for LocalStack and moto)"
        )
    elif isinstance(exc, bx.NoRegionError):
        new = StoreUnavailable("no AWS region for DynamoDB: pass region=… or set AWS_REGION")
    elif isinstance(exc, (bx.ConnectionError, bx.HTTPClientError)):
        new = StoreUnavailable(
            f"DynamoDB at {where} did not answer ({exc}); check that the endpoint is running and "
            "reachable (LocalStack or moto_server for a local endpoint), the endpoint URL, the region "
            "and the network"
        )
    if new is None:
        return exc
    new.__cause__ = exc
    return new
