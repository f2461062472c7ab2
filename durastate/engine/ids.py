"""Deterministic ids derived from other ids.

Every id the engine makes up is a function of ids it already has (the execution id, its version, a
sequence number, the triggering event id), so re-running a step after a crash or a lost race produces
the same events and the same child executions, and every consumer can dedupe by id. Ids are capped at
128 characters (the limit of :class:`~durastate.engine.model.Event` and of the stores' keys); a longer one is
replaced by its SHA-256, which keeps it deterministic.
"""

from __future__ import annotations

import hashlib

__all__ = ["MAX_ID_LENGTH", "child_execution_id", "derived_id", "timeout_event_id"]

MAX_ID_LENGTH = 128


def _capped(text: str) -> str:
    if len(text) <= MAX_ID_LENGTH:
        return text
    return hashlib.sha256(text.encode()).hexdigest()


def derived_id(*parts: object) -> str:
    """``a:b:c`` from its parts, or its SHA-256 hex when over 128 characters."""
    return _capped(":".join(str(p) for p in parts))


def child_execution_id(parent_id: str, seq: int) -> str:
    """The id of the ``seq``-th child (region or invoke) of ``parent_id``: ``f"{parent_id}.{seq}"``."""
    return _capped(f"{parent_id}.{seq}")


def timeout_event_id(execution_id: str, path: str, fire_at: float) -> str:
    """The id of the ``durastate.timeout`` event for the timer of ``path`` armed to ``fire_at``.

    The sweeper uses it so that sweeping the same due timer twice enqueues one event in effect.
    """
    return derived_id(execution_id, "timeout", path, repr(float(fire_at)))
