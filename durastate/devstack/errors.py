"""The error the dev stack raises on purpose.

Why a module of its own: the template reader, the server, the handler loader and the stack all raise it,
and none of them should have to import another just for the class.
"""

from __future__ import annotations

from durastate.errors import DurastateError

__all__ = ["LocalStackError"]


class LocalStackError(DurastateError):
    """The local stack cannot start or run; the message says what to do."""
