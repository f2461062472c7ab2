"""Known bugs the properties would keep finding, each excluded from them narrowly until it is fixed.

Every entry names the strict-xfail regression test in ``test_regressions.py`` that pins it: when the bug
is fixed that test XPASSes (and fails, being strict), which is the signal to delete the entry here.
``DURASTATE_PROPERTIES_STRICT=1`` turns every exclusion off (the properties then find them again).

None is open today: every bug the properties found has been fixed and is kept as a plain regression test.
When a property finds a new one whose fix must wait, add a :class:`Signature` to :data:`SIGNATURES` and a
strict ``xfail`` regression test that reproduces it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STRICT = bool(os.environ.get("DURASTATE_PROPERTIES_STRICT"))


@dataclass(frozen=True)
class Signature:
    """How a known bug shows in a property's failure: the regression test that pins it, and texts that
    must all appear in the failure (its message and its causes')."""

    regression: str
    texts: tuple[str, ...]
    backends: tuple[str, ...] = ()
    """Only on these backends (empty: on every one)."""
    pattern: str = ""
    """A regular expression the failure must match too."""
    cause: Callable[[list[Any]], bool] | None = None
    """A predicate the example's steps must satisfy too (the bug's cause is in the input)."""


SIGNATURES: list[Signature] = []


def known_failure(exc: BaseException, backend: str, steps: list[Any] | None = None) -> str | None:
    """The regression test of the known bug ``exc`` is (its failure matches a signature), or None."""
    if STRICT:
        return None
    texts = []
    e: BaseException | None = exc
    while e is not None and len(texts) < 5:
        texts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    text = "\n".join(texts)
    for sig in SIGNATURES:
        if ((not sig.backends or backend in sig.backends) and all(t in text for t in sig.texts)
                and (not sig.pattern or re.search(sig.pattern, text))
                and (sig.cause is None or (steps is not None and sig.cause(steps)))):
            return sig.regression
    return None


