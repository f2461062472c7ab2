"""Retention: what a purge keeps of an ended execution, and the rules every store's ``purge`` follows.

Why a tombstone and not a delete: an execution's dedupe marks are what make a repeated ``start`` (the
same execution id) and a late duplicate event harmless. Delete the execution and its marks, and the next
``start`` of that id creates it again; keep the marks without the execution, and DynamoDB's dedupe check
(which reads the execution item first, and keeps its newest marks inside it) no longer finds them. So a
purge turns the ended execution into a *tombstone* — the same row, status ``purged``, stripped to its
identity and outcome — that keeps its dedupe marks, and drops its trace. The worker treats ``purged`` as
ended: any event for it, a repeated START included, is consumed and ignored. Only when the tombstone
expires (``expires_at``, default :data:`DEFAULT_TOMBSTONE_TTL` after the purge) do the tombstone and its
marks go; from then on the id is free again.

Every store implements ``purge`` with the same contract (:func:`check_purge`):

* only executions whose status is one of ``statuses`` (ended ones; never ``running``/``suspended``) and
  that ended (:attr:`Execution.ended_at`) before ``ended_before``; never system records (ids starting
  with ``~``);
* at most ``limit`` conversions per call, read from an index on the end time (no table scan), and
  ``more`` says whether another call would find more;
* each conversion is a compare-and-swap on the execution's version: a commit racing the purge (a redrive
  of a failed execution, an ignored late event) either lands first — the purge then skips it — or finds
  the tombstone and loses;
* tombstones whose expiry passed are deleted with their dedupe marks and trace (``expired``); DynamoDB
  leaves that to its TTL (the tombstone item carries :data:`~durastate.store.dynamodb.layout.TTL_ATTRIBUTE`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

from durastate.engine.ids import is_system_id
from durastate.engine.model import ENDED, Execution

__all__ = [
    "DEFAULT_PURGE_LIMIT",
    "DEFAULT_TOMBSTONE_TTL",
    "PURGEABLE",
    "PURGED",
    "PurgeResult",
    "check_purge",
    "ended_cutoff",
    "ended_index_value",
    "is_purgeable",
    "stamp_ended",
    "tombstone",
]

PURGED = "purged"
PURGEABLE: tuple[str, ...] = ("finished", "cancelled", "failed", "terminated")
"""The statuses a purge may take (the default: every ended one)."""
DEFAULT_TOMBSTONE_TTL = 14 * 86400.0
"""How long a tombstone keeps recognising its execution's events after the purge: 14 days."""
DEFAULT_PURGE_LIMIT = 500
"""Executions converted per ``purge`` call: one bounded batch."""


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What one ``purge`` call did (or, with ``dry_run``, would do)."""

    purged: int
    """Executions turned into tombstones."""
    expired: int
    """Tombstones deleted (with their dedupe marks and trace) because their expiry passed."""
    more: bool
    """Another call would find more to purge now (the batch was full)."""
    ids: tuple[str, ...] = ()
    """The ids purged, in the order they were."""


def ended_cutoff(now: float, older_than: float) -> float:
    """The ``ended_before`` of a purge of what ended at least ``older_than`` seconds before ``now``, that
    instant included (``purge`` takes what ended strictly before its cut-off): a retention of ``0s`` takes
    every ended execution, also one that ended at this very instant of a clock that stands still."""
    return math.nextafter(now - older_than, math.inf)


def check_purge(
    statuses: Iterable[str], limit: int, tombstone_ttl: float
) -> tuple[str, ...]:
    """The validated status list of a purge (``ValueError`` naming the bad argument)."""
    wanted = tuple(dict.fromkeys(statuses))
    bad = [s for s in wanted if s not in PURGEABLE]
    if bad:
        raise ValueError(f"cannot purge status {bad[0]!r}: only ended executions are purged "
                         f"({', '.join(PURGEABLE)})")
    if limit < 1:
        raise ValueError(f"purge limit must be at least 1, got {limit}")
    if tombstone_ttl < 0:
        raise ValueError(f"tombstone_ttl must not be negative, got {tombstone_ttl}")
    return wanted


def stamp_ended(exe: Execution, clock: float | None = None) -> None:
    """Set or clear ``exe.ended_at`` before a commit: set (once) when the status is ended, cleared when it
    is not (a redriven failure). Every store calls it, so the end time is the same on every backend."""
    if exe.status in ENDED:
        if exe.ended_at is None:
            end = exe.updated_at if exe.updated_at is not None else clock
            exe.ended_at = end if end is not None else time.time()
    elif exe.ended_at is not None:
        exe.ended_at = None


def ended_index_value(exe: Execution) -> float | None:
    """The value of the end-time index for ``exe``: its end time while it is ended and purgeable (not a
    tombstone, not a system record), else ``None`` — the index is sparse/partial."""
    if exe.status in ENDED and exe.status != PURGED and not is_system_id(exe.id):
        return exe.ended_at
    return None


def is_purgeable(exe: Execution, ended_before: float, statuses: Iterable[str], definition_id: str | None) -> bool:
    """Whether ``exe`` falls under a purge (checked again on the row read, whatever the index said)."""
    end = ended_index_value(exe)
    return (end is not None and end < ended_before and exe.status in statuses
            and (definition_id is None or exe.definition_id == definition_id))


def tombstone(exe: Execution, expires_at: float, now: float) -> Execution:
    """What a purge leaves of ``exe``: its identity, outcome and times, at the next version (the CAS target
    of the conversion is ``exe.version``; the tombstone is written at ``exe.version + 1``)."""
    return Execution(
        id=exe.id,
        definition_id=exe.definition_id,
        status=PURGED,
        outcome=exe.outcome,
        parent_id=exe.parent_id,
        child_id=exe.child_id,
        created_at=exe.created_at,
        updated_at=now,
        ended_at=exe.ended_at,
        expires_at=expires_at,
        version=exe.version + 1,
    )
