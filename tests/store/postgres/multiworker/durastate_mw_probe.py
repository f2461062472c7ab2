"""A ``call`` action that records, on the side, every time a worker process runs a step for an event.

Each row is written in its own autocommit transaction, outside the step's commit, so it survives a
step whose commit never happens: two rows for one event mean the step ran twice — two workers advanced
the same execution at once (the loser retried), or a worker died between the step and its commit.

With ``DURASTATE_MW_STALL_AFTER=N`` in its environment, a worker hangs in the middle of its N-th step (after
recording it with ``stalled = true``): the test then SIGKILLs it at a moment it certainly holds claims.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_conn: Any = None
_steps = 0


def probe(context: dict[str, Any], event: Any) -> None:
    global _conn, _steps
    if _conn is None:
        import psycopg

        _conn = psycopg.connect(os.environ["DURASTATE_MW_PROBE_DSN"], autocommit=True)
    _steps += 1
    stall_after = int(os.environ.get("DURASTATE_MW_STALL_AFTER", "0"))
    stall = stall_after > 0 and _steps >= stall_after
    event_id = event["id"] if isinstance(event, dict) else event.id
    schema = os.environ["DURASTATE_MW_PROBE_SCHEMA"]
    _conn.execute(
        f'INSERT INTO "{schema}".probe (event_id, pid, stalled) VALUES (%s, %s, %s)',
        (event_id, os.getpid(), stall),
    )
    if stall:
        threading.Event().wait()  # hang mid-step, holding this claim and the rest of the batch
