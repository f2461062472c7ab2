"""Where every state and transition of a statechart goes: nested boxes and routed edges, as plain shapes.

The layout is a pure, deterministic function of the definition (and of which states are active): no
randomness, no font file, no clock — the same input gives the same coordinates, byte for byte, so a
committed picture can be checked against the renderer (``tests/render``) and a web page can re-colour a
picture it already has instead of asking for a new one.

How it is laid out (Harel's notation, as in UML):

- an atomic state is a rounded box with its name (and, in smaller type, what it invokes, its outcome and
  its targetless transitions); a final state has a double border; a history pseudo-state is a circle
  with ``H`` (shallow) or ``H*`` (deep);
- a compound state is a box that holds its children: they are ranked by the transitions between them
  (a child reached from another goes in a lower row; cycles are broken in document order, starting at
  the initial child), rows are centred, and a filled dot with an arrow marks the initial child;
- a parallel state holds its regions side by side, separated by dashed lines, each region titled with
  its name;
- a transition is a straight arrow between the borders of its two states, bent sideways when several
  join the same pair, a loop on the right for a self-transition, labelled ``event [guard]`` (the same
  labels as the Mermaid diagram: :func:`durastate.viz.edges`).

Text widths are estimated from a table of glyph widths of a Helvetica-like sans-serif font, so boxes fit
their names in any browser's sans-serif and in the PNG (which shrinks a line that would not fit).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from durastate.engine.definition import Definition, State
from durastate.engine.model import Execution
from durastate.engine.tasks import invoked
from durastate.render.route import Box, Router
from durastate.viz import active_parents, edges

__all__ = [
    "Circle",
    "Layout",
    "Line",
    "Rect",
    "Shape",
    "StateGroup",
    "Text",
    "layout",
    "text_width",
]

FONT_SIZE = 13.0
SMALL_SIZE = 10.5
LABEL_SIZE = 10.5
PAD = 14.0
GAP_X = 44.0
GAP_Y = 58.0
INITIAL_SPACE = 28.0
HISTORY_R = 14.0
MIN_BOX_W = 72.0
LINE_H = 15.0


@dataclass(frozen=True, slots=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    role: str
    """``box`` (a state's outline), ``inner`` (a final state's second border), ``label-bg``, ``region``."""
    rx: float = 8.0
    dashed: bool = False


@dataclass(frozen=True, slots=True)
class Text:
    x: float
    y: float
    """The baseline's vertical middle: text is centred on (x, y) or starts at x (``anchor="start"``)."""
    text: str
    size: float
    role: str
    """``title``, ``note``, ``history``, ``edge-label``."""
    anchor: str = "middle"
    bold: bool = False


@dataclass(frozen=True, slots=True)
class Line:
    points: tuple[tuple[float, float], ...]
    role: str
    """``edge`` (a transition, arrow at the end), ``initial`` (arrow at the end), ``separator`` (dashed)."""
    arrow: bool = True
    dashed: bool = False


@dataclass(frozen=True, slots=True)
class Circle:
    cx: float
    cy: float
    r: float
    role: str
    """``initial-dot`` (filled) or ``box`` (a history state's outline)."""
    filled: bool = False


Shape = Rect | Text | Line | Circle


@dataclass(slots=True)
class StateGroup:
    """One state's shapes, with its children's groups nested inside (as the SVG nests them)."""

    path: str
    kind: str
    """``atomic``, ``compound``, ``parallel``, ``region`` (a compound child of a parallel state), ``final``,
    ``history``."""
    x: float
    y: float
    w: float
    h: float
    active: bool = False
    """The execution is in this state (an active leaf)."""
    active_parent: bool = False
    """An active state is inside this one."""
    child_status: str | None = None
    """The status of the child execution this state runs (an invoke, or a region child), if known."""
    shapes: list[Shape] = field(default_factory=list)
    children: list[StateGroup] = field(default_factory=list)


@dataclass(slots=True)
class Layout:
    width: float
    height: float
    definition_id: str
    status: str
    """The execution's status (``running`` when there is no execution)."""
    root: StateGroup
    """The top level (path ``""``), holding the top-level states."""
    edges: list[Shape]
    """The transitions (lines and their labels), drawn over the states."""

    def states(self) -> Iterable[StateGroup]:
        """Every state's group (not the root), parents before children, in document order."""
        stack = list(reversed(self.root.children))
        while stack:
            g = stack.pop()
            yield g
            stack.extend(reversed(g.children))


# -- text ------------------------------------------------------------------------------------------------
_NARROW = set("iljtfrI.,:;'|!()[]{} ")
_WIDE = set("mwMWQOGDHNU@%")


def text_width(text: str, size: float) -> float:
    """An estimate of ``text``'s width in a sans-serif font of ``size`` (generous, so text fits its box)."""
    em = 0.0
    for ch in text:
        if ch in _NARROW:
            em += 0.32
        elif ch in _WIDE:
            em += 0.86
        elif ch.isupper():
            em += 0.68
        elif ch.isdigit():
            em += 0.57
        elif ord(ch) > 0x2000:
            em += 0.9
        else:
            em += 0.57
    return em * size * 1.1  # DejaVu Sans, a common default sans-serif, is about a tenth wider than Helvetica


# -- the tree --------------------------------------------------------------------------------------------
@dataclass(eq=False)
class _Node:
    path: str
    name: str
    state: State | None
    kind: str
    children: list[_Node] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    initial: _Node | None = None
    w: float = 0.0
    h: float = 0.0
    header: float = 0.0
    x: float = 0.0
    y: float = 0.0
    rows: list[list[_Node]] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    """The space below each row but the last: room for the labels of the transitions leaving it."""
    loop_w: float = 0.0
    """Room kept right of the box for its self-transitions and their labels."""


def _tree(defn: Definition) -> tuple[_Node, dict[str, _Node]]:
    nodes: dict[str, _Node] = {}

    def build(path: str, name: str, state: State | None, states: dict[str, State], initial: str | None,
              parent_kind: str) -> _Node:
        kind: str = "root" if state is None else state.kind
        if kind == "compound" and parent_kind == "parallel":
            kind = "region"
        node = _Node(path, name, state, kind)
        nodes[path] = node
        for child_name, child in states.items():
            child_path = f"{path}.{child_name}" if path else child_name
            node.children.append(build(child_path, child_name, child, child.states, child.initial, kind))
        if initial is not None and kind != "parallel":
            node.initial = next((c for c in node.children if c.name == initial), None)
        return node

    root = build("", defn.id, None, defn.states, defn.initial, "")
    return root, nodes


def _subtitle(state: State) -> list[str]:
    lines = []
    if state.invoke is not None:
        lines.append(f"invokes {invoked(state.invoke)}")
    if state.kind == "final" and state.outcome:
        lines.append(f"outcome: {state.outcome}")
    return lines


def _lift(path: str, scope: str) -> str:
    """``path``'s ancestor (or itself) that is a child of ``scope`` ("" = the top)."""
    rest = path[len(scope) + 1:] if scope else path
    head = rest.split(".", 1)[0]
    return f"{scope}.{head}" if scope else head


def _inside(path: str, scope: str) -> bool:
    return scope == "" or path == scope or path.startswith(scope + ".")


class _Layouter:
    def __init__(self, defn: Definition) -> None:
        self.defn = defn
        self.root, self.nodes = _tree(defn)
        self.edges = edges(defn)
        for e in self.edges:
            node = self.nodes[e.source]
            if e.target is None:
                node.notes.append(f"{e.label} / internal")
            elif e.target == e.source and node.kind != "region":
                node.loop_w = max(node.loop_w, 30.0 + text_width(e.label, LABEL_SIZE) + 6)

    # -- sizes (bottom-up) ----------------------------------------------------------------------------
    def measure(self, n: _Node) -> None:
        if n.kind == "history":
            n.w = n.h = 2 * HISTORY_R
            return
        if n.kind in ("atomic", "final"):
            assert n.state is not None
            extra = [*_subtitle(n.state), *n.notes]
            widest = max([text_width(n.name, FONT_SIZE) + 4, *(text_width(t, SMALL_SIZE) for t in extra)])
            n.w = max(MIN_BOX_W, widest + 2 * PAD)
            n.h = 32.0 + LINE_H * len(extra) + (6.0 if n.kind == "final" else 0.0)
            return
        for c in n.children:
            self.measure(c)
        title_w = text_width(n.name, FONT_SIZE) + 4 if n.kind != "root" else 0.0
        notes_w = max((text_width(t, SMALL_SIZE) for t in n.notes), default=0.0)
        if n.kind == "root":
            n.header = 0.0
        elif n.kind == "region":
            n.header = 20.0
        else:
            n.header = 26.0 + LINE_H * len(n.notes)
        if n.kind == "parallel":
            inner_w = sum(c.w for c in n.children)
            inner_h = max((c.h for c in n.children), default=0.0)
            n.w = max(inner_w, title_w + 2 * PAD, notes_w + 2 * PAD, MIN_BOX_W)
            n.h = n.header + inner_h + 4.0
            return
        n.rows = self._rows(n)
        row_ws = [sum(c.w + c.loop_w for c in row) + GAP_X * (len(row) - 1) for row in n.rows]
        row_hs = [max(c.h for c in row) for row in n.rows]
        content_w = max(row_ws, default=0.0)
        n.gaps = self._gaps(n, content_w)
        content_h = sum(row_hs) + sum(n.gaps)
        top = INITIAL_SPACE if n.initial is not None else 8.0
        n.w = max(content_w + 2 * PAD, title_w + 2 * PAD, notes_w + 2 * PAD, MIN_BOX_W)
        n.h = n.header + top + content_h + PAD

    def _gaps(self, n: _Node, content_w: float) -> list[float]:
        """Below each row, :data:`GAP_Y`, or more where the labels of the transitions going down from it
        would not fit side by side in one line across the state: a line of labels more for each overflow,
        so a long guard sits beside its arrow instead of over a state or another label."""
        row_of = {c.path: i for i, row in enumerate(n.rows) for c in row}
        widths: list[float] = [0.0] * len(n.rows)
        for e in self.edges:
            if e.target is None or not (_inside(e.source, n.path) and _inside(e.target, n.path)):
                continue
            if e.source == n.path or e.target == n.path:
                continue
            a, b = row_of.get(_lift(e.source, n.path)), row_of.get(_lift(e.target, n.path))
            if a is not None and b is not None and a < b:
                widths[a] += text_width(e.label, LABEL_SIZE) + 14
        room = max(content_w, MIN_BOX_W)
        return [max(GAP_Y, 20.0 * -(-widths[i] // room) + 22.0) for i in range(len(n.rows) - 1)]

    def _rows(self, n: _Node) -> list[list[_Node]]:
        """The children ranked by the transitions between them (longest path over a DFS forest)."""
        kids = n.children
        if not kids:
            return []
        index = {c.path: i for i, c in enumerate(kids)}
        succ: list[list[int]] = [[] for _ in kids]
        for e in self.edges:
            if e.target is None or not (_inside(e.source, n.path) and _inside(e.target, n.path)):
                continue
            if e.source == n.path or e.target == n.path:
                continue
            a, b = index[_lift(e.source, n.path)], index[_lift(e.target, n.path)]
            if a != b and b not in succ[a]:
                succ[a].append(b)
        order = list(range(len(kids)))
        if n.initial is not None:
            first = index[n.initial.path]
            order.remove(first)
            order.insert(0, first)
        # drop the edges that close a cycle (found by DFS from the initial child, then in document order)
        state = [0] * len(kids)  # 0 new, 1 on the stack, 2 done
        forward: list[list[int]] = [[] for _ in kids]
        for start in order:
            if state[start]:
                continue
            stack: list[tuple[int, int]] = [(start, 0)]
            state[start] = 1
            while stack:
                v, i = stack.pop()
                if i < len(succ[v]):
                    stack.append((v, i + 1))
                    w = succ[v][i]
                    if state[w] == 0:
                        forward[v].append(w)
                        state[w] = 1
                        stack.append((w, 0))
                    elif state[w] == 2:
                        forward[v].append(w)
                else:
                    state[v] = 2
        rank = [0] * len(kids)
        for _ in kids:  # longest path: at most len(kids) relaxation rounds on a DAG
            changed = False
            for v in range(len(kids)):
                for w in forward[v]:
                    if rank[w] < rank[v] + 1:
                        rank[w] = rank[v] + 1
                        changed = True
            if not changed:
                break
        rows: list[list[_Node]] = [[] for _ in range(max(rank) + 1)]
        for v in order:
            rows[rank[v]].append(kids[v])
        return [row for row in rows if row]

    # -- positions (top-down) -------------------------------------------------------------------------
    def place(self, n: _Node, x: float, y: float) -> None:
        n.x, n.y = x, y
        if n.kind == "parallel":
            cx = x + (n.w - sum(c.w for c in n.children)) / 2
            for c in n.children:
                self.place(c, cx, y + n.header)
                cx += c.w
            return
        if not n.rows:
            return
        top = INITIAL_SPACE if n.initial is not None else 8.0
        ry = y + n.header + top
        for i, row in enumerate(n.rows):
            row_w = sum(c.w + c.loop_w for c in row) + GAP_X * (len(row) - 1)
            row_h = max(c.h for c in row)
            cx = x + (n.w - row_w) / 2
            for c in row:
                self.place(c, cx, ry + (row_h - c.h) / 2)
                cx += c.w + c.loop_w + GAP_X
            ry += row_h + (n.gaps[i] if i < len(n.gaps) else 0.0)

    # -- shapes ---------------------------------------------------------------------------------------
    def group(self, n: _Node, active: set[str], parents: set[str], child_status: Mapping[str, str]) -> StateGroup:
        g = StateGroup(n.path, "compound" if n.kind == "root" else n.kind, n.x, n.y, n.w, n.h,
                       active=n.path in active, active_parent=n.path in parents,
                       child_status=child_status.get(n.path))
        s = g.shapes
        cx = n.x + n.w / 2
        if n.kind == "history":
            assert n.state is not None
            s.append(Circle(cx, n.y + HISTORY_R, HISTORY_R, "box"))
            s.append(Text(cx, n.y + HISTORY_R, "H*" if n.state.history == "deep" else "H", FONT_SIZE, "title",
                          bold=True))
        elif n.kind in ("atomic", "final"):
            assert n.state is not None
            s.append(Rect(n.x, n.y, n.w, n.h, "box", rx=10.0))
            if n.kind == "final":
                s.append(Rect(n.x + 3.5, n.y + 3.5, n.w - 7, n.h - 7, "inner", rx=7.0))
            ty = n.y + 17.0 + (3.0 if n.kind == "final" else 0.0)
            s.append(Text(cx, ty, n.name, FONT_SIZE, "title"))
            for k, line in enumerate([*_subtitle(n.state), *n.notes]):
                s.append(Text(cx, ty + LINE_H * (k + 1), line, SMALL_SIZE, "note"))
        elif n.kind == "region":
            s.append(Rect(n.x, n.y, n.w, n.h, "region", rx=0.0))
            s.append(Text(n.x + 8, n.y + 12, n.name, SMALL_SIZE, "region-title", anchor="start"))
        elif n.kind != "root":
            s.append(Rect(n.x, n.y, n.w, n.h, "box", rx=12.0))
            s.append(Text(n.x + 10, n.y + 15, n.name, FONT_SIZE, "title", anchor="start", bold=True))
            for k, line in enumerate(n.notes):
                s.append(Text(n.x + 10, n.y + 15 + LINE_H * (k + 1), line, SMALL_SIZE, "note", anchor="start"))
        if n.kind == "parallel":
            for left in n.children[1:]:
                s.append(Line(((left.x, n.y + n.header), (left.x, n.y + n.h - 4)), "separator", arrow=False,
                              dashed=True))
        if n.initial is not None:
            i = n.initial
            icx = i.x + i.w / 2
            s.append(Circle(icx, i.y - INITIAL_SPACE + 6, 5.0, "initial-dot", filled=True))
            s.append(Line(((icx, i.y - INITIAL_SPACE + 11), (icx, i.y)), "initial"))
        g.children = [self.group(c, active, parents, child_status) for c in n.children]
        return g

    def edge_shapes(self) -> list[Shape]:
        lines: list[tuple[Line, str]] = []
        drawn = [e for e in self.edges if e.target is not None]
        pairs: dict[frozenset[str], list[int]] = {}
        for k, e in enumerate(drawn):
            assert e.target is not None
            pairs.setdefault(frozenset((e.source, e.target)), []).append(k)
        loops: dict[str, int] = {}
        router = Router(self.root.x + self.root.w + 60, self.root.y + self.root.h + 60)
        for k, e in enumerate(drawn):
            assert e.target is not None
            a, b = self.nodes[e.source], self.nodes[e.target]
            if a is b:
                n = loops.get(a.path, 0)
                loops[a.path] = n + 1
                x1 = a.x + a.w
                y0 = a.y + 10 + 16 * n if a.kind in ("compound", "parallel") else a.y + a.h / 2 - 7 + 16 * n
                lines.append((Line(((x1, y0), (x1 + 22, y0), (x1 + 22, y0 + 12), (x1, y0 + 12)), "edge"),
                              e.label))
                continue
            if not (_inside(b.path, a.path) or _inside(a.path, b.path)):
                holders = [_box(n) for n in self.nodes.values() if n.kind != "root" and n is not a and n is not b
                           and (_inside(a.path, n.path) or _inside(b.path, n.path))]
                pts = router.route(_box(a), _box(b), self._obstacles(a, b), holders)
                if pts is not None and len(pts) >= 2:
                    lines.append((Line(tuple(pts), "edge"), e.label))
                    continue
            else:  # between a composite and a state inside it: from/to a point just inside its top-right corner
                outer, inner = (a, b) if _inside(b.path, a.path) else (b, a)
                anchor = Box(outer.x + outer.w - 30, outer.y + max(outer.header, 10.0) + 2, 18, 18)
                blocks = self._inner_obstacles(outer, inner)
                pts = router.route(anchor, _box(inner), blocks) if outer is a else \
                    router.route(_box(inner), anchor, blocks)
                if pts is not None and len(pts) >= 2:
                    lines.append((Line(tuple(pts), "edge"), e.label))
                    continue
            group = pairs[frozenset((e.source, e.target))]
            offset = (group.index(k) - (len(group) - 1) / 2) * 26.0
            start, end = self._ends(a, b)
            if offset:
                # bend sideways (perpendicular to the straight line), the same way whichever end is first
                mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
                dx, dy = end[0] - start[0], end[1] - start[1]
                length = max((dx * dx + dy * dy) ** 0.5, 1e-6)
                sign = 1.0 if (a.path, b.path) == tuple(sorted((a.path, b.path))) else -1.0
                bend = (mx - dy / length * offset * sign, my + dx / length * offset * sign)
                start, end = self._ends(a, b, toward_a=bend, toward_b=bend)
                lines.append((Line((start, bend, end), "edge"), e.label))
            else:
                lines.append((Line((start, end), "edge"), e.label))
        out: list[Shape] = [line for line, _ in lines]
        taken = [(n.x, n.y, n.w, n.h) for n in self.nodes.values() if n.kind in ("atomic", "final", "history")]
        taken += [(n.x, n.y, n.w, n.header) for n in self.nodes.values() if n.kind in ("compound", "parallel")]
        for line, label in lines:
            out.extend(self._label(label, line, taken))
        return out

    def _obstacles(self, a: _Node, b: _Node) -> list[Box]:
        """The boxes a route from ``a`` to ``b`` must go around: all but the ends, what holds them, the root;
        and the title of what holds them, and every initial marker (dot and arrow)."""
        out = []
        for n in self.nodes.values():
            if n.initial is not None:
                i = n.initial
                out.append(Box(i.x + i.w / 2 - 6, i.y - INITIAL_SPACE + 1, 12, INITIAL_SPACE - 1))
            if n.kind == "root" or n is a or n is b:
                continue
            if _inside(a.path, n.path) or _inside(b.path, n.path):
                if n.header:
                    out.append(Box(n.x + 8, n.y + 4, n.w - 16, n.header - 4))
                continue
            if _inside(n.path, a.path) or _inside(n.path, b.path):
                continue  # inside an end: covered by the end's own box
            out.append(_box(n))
        return out

    def _inner_obstacles(self, outer: _Node, inner: _Node) -> list[Box]:
        """What a route inside ``outer`` to or from ``inner`` goes around: the other states inside ``outer``
        (not those holding ``inner``), the initial markers, and ``outer``'s own outline and title."""
        out = [Box(outer.x, outer.y, outer.w, max(outer.header, 6.0))]
        for n in self.nodes.values():
            if n.initial is not None and _inside(n.path, outer.path):
                i = n.initial
                out.append(Box(i.x + i.w / 2 - 6, i.y - INITIAL_SPACE + 1, 12, INITIAL_SPACE - 1))
            if n is outer or n is inner or not _inside(n.path, outer.path) or _inside(inner.path, n.path):
                continue
            if _inside(n.path, inner.path):
                continue
            out.append(_box(n))
        return out

    @staticmethod
    def _label(text: str, line: Line, taken: list[tuple[float, float, float, float]]) -> list[Shape]:
        """The label of ``line`` at the first free spot along its longest segments (its middle if none is)."""
        w, h = text_width(text, LABEL_SIZE) + 6, 16.0
        segs = sorted(itertools.pairwise(line.points),
                      key=lambda s: -(abs(s[1][0] - s[0][0]) + abs(s[1][1] - s[0][1])))
        loop = len(line.points) == 4 and line.points[0][0] == line.points[3][0] and \
            line.points[1][0] - line.points[0][0] == 22
        if loop:  # a self-loop: the label right of it
            x, y = line.points[1][0] + 4, (line.points[1][1] + line.points[2][1]) / 2
            spots = [(x + w / 2, y)]
        else:  # along the line, then beside it (a label of a long guard may not fit on the line itself)
            on = [(p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t)
                  for p, q in segs for t in (0.5, 0.3, 0.7, 0.15, 0.85)]
            beside = [(x + dx * k, y + dy * k) for k in (1, 2) for x, y in on
                      for dx, dy in ((0, -h / 2 - 2), (0, h / 2 + 2), (w / 2 + 4, 0), (-w / 2 - 4, 0))]
            spots = on + beside
        spots = [(max(x, w / 2 + 2), max(y, h / 2 + 2)) for x, y in spots]  # not past the picture's edge
        # the first free spot; if none is free, the one that covers the least of the states and other labels
        x, y = min(spots, key=lambda c: (_covered((c[0] - w / 2, c[1] - h / 2, w, h), taken), spots.index(c)))
        taken.append((x - w / 2, y - h / 2, w, h))
        return [Rect(x - w / 2, y - h / 2, w, h, "label-bg", rx=3.0), Text(x, y, text, LABEL_SIZE, "edge-label")]

    def _ends(self, a: _Node, b: _Node, toward_a: tuple[float, float] | None = None,
              toward_b: tuple[float, float] | None = None) -> tuple[tuple[float, float], tuple[float, float]]:
        """Where a line from ``a`` to ``b`` leaves ``a``'s outline and meets ``b``'s."""
        ca, cb = (a.x + a.w / 2, a.y + a.h / 2), (b.x + b.w / 2, b.y + b.h / 2)
        if _inside(b.path, a.path):  # into a state inside the source: from the source's top edge
            return (cb[0], a.y), _clip(b, (cb[0], a.y))
        if _inside(a.path, b.path):  # out to an enclosing state: to its top edge
            return _clip(a, (ca[0], b.y)), (ca[0], b.y)
        return _clip(a, toward_a or cb), _clip(b, toward_b or ca)


def _box(n: _Node) -> Box:
    return Box(n.x, n.y, n.w, n.h, round=n.kind == "history")


def _covered(r: tuple[float, float, float, float], taken: list[tuple[float, float, float, float]]) -> float:
    """How much of ``taken`` (states' boxes, labels already placed) the rectangle ``r`` would cover."""
    total = 0.0
    for o in taken:
        dx = min(r[0] + r[2], o[0] + o[2]) - max(r[0], o[0])
        dy = min(r[1] + r[3], o[1] + o[3]) - max(r[1], o[1])
        if dx > 0 and dy > 0:
            total += dx * dy
    return total


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _clip(n: _Node, toward: tuple[float, float]) -> tuple[float, float]:
    """The point of ``n``'s outline on the segment from its centre to ``toward``."""
    cx, cy = n.x + n.w / 2, n.y + n.h / 2
    dx, dy = toward[0] - cx, toward[1] - cy
    if dx == 0 and dy == 0:
        return cx, cy
    if n.kind == "history":
        d = (dx * dx + dy * dy) ** 0.5
        return cx + dx / d * HISTORY_R, cy + dy / d * HISTORY_R
    tx = (n.w / 2) / abs(dx) if dx else float("inf")
    ty = (n.h / 2) / abs(dy) if dy else float("inf")
    t = min(tx, ty, 1.0)
    return cx + dx * t, cy + dy * t


def layout(defn: Definition, exe: Execution | None = None, child_status: Mapping[str, str] | None = None,
           *, active: Iterable[str] | None = None) -> Layout:
    """The layout of ``defn``, with ``exe``'s active state(s) marked.

    ``active`` overrides the active leaves (by default ``exe.active_path``, or ``exe.leaves`` inside an inline
    parallel state; the CLI passes the leaves of the running regions too). ``child_status`` maps a child
    execution id of ``exe`` to its status (as loaded from the store): the state that runs the child shows it
    (default: the status ``exe`` recorded).
    """
    lay = _Layouter(defn)
    lay.measure(lay.root)
    margin = 16.0
    lay.place(lay.root, margin, margin)
    leaves = list(active) if active is not None else (
        list(exe.leaves) or [exe.active_path] if exe and exe.active_path else [])
    leaves = [p for p in leaves if p in lay.nodes and p]
    by_state: dict[str, str] = {}
    if exe is not None:
        for cid, ref in exe.children.items():
            by_state[ref.path] = (child_status or {}).get(cid, ref.status)
    root = lay.group(lay.root, set(leaves), set(active_parents(leaves)), by_state)
    edge_shapes = lay.edge_shapes()
    right = max([lay.root.x + lay.root.w, *(_right(s) for s in edge_shapes)])
    bottom = max([lay.root.y + lay.root.h, *(_bottom(s) for s in edge_shapes)])
    return Layout(width=round(right + margin), height=round(bottom + margin), definition_id=defn.id,
                  status=exe.status if exe is not None else "running", root=root, edges=edge_shapes)


def _right(s: Shape) -> float:
    if isinstance(s, Rect):
        return s.x + s.w
    if isinstance(s, Line):
        return max(p[0] for p in s.points)
    if isinstance(s, Circle):
        return s.cx + s.r
    return s.x + (text_width(s.text, s.size) if s.anchor == "start" else text_width(s.text, s.size) / 2)


def _bottom(s: Shape) -> float:
    if isinstance(s, Rect):
        return s.y + s.h
    if isinstance(s, Line):
        return max(p[1] for p in s.points)
    if isinstance(s, Circle):
        return s.cy + s.r
    return s.y + s.size / 2
