"""Statechart pictures: a pure-Python layout of a definition (nested boxes, routed transitions) as SVG or PNG.

``statechart_svg(defn, exe=None, child_status=None)`` returns an SVG document; ``statechart_png(...)`` the
same picture as PNG bytes (drawn with Pillow, from the ``cli`` extra). With an execution, its active
state(s) are coloured by its status — running blue, finished green, failed red, cancelled/terminated grey,
suspended amber (the palette of :data:`durastate.viz.STATUS_COLOURS`, shared with the Mermaid output) —
and the composite states holding them lightly.

The SVG is meant to be embedded in a page that keeps it up to date without re-rendering it, so these
names are stable:

- the ``<svg>`` element has ``class="statechart status-<status>"`` (``running``, ``finished``, ``failed``,
  ``cancelled``, ``terminated``, ``suspended``; ``running`` without an execution), ``data-definition``
  and ``data-status``;
- every state is a ``<g>`` with ``id="state-<path with '.' replaced by '-'>"`` (``state-processing-payment``),
  ``data-path="<path>"`` and ``class="state <kind> [active] [active-parent] [child-<status>]"``, where kind
  is ``atomic``, ``compound``, ``parallel``, ``region``, ``final`` or ``history``; a state's ``<g>`` holds its
  own shapes (its outline has class ``box``) and then its children's ``<g>`` elements;
- the transitions are in ``<g class="transitions">`` after the states.

So moving the highlight is: remove ``active``/``active-parent`` from the old groups, add them to the new
ones, and swap the ``status-*`` class of the ``<svg>``; the embedded ``<style>`` colours the rest. (Ids are
unique within one picture; two pictures in one page repeat them, so select inside the picture's element.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from durastate.render.layout import Layout, layout
from durastate.render.svg import group_id, to_svg

if TYPE_CHECKING:
    from durastate.engine.definition import Definition
    from durastate.engine.model import Execution

__all__ = ["Layout", "group_id", "layout", "statechart_png", "statechart_svg"]


def statechart_svg(defn: Definition, exe: Execution | None = None, child_status: Mapping[str, str] | None = None,
                   *, active: Iterable[str] | None = None) -> str:
    """The SVG document of ``defn``, with ``exe``'s active state(s) coloured by its status.

    ``child_status`` maps ``exe``'s child execution ids to their current status; ``active`` overrides the
    active leaves (default: ``exe.active_path``; pass the running regions' leaves too, as ``durastate viz``
    does).
    """
    return to_svg(layout(defn, exe, child_status, active=active))


def statechart_png(defn: Definition, exe: Execution | None = None, child_status: Mapping[str, str] | None = None,
                   scale: float = 2, *, active: Iterable[str] | None = None) -> bytes:
    """The same picture as :func:`statechart_svg`, as PNG bytes (``scale`` pixels per SVG unit)."""
    from durastate.render.png import to_png

    return to_png(layout(defn, exe, child_status, active=active), scale)
