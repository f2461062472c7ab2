"""A :class:`~durastate.render.layout.Layout` as a standalone SVG document (see the package docstring for
the ids and classes a page can rely on)."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from durastate.render.layout import Circle, Layout, Line, Rect, Shape, StateGroup
from durastate.viz import PARENT_COLOURS, STATUS_COLOURS

__all__ = ["STATUSES", "group_id", "to_svg"]

STATUSES = tuple(STATUS_COLOURS)
"""The execution statuses the embedded style colours (``status-<status>`` on the ``<svg>`` element)."""
INK = "#1f2937"
LINE = "#475569"
FONT = "Helvetica, Arial, sans-serif"


def group_id(path: str) -> str:
    """The ``id`` of a state's ``<g>``: ``state-`` and the path with dots as dashes (``state-a-b``)."""
    return "state-" + path.replace(".", "-")


def _style() -> str:
    rules = [
        f"svg.statechart {{ font-family: {FONT}; }}",
        f".statechart .box, .statechart .inner {{ fill: #ffffff; stroke: {LINE}; stroke-width: 1.5; }}",
        ".statechart .region { fill: none; stroke: none; }",
        f".statechart text {{ fill: {INK}; dominant-baseline: central; }}",
        ".statechart .note, .statechart .region-title { fill: #475569; }",
        ".statechart .region-title { font-style: italic; }",
        f".statechart .edge, .statechart .initial {{ fill: none; stroke: {LINE}; stroke-width: 1.3; }}",
        f".statechart .separator {{ fill: none; stroke: {LINE}; stroke-width: 1.2; stroke-dasharray: 6 4; }}",
        f".statechart .initial-dot {{ fill: {INK}; stroke: none; }}",
        ".statechart .label-bg { fill: #ffffff; fill-opacity: 0.85; stroke: none; }",
        ".statechart .edge-label { fill: #334155; }",
        f".statechart .active-parent > .box {{ fill: {PARENT_COLOURS[0]}; stroke: {PARENT_COLOURS[1]}; "
        "stroke-width: 2; }",
    ]
    for status, (fill, stroke) in STATUS_COLOURS.items():
        rules.append(f".statechart.status-{status} .active > .box, .statechart.status-{status} .active > .inner "
                     f"{{ fill: {fill}; stroke: {stroke}; stroke-width: 3; }}")
    return "\n".join(rules)


def _n(v: float) -> str:
    """A coordinate: at most one decimal, no trailing zeros (stable text for stable files)."""
    text = f"{v:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _shape(s: Shape) -> str:
    if isinstance(s, Rect):
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        return (f'<rect class="{s.role}" x="{_n(s.x)}" y="{_n(s.y)}" width="{_n(s.w)}" height="{_n(s.h)}" '
                f'rx="{_n(s.rx)}"{dash}/>')
    if isinstance(s, Circle):
        return f'<circle class="{s.role}" cx="{_n(s.cx)}" cy="{_n(s.cy)}" r="{_n(s.r)}"/>'
    if isinstance(s, Line):
        pts = " ".join(f"{_n(x)},{_n(y)}" for x, y in s.points)
        marker = ' marker-end="url(#ds-arrow)"' if s.arrow else ""
        return f'<polyline class="{s.role}" points="{pts}"{marker}/>'
    weight = ' font-weight="bold"' if s.bold else ""
    return (f'<text class="{s.role}" x="{_n(s.x)}" y="{_n(s.y)}" font-size="{_n(s.size)}" '
            f'text-anchor="{s.anchor}"{weight}>{escape(s.text)}</text>')


def _group(g: StateGroup, out: list[str], depth: int) -> None:
    classes = ["state", g.kind]
    if g.active:
        classes.append("active")
    if g.active_parent:
        classes.append("active-parent")
    if g.child_status:
        classes.append(f"child-{g.child_status}")
    pad = "  " * depth
    out.append(f'{pad}<g id={quoteattr(group_id(g.path))} class="{" ".join(classes)}" '
               f"data-path={quoteattr(g.path)}>")
    out.extend(f"{pad}  {_shape(s)}" for s in g.shapes)
    for c in g.children:
        _group(c, out, depth + 1)
    out.append(f"{pad}</g>")


def to_svg(lay: Layout) -> str:
    """The SVG text of ``lay`` (UTF-8, no XML declaration needed; embeds its own style)."""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="statechart status-{lay.status}" '
        f'width="{_n(lay.width)}" height="{_n(lay.height)}" viewBox="0 0 {_n(lay.width)} {_n(lay.height)}" '
        f"data-definition={quoteattr(lay.definition_id)} data-status={quoteattr(lay.status)}>",
        f"<title>{escape(lay.definition_id)}</title>",
        "<defs>",
        '  <marker id="ds-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{LINE}"/></marker>',
        f"  <style>\n{_style()}\n  </style>",
        "</defs>",
        f'<rect class="background" x="0" y="0" width="{_n(lay.width)}" height="{_n(lay.height)}" fill="#ffffff"/>',
    ]
    out.append('<g class="states">')
    out.extend(f"  {_shape(s)}" for s in lay.root.shapes)
    for c in lay.root.children:
        _group(c, out, 1)
    out.append("</g>")
    out.append('<g class="transitions">')
    out.extend(f"  {_shape(s)}" for s in lay.edges)
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
