"""Orthogonal routes for transitions around the boxes of a laid-out statechart.

A* over a grid of small cells, from the ring of cells around the source's box to the ring around the
target's: the boxes an edge must not cross are blocked (every state but the two ends and the composites
that hold either end), turning costs extra (few bends read well) and a cell another edge already uses
costs a little (edges spread out instead of stacking). Deterministic: ties break on insertion order.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Box", "Router"]

Point = tuple[float, float]
_DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))
_TURN = 4.0
_USED = 1.5
_BORDER = 3.0
_GREED = 1.3
"""The heuristic's weight: a little over 1 finds a near-shortest route exploring far fewer cells."""
_WINDOW = 160.0
"""How far (in layout units) beyond the two ends' boxes the first search may go."""
_MAX_CELLS = 60_000


@dataclass(frozen=True, slots=True)
class Box:
    x: float
    y: float
    w: float
    h: float
    round: bool = False
    """A circle inscribed in the box (a history state): ends are put on the circle."""


class Router:
    def __init__(self, width: float, height: float, inflate: float = 5.0) -> None:
        self.g = max(8.0, math.ceil(math.sqrt(width * height / _MAX_CELLS)))
        self.nx = int(width / self.g) + 2
        self.ny = int(height / self.g) + 2
        self.inflate = inflate
        self.used = bytearray(self.nx * self.ny)

    def _cells(self, b: Box) -> tuple[int, int, int, int]:
        """The inclusive cell range covered by ``b`` grown by the inflation margin."""
        g, m = self.g, self.inflate
        i0 = max(0, int((b.x - m) // g))
        j0 = max(0, int((b.y - m) // g))
        i1 = min(self.nx - 1, int((b.x + b.w + m) // g))
        j1 = min(self.ny - 1, int((b.y + b.h + m) // g))
        return i0, j0, i1, j1

    def route(self, src: Box, dst: Box, obstacles: list[Box], crossed: Sequence[Box] = ()) -> list[Point] | None:
        """A polyline from ``src``'s border to ``dst``'s border, or ``None`` if no way around was found.

        ``crossed`` are boxes the route may enter (the composites holding an end): running along their
        outline costs extra, so a route crosses it rather than following it. The search first stays near
        the two ends (most routes do), then, if that finds nothing, tries the whole picture.
        """
        a, b = self._cells(src), self._cells(dst)
        margin = int(_WINDOW / self.g)
        window = (min(a[0], b[0]) - margin, min(a[1], b[1]) - margin,
                  max(a[2], b[2]) + margin, max(a[3], b[3]) + margin)
        return self._route(src, dst, obstacles, crossed, window) or self._route(src, dst, obstacles, crossed, None)

    def _route(self, src: Box, dst: Box, obstacles: list[Box], crossed: Sequence[Box],
               window: tuple[int, int, int, int] | None) -> list[Point] | None:
        nx, ny, g = self.nx, self.ny, self.g
        blocked = bytearray(nx * ny)
        edge = bytearray(nx * ny)
        for b in crossed:
            i0, j0, i1, j1 = self._cells(b)
            for j in range(j0, j1 + 1):
                for i in (i0, i0 + 1, i1 - 1, i1) if j0 + 1 < j < j1 - 1 else range(i0, i1 + 1):
                    edge[j * nx + i] = 1
        for b in (*obstacles, src, dst):
            i0, j0, i1, j1 = self._cells(b)
            for j in range(j0, j1 + 1):
                blocked[j * nx + i0: j * nx + i1 + 1] = b"\x01" * (i1 - i0 + 1)
        starts = self._ring(src, blocked)
        goals = {c: side for c, side in self._ring(dst, blocked)}
        if not starts or not goals:
            return None
        wi0, wj0, wi1, wj1 = window if window is not None else (0, 0, nx - 1, ny - 1)
        gi0, gj0, gi1, gj1 = self._cells(dst)

        def h(i: int, j: int) -> float:
            dx = gi0 - 1 - i if i < gi0 - 1 else (i - gi1 - 1 if i > gi1 + 1 else 0)
            dy = gj0 - 1 - j if j < gj0 - 1 else (j - gj1 - 1 if j > gj1 + 1 else 0)
            return float(dx + dy)

        best: dict[tuple[int, int], float] = {}
        came: dict[tuple[int, int], tuple[int, int] | None] = {}
        heap: list[tuple[float, int, float, int, int]] = []
        seq = 0
        for cell, d in starts:
            key = (cell, d)
            best[key] = 0.0
            came[key] = None
            heapq.heappush(heap, (h(cell % nx, cell // nx), seq, 0.0, cell, d))
            seq += 1
        used = self.used
        end: tuple[int, int] | None = None
        while heap:
            _, _, cost, cell, d = heapq.heappop(heap)
            if cost > best.get((cell, d), math.inf):
                continue
            if cell in goals:
                end = (cell, d)
                break
            i, j = cell % nx, cell // nx
            for nd, (di, dj) in enumerate(_DIRS):
                if (nd + 2) % 4 == d:
                    continue
                ni, nj = i + di, j + dj
                if not (0 <= ni < nx and 0 <= nj < ny and wi0 <= ni <= wi1 and wj0 <= nj <= wj1):
                    continue
                nc = nj * nx + ni
                if blocked[nc]:
                    continue
                c = cost + 1.0 + (_TURN if nd != d else 0.0) + _USED * used[nc] + (
                    _BORDER if edge[nc] else 0.0)
                key = (nc, nd)
                if c < best.get(key, math.inf):
                    best[key] = c
                    came[key] = (cell, d)
                    heapq.heappush(heap, (c + _GREED * h(ni, nj), seq, c, nc, nd))
                    seq += 1
        if end is None:
            return None
        cells: list[int] = []
        node: tuple[int, int] | None = end
        while node is not None:
            cells.append(node[0])
            node = came[node]
        cells.reverse()
        for c in cells:  # this route's cells cost the next routes more, and so (less) do their neighbours
            used[c] = 2
            for n in (c - 1, c + 1, c - nx, c + nx):
                if 0 <= n < len(used) and not used[n]:
                    used[n] = 1
        pts = [((c % nx) * g + g / 2, (c // nx) * g + g / 2) for c in cells]
        first_side = dict(starts)[cells[0]]
        pts.insert(0, _onto(src, pts[0], first_side))
        pts.append(_onto(dst, pts[-1], goals[cells[-1]]))
        return _simplify(pts)

    def _ring(self, b: Box, blocked: bytearray) -> list[tuple[int, int]]:
        """The free cells just outside ``b``'s cells, each with the side it is on (an index of _DIRS: the
        direction that leaves the box)."""
        nx, ny = self.nx, self.ny
        i0, j0, i1, j1 = self._cells(b)
        out: list[tuple[int, int]] = []
        g = self.g
        # only cells straight across from the box's own outline (not its inflated corners): the first and
        # last segments then leave and reach the box square
        cols = [i for i in range(i0, i1 + 1) if b.x + 3 <= i * g + g / 2 <= b.x + b.w - 3]
        rows = [j for j in range(j0, j1 + 1) if b.y + 3 <= j * g + g / 2 <= b.y + b.h - 3]
        sides = (
            (0, [(i1 + 1, j) for j in rows]),
            (1, [(i, j1 + 1) for i in cols]),
            (2, [(i0 - 1, j) for j in rows]),
            (3, [(i, j0 - 1) for i in cols]),
        )
        for side, cells in sides:
            for i, j in cells:
                if 0 <= i < nx and 0 <= j < ny and not blocked[j * nx + i]:
                    out.append((j * nx + i, side))
        return out


def _onto(b: Box, p: Point, side: int) -> Point:
    """The point of ``b``'s outline straight across from ``p``, which is outside on ``side``."""
    x = min(max(p[0], b.x + 3), b.x + b.w - 3)
    y = min(max(p[1], b.y + 3), b.y + b.h - 3)
    if b.round:
        r = b.w / 2
        cx, cy = b.x + r, b.y + r
        dx, dy = p[0] - cx, p[1] - cy
        d = math.hypot(dx, dy) or 1.0
        return cx + dx / d * r, cy + dy / d * r
    if side == 0:
        return b.x + b.w, y
    if side == 1:
        return x, b.y + b.h
    if side == 2:
        return b.x, y
    return x, b.y


def _simplify(pts: list[Point]) -> list[Point]:
    """Drop the points in the middle of straight runs (and a first/last jog shorter than a cell)."""
    out: list[Point] = []
    for p in pts:
        if out and abs(out[-1][0] - p[0]) < 1e-9 and abs(out[-1][1] - p[1]) < 1e-9:
            continue
        while len(out) >= 2 and _collinear(out[-2], out[-1], p):
            out.pop()
        out.append(p)
    return out


def _collinear(a: Point, b: Point, c: Point) -> bool:
    return abs((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])) < 1e-6
