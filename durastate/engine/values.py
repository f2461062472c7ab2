"""What a value must be for durastate to store it and load it again: the one set of entry rules.

Every store persists executions and events as JSON, so whatever reaches a commit must survive a JSON
round trip on every backend unchanged. Three things do not, and each once let a single message break an
execution for good:

- **non-finite numbers** (``NaN``, ``Infinity``, or ``1e400`` which parses as infinity): JSON has no
  spelling for them, the durable stores wrote ``null``, and the context changed silently;
- **deep nesting**: a value nested close to the JSON parser's recursion limit committed fine and could
  then never be loaded again (the stored execution nests it a few levels deeper);
- **ids with control characters** (a NUL byte above all: PostgreSQL text cannot hold it) or, for
  execution ids, the separator the engine reserves for child ids (so a user id can never collide with a
  region or an invoked child: see :data:`CHILD_SEPARATOR`).

The rules are checked where data enters (the wire, the client, the CLI, ``LocalRuntime``, the results of
``assign``), so every backend refuses the same inputs with the same typed error and nothing already
stored is touched. They are pure functions of the value: no I/O.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from durastate.engine.ids import CHILD_SEPARATOR, MAX_ID_LENGTH
from durastate.errors import InvalidValue

__all__ = [
    "CHILD_SEPARATOR",
    "MAX_DEPTH",
    "check_event_id",
    "check_execution_id",
    "check_json",
    "id_problem",
    "object_from_json",
    "printable",
]

MAX_INT_BITS = 13_000
"""Integers up to about 3,900 digits: JSON parsers (and Python's own int-to-text limit) refuse longer ones,
so a longer one would commit and then never load again."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_IN_IDS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""What an id may not hold: C0 and C1 control characters (and DEL), lone surrogates. One regex search is
a C loop; ids are checked on every event, so this is on the hot path."""

MAX_DEPTH = 64
"""How deeply event data and context values may nest (objects and arrays). Far above what a statechart's
data needs, far below the JSON parsers' recursion limits, with room for the levels a stored execution adds."""


def object_from_json(text: str, what: str) -> dict[str, Any]:
    """``text`` (what a user typed: ``what`` names it) parsed as a JSON object. Text that is not JSON raises
    :class:`json.JSONDecodeError` for the caller to word (each entry names the field its own way); JSON that
    is no object raises :class:`InvalidValue` saying what to type instead."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise InvalidValue(f"{what} must be a JSON object like {{\"amount\": 10}}, got {type(value).__name__}")
    return value


def check_json(value: Any, where: str = "value", depth: int = 0) -> None:
    """Raise :class:`InvalidValue` unless ``value`` is plain JSON that every store round-trips exactly:
    objects with string keys, arrays, strings, booleans, null, integers and finite floats, nested at
    most :data:`MAX_DEPTH` deep. ``where`` names the value in the message (``event.data``); ``depth`` is
    how deep the value will sit inside the outermost document that carries it (0: it is that document)."""
    problem = _json_problem(value, where, depth)
    if problem is not None:
        raise InvalidValue(problem)


def printable(text: str) -> str:
    """``text`` safe to print, log and send as UTF-8 (a lone surrogate becomes ``\\udXXX``)."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _json_problem(value: Any, where: str, depth: int) -> str | None:
    # Iterative over siblings, recursive over depth (bounded by MAX_DEPTH, so no recursion error).
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        if value.isascii() or not _SURROGATE.search(value):
            return None
        return f"{where} holds a lone surrogate (not text any store can keep as UTF-8); send valid Unicode"
    if isinstance(value, int):
        if value.bit_length() <= MAX_INT_BITS:
            return None
        return (f"{where} is an integer of about {len(str(value)) if value.bit_length() < 40_000 else 'many'} "
                "digits, too long for JSON to read back; send it as a string")
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return (f"{where} is {value!r}: JSON has no non-finite numbers and stores would keep null; "
                "send a finite number, a string, or null")
    if isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            return (f"{where} nests deeper than {MAX_DEPTH} levels of objects/arrays; flatten it (stored "
                    "data must load again)")
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    return f"{where} has a non-string key {printable(repr(k))}; JSON object keys are strings"
                if not k.isascii() and _SURROGATE.search(k):
                    return f"{where} has a key holding a lone surrogate ({printable(k)}); send valid Unicode"
                if not _plain(v):
                    p = _json_problem(v, f"{where}.{printable(k)}", depth + 1)
                    if p is not None:
                        return p
        else:
            for i, v in enumerate(value):
                if not _plain(v):
                    p = _json_problem(v, f"{where}[{i}]", depth + 1)
                    if p is not None:
                        return p
        return None
    return f"{where} is a {type(value).__name__}, which is not JSON; use objects, arrays, strings, numbers"


def _plain(v: Any) -> bool:
    """A value that needs no look (the common case, checked first): null, a boolean, a small int, ASCII."""
    t = type(v)
    return v is None or t is bool or (t is int and v.bit_length() <= MAX_INT_BITS) or (t is str and v.isascii())


def id_problem(value: object, what: str) -> str | None:
    """Why ``value`` is not a usable id (``None`` when it is): a non-empty string of at most 128
    characters with no control characters."""
    if not isinstance(value, str):
        return f"{what} must be a string, got {type(value).__name__}"
    if not value:
        return f"{what} is empty; give a non-empty id"
    if len(value) > MAX_ID_LENGTH:
        return f"{what} is {len(value)} characters, over the limit of {MAX_ID_LENGTH}; use a shorter id"
    bad = _NOT_IN_IDS.search(value)
    if bad is not None:
        return (f"{what} {printable(repr(value))} contains the control or surrogate character "
                f"{printable(repr(bad.group()))}; ids are printable text")
    return None


def check_event_id(value: object, what: str = "event id") -> str:
    """``value`` if it is a usable event id, else :class:`InvalidValue` saying why."""
    problem = id_problem(value, what)
    if problem is not None:
        raise InvalidValue(problem)
    assert isinstance(value, str)
    return value


def check_execution_id(value: object, what: str = "execution id") -> str:
    """``value`` if a user may name an execution so, else :class:`InvalidValue` saying why.

    On top of the event-id rules, an execution id given from outside may not contain
    :data:`CHILD_SEPARATOR`: the engine names child executions ``{parent}~{n}``, and reserving the
    separator keeps user ids and child ids in separate namespaces.
    """
    problem = id_problem(value, what)
    if problem is None and CHILD_SEPARATOR in str(value):
        problem = (f"{what} {value!r} contains {CHILD_SEPARATOR!r}, which durastate reserves for the ids of "
                   "child executions (regions and invoked children); choose an id without it")
    if problem is not None:
        raise InvalidValue(problem)
    assert isinstance(value, str)
    return value
