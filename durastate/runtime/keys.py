"""Per-execution secrets: the runtime's half of unforgeable task ids.

The engine derives a task's id from its execution's :attr:`~durastate.engine.model.Execution.secret`
(:func:`durastate.engine.ids.task_id`) but makes no randomness of its own (a step must be a pure function
of what the execution holds), so the runtime draws the secret, once per execution of a definition that
runs tasks, before the first step that could start one: the worker before it steps such an execution that
has none (a new one, or one stored before secrets), the relay when it creates such a region child.
Executions of other definitions carry none (not a byte more per commit). It is committed with the
execution, so every later step, re-run or redrive derives the same ids.
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
