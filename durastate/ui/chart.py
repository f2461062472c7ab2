"""The statechart of a page, drawn on the server as SVG by :mod:`durastate.render`, which ships in the
package: the browser loads nothing from elsewhere, so the console works behind a firewall."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from markupsafe import Markup

from durastate.engine.definition import Definition
from durastate.engine.model import Execution
from durastate.render import statechart_svg


def chart(defn: Definition, exe: Execution | None = None, child_status: Mapping[str, str] | None = None,
          active: Iterable[str] | None = None) -> Markup:
    """The chart of ``defn`` as inline SVG, with ``exe``'s active states (``active``: its regions' too)
    coloured by its status; each state is a ``g[data-path]`` the page's script can find."""
    svg = statechart_svg(defn, exe, child_status, active=active)
    if svg.startswith("<?xml"):
        svg = svg.split("?>", 1)[1]
    return Markup(svg)  # our own renderer's output, which escapes every name it draws
