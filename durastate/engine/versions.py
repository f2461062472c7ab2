"""Definition versions: a version is the hash of a definition's canonical form.

An execution records the version of its definition it started on and keeps running on it when the file
changes (the worker finds older versions in the store's archive). So the version must change when, and
only when, the chart changes: the same chart written as YAML, as JSON or built in Python, with any
formatting, comments or order of the keys of a node, has one version; a renamed state, a new transition
or a changed action is a new one.

The canonical form is the validated document with the shorthands expanded and the defaults left out
(:meth:`Definition.to_dict`), with the keys of every mapping sorted except two whose order means
something: ``states`` (the first child is the default ``initial``; regions are numbered in order) and
``on`` (transitions are tried in document order). A ``type`` that says what would be inferred anyway
(``atomic`` without ``states``, ``compound`` with them) is left out, and a Python callable is written as
the ``"module:qualname"`` reference that loads it back. The form is itself a document that
:func:`~durastate.engine.definition.load_definition` accepts, which is what the store archives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from durastate.engine.definition import Definition

__all__ = ["VERSION_LENGTH", "canonical_form", "canonical_json", "definition_version"]

VERSION_LENGTH = 16
"""Hex characters of the SHA-256 a version keeps: 64 bits, short enough to type, ample to tell apart the
versions of one definition."""

def canonical_form(defn: Definition) -> dict[str, Any]:
    """The canonical document of ``defn``: plain JSON data that loads back into an equal definition."""
    doc = defn.model_dump(mode="python", exclude_defaults=True)
    node = _node(doc)
    assert isinstance(node, dict)
    return node


def canonical_json(defn: Definition) -> str:
    """:func:`canonical_form` as compact JSON text (what the version hashes)."""
    return json.dumps(canonical_form(defn), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def definition_version(defn: Definition) -> str:
    """The version of ``defn``: the first 16 hex characters of the SHA-256 of its canonical JSON.

    Computed once per definition object (a worker asks on every event)."""
    try:
        return defn._version  # type: ignore[attr-defined,no-any-return]
    except AttributeError:
        pass
    version = hashlib.sha256(canonical_json(defn).encode()).hexdigest()[:VERSION_LENGTH]
    object.__setattr__(defn, "_version", version)
    return version


def _node(node: Mapping[str, Any]) -> dict[str, Any]:
    """A definition or state node: its fields sorted; ``states`` and ``on`` keep their order."""
    out: dict[str, Any] = {}
    for key in sorted(node):
        value = node[key]
        if key == "states" and isinstance(value, Mapping):
            out[key] = {name: _state(child) for name, child in value.items()}
        elif key == "on" and isinstance(value, Mapping):
            out[key] = {event: _plain(transitions) for event, transitions in value.items()}
        else:
            out[key] = _plain(value)
    return out


def _state(node: Any) -> Any:
    if not isinstance(node, Mapping):
        return _plain(node)
    out = _node(node)
    inferred = "compound" if out.get("states") else "atomic"
    if out.get("type") == inferred:
        del out["type"]
    return out


def _plain(value: Any) -> Any:
    """JSON data with every mapping's keys sorted; a callable becomes its ``module:qualname`` reference."""
    if isinstance(value, Mapping):
        return {str(k): _plain(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if callable(value):
        return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', repr(value))}"
    return value
