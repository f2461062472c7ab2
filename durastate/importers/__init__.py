"""Import statecharts written for other tools: W3C SCXML documents and XState v5 machine configs.

Each importer is a pure function of the text it is given, ``convert(text, source) -> ImportResult``: a
durastate definition document (plain data that :func:`~durastate.engine.definition.load_definition`
accepts) and the list of what could not be mapped, each with its location in the source. Nothing is
dropped silently and no string of the source is ever evaluated: expressions are parsed by a small parser
for the subset that maps onto durastate's operators (:mod:`durastate.importers.ecma`), and anything
outside it is reported.
"""

from __future__ import annotations

from durastate.importers.result import ImportIssue, ImportResult, to_yaml

__all__ = ["ImportIssue", "ImportResult", "to_yaml"]
