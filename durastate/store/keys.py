"""Per-execution secrets: the half of the ids a producer cannot derive.

The engine derives the ids of an execution's tasks, of the events it emits and of the events it forwards to
its regions from its :attr:`~durastate.engine.model.Execution.secret` (:func:`durastate.engine.ids.task_id`,
:func:`~durastate.engine.ids.emit_event_id`, :func:`~durastate.engine.ids.forwarded_event_id`) but makes no
randomness of its own (a step must be a pure function of what the execution holds), so the runtime draws
the secret once per execution, before the first step that could derive one of those ids: the worker before
it steps (or resumes, or releases held events of) an execution that has none — a new one, or one stored
before secrets — and the relay when it creates a region child. Every execution gets one, whatever its
definition: almost every definition emits, forwards or runs a task somewhere, and 32 hex characters per
execution are cheaper than a wrong guess about which.

It is committed with the execution, so every later step, re-run or redrive derives the same ids. A step
that loses the commit's compare-and-swap is thrown away with the secret it drew (nothing it derived was
written: the emitted events are in the same atomic commit), and the retry steps the reloaded execution,
whose stored secret — or, if there still is none, a new one drawn for that attempt — is the one its
committed ids are derived from.
"""

from __future__ import annotations

import secrets

from durastate.engine.model import Execution

__all__ = ["SECRET_BYTES", "give_secret", "new_secret"]

SECRET_BYTES = 16
"""128 random bits per execution (32 hex characters in the stored JSON)."""


def new_secret() -> str:
    """A fresh secret for one execution."""
    return secrets.token_hex(SECRET_BYTES)


def give_secret(exe: Execution) -> None:
    """Give ``exe`` a secret unless it has one already (executions stored before there were secrets get
    one on their next step; their tasks already running keep their plain ids)."""
    if exe.secret is None:
        exe.secret = new_secret()
