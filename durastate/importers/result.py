"""What an import gives back: the definition document and every construct that could not be mapped.

The document is checked with :func:`~durastate.engine.definition.load_definition` before it is handed
back, so a result without issues is a definition that loads (and ``durastate validate`` accepts), and a
result with issues says where in the source each problem is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from durastate.engine.definition import load_definition
from durastate.errors import DefinitionError

__all__ = ["REGION_LEAF", "ImportIssue", "ImportResult", "checked", "escape", "to_yaml"]

REGION_LEAF = "_leaf"
"""The one state an atomic region of a parallel state is given: SCXML and XState let a region be an atomic
state, a durastate region is a compound one. The leaf has no actions or transitions of its own, so the
region enters, rests and exits exactly as the atomic state does (and an ``In()``/``stateIn`` of the region
reads the region itself)."""


@dataclass(frozen=True, slots=True)
class ImportIssue:
    """One construct of the source that has no durastate equivalent (or was changed to fit)."""

    location: str
    """Where in the source: an element path (``scxml/state[@id='s1']/transition[2]``) or a JSON path
    (``states.idle.on.GO[0]``)."""
    message: str
    line: int | None = None
    """The source line, when the parser knows it (SCXML)."""

    def __str__(self) -> str:
        at = f" (line {self.line})" if self.line is not None else ""
        return f"{self.location}{at}: {self.message}"


@dataclass(slots=True)
class ImportResult:
    """A durastate definition document (plain data) and the issues of the import, in source order.

    A chart that starts other charts (SCXML's ``<invoke>``) gives one more definition per chart it starts,
    in ``invoked``: the chart's ``document`` refers to them by id (``invoke: {definition: ...}``), so they are
    loaded (registered, written, validated) together with it. A caller that reads only ``document`` still
    gets the chart itself."""

    document: dict[str, Any]
    issues: list[ImportIssue] = field(default_factory=list)
    invoked: list[dict[str, Any]] = field(default_factory=list)
    """The definitions the chart invokes (and those they invoke), in document order."""

    @property
    def documents(self) -> list[dict[str, Any]]:
        """The chart's definition and every definition it invokes: what is loaded together."""
        return [self.document, *self.invoked]

    @property
    def complete(self) -> bool:
        """Whether everything in the source was mapped (and the document loads)."""
        return not self.issues


def checked(document: dict[str, Any], issues: list[ImportIssue],
            invoked: list[dict[str, Any]] | None = None) -> ImportResult:
    """The result, with the definition's own validation issues added (if the mapped document does not load,
    say why rather than hand back something ``durastate validate`` would refuse)."""
    try:
        load_definition(document)
    except DefinitionError as exc:
        issues = [*issues, *(ImportIssue("(definition)", f"does not validate: {i}") for i in exc.issues)]
    return ImportResult(document, issues, list(invoked or ()))


def to_yaml(result: ImportResult, source: str | None = None) -> str:
    """The document as YAML; with issues, they head the text as comments (each with its location), so a
    partial import says itself what is missing."""
    head: list[str] = []
    if result.issues:
        origin = f" from {source}" if source else ""
        head.append(f"# Imported{origin} with {len(result.issues)} construct(s) not mapped:")
        head.extend(f"#   {' '.join(str(issue).split())}" for issue in result.issues)
    body = yaml.safe_dump(_compact(result.document), sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=120)
    return "\n".join([*head, body]) if head else body


def _compact(document: dict[str, Any]) -> dict[str, Any]:
    """The document with durastate's shorthands, as a person writes it: an ``on`` entry that is one
    transition with only a target is the target (``TIMER: yellow``), one transition or timer is not a list."""

    def state(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out = dict(node)
        if isinstance(out.get("on"), dict):
            out["on"] = {event: _one(trs) for event, trs in out["on"].items()}
        for key in ("always", "on_done", "on_error", "after"):
            if isinstance(out.get(key), list) and len(out[key]) == 1:
                out[key] = _one(out[key]) if key != "after" else out[key][0]
        if isinstance(out.get("states"), dict):
            out["states"] = {name: state(child) for name, child in out["states"].items()}
        return out

    compact: dict[str, Any] = state(document)
    return compact


def _one(transitions: Any) -> Any:
    if isinstance(transitions, list) and len(transitions) == 1:
        only = transitions[0]
        return only["target"] if isinstance(only, dict) and set(only) == {"target"} else only
    return transitions


def escape(value: Any) -> Any:
    """A JSON constant as a durastate value (a string starting with ``$`` is written ``$$...``)."""
    if isinstance(value, str):
        return "$" + value if value.startswith("$") else value
    if isinstance(value, dict):
        return {k: escape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape(v) for v in value]
    return value
