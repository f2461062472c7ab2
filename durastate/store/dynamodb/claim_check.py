"""The claim check: an execution too large for a DynamoDB item lives in an S3 object the item names.

Why: DynamoDB refuses items over 400 KB, and an execution's context can grow past that (a document, a
batch of results). Above ``claim_check_bytes`` (:data:`DEFAULT_CLAIM_CHECK_BYTES` by default, well below
the item limit so the item's other attributes always fit) the execution's JSON goes to
``s3://<context_bucket>/contexts/<execution id, percent-encoded>/<sha256 of the JSON>`` and the item
keeps only the key (attribute ``data_ref``) and the attributes listings and indexes read.
The rules, and why they are safe:

- **Written before the commit that references it.** The object is put first; the commit is still one
  conditional write or one ``TransactWriteItems``. A commit that then fails (a lost race, a crash, a
  throttled transaction) leaves an object no item names: no read can see it, nothing stored changed.
  A retry of the same step writes the same JSON, hence the same key: it reuses that object.
- **Named by execution and content.** Two executions never share an object, so deleting an
  execution's prefix is always safe. The JSON holds its version number, so each version has a key of
  its own, whose content never changes.
- **Unreferenced objects are removed.** After a commit lands, the object the previous version named is
  deleted (a reader that read that version's item a moment earlier finds the object gone and reads
  the item again). Objects of commits that never landed, and everything of a purged execution, go when
  the retention purge deletes the execution's prefix, after writing its tombstone (an execution whose
  commit was abandoned and that never ends keeps that object: it is invisible, and costs its storage).
- **What still cannot fit** — an execution over the threshold with no bucket configured, an event or a
  spawned child's context over the item limit, a transaction over 4 MB — is refused before any request
  with :class:`~durastate.errors.ExecutionTooLarge`, as without a bucket.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from durastate.errors import DurastateError

DEFAULT_CLAIM_CHECK_BYTES = 200_000
"""Executions whose JSON is larger go to S3: half the item limit, leaving room for the recent event
ids, the spill filter and the listing attributes the item keeps."""
DATA_REF = "data_ref"
"""The item attribute holding the S3 key of a claim-checked execution (instead of ``data``)."""
CONTEXTS = "contexts"


@dataclass(frozen=True, slots=True)
class ClaimCheck:
    """One execution JSON bound for S3: its key and its bytes."""

    key: str
    body: bytes


def context_prefix(execution_id: str) -> str:
    """The key prefix of every object of one execution (what a purge deletes). The id is percent-encoded
    (``/`` too), so no execution's prefix is the start of another's."""
    return f"{CONTEXTS}/{quote(execution_id, safe='')}/"


def claim_check(execution_id: str, data: str, bucket: str | None, threshold: int) -> ClaimCheck | None:
    """The object ``data`` goes to, when a bucket is configured and ``data`` is over the threshold."""
    body = data.encode("utf-8")
    if bucket is None or len(body) <= threshold:
        return None
    return ClaimCheck(context_prefix(execution_id) + hashlib.sha256(body).hexdigest(), body)


def check_threshold(claim_check_bytes: int) -> None:
    if not 0 <= claim_check_bytes <= 350_000:
        raise ValueError(
            f"claim_check_bytes must be between 0 and 350000 (below DynamoDB's 400 KB item limit, leaving "
            f"room for the item's other attributes), got {claim_check_bytes}"
        )


def missing_bucket(execution_id: str, key: str) -> DurastateError:
    """An item names an S3 object, but this store was opened without the bucket."""
    return DurastateError(
        f"execution {execution_id!r} keeps its context in S3 (key {key!r}); open the store with "
        "context_bucket=NAME (URL option ?context_bucket=NAME, or DURASTATE_CONTEXT_BUCKET in the functions)"
    )


def needs_s3(bucket: str | None, s3: Any) -> Any:
    """The S3 client a store with a ``context_bucket`` cannot work without."""
    if bucket is not None and s3 is None:
        raise ValueError(
            f"context_bucket={bucket!r} needs an S3 client: pass s3=<boto3 S3 client> (create() builds one)"
        )
    return s3
