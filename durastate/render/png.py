"""A :class:`~durastate.render.layout.Layout` drawn with Pillow (the ``cli`` extra) as PNG bytes.

The same shapes and colours as the SVG, for places that show no SVG (chat tools, some issue trackers).
Pillow is imported when a picture is drawn, so the rest of ``durastate.render`` needs nothing but the core
install; without it the error names the extra to install.
"""

from __future__ import annotations

import io
import itertools
import math
from functools import cache
from typing import TYPE_CHECKING, Any

from durastate.errors import DurastateError
from durastate.render.layout import Circle, Layout, Line, Rect, Shape, StateGroup, Text, text_width
from durastate.viz import PARENT_COLOURS, STATUS_COLOURS

if TYPE_CHECKING:
    from PIL import ImageDraw, ImageFont

__all__ = ["MissingPillow", "to_png"]

INK = "#1f2937"
LINE = "#475569"
NOTE = "#475569"


class MissingPillow(DurastateError):
    """PNG output needs Pillow, which comes with the ``cli`` extra."""

    def __init__(self) -> None:
        super().__init__('PNG output needs Pillow: pip install "durastate[png]" (or write SVG: --format svg)')


def _pil() -> Any:
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise MissingPillow() from None
    return Image, ImageDraw, ImageFont


@cache
def _font(size: int, bold: bool) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's bundled sans-serif at ``size`` pixels (DejaVu Sans if the system has it, for bold)."""
    _, _, image_font = _pil()
    if bold:
        for name in ("DejaVuSans-Bold.ttf", "Arial Bold.ttf"):
            try:
                return image_font.truetype(name, size)  # type: ignore[no-any-return]
            except OSError:
                continue
    return image_font.load_default(size=size)  # type: ignore[no-any-return]


class _Painter:
    def __init__(self, draw: ImageDraw.ImageDraw, scale: float, status: str) -> None:
        self.d = draw
        self.k = scale
        self.status = status

    def p(self, v: float) -> float:
        return v * self.k

    def group(self, g: StateGroup) -> None:
        fill, stroke, width = "#ffffff", LINE, 1.5
        if g.active:
            fill, stroke = STATUS_COLOURS.get(self.status, STATUS_COLOURS["running"])
            width = 3.0
        elif g.active_parent:
            fill, stroke = PARENT_COLOURS
            width = 2.0
        for s in g.shapes:
            self.shape(s, fill, stroke, width)
        for c in g.children:
            self.group(c)

    def shape(self, s: Shape, fill: str = "#ffffff", stroke: str = LINE, width: float = 1.5) -> None:
        d, p = self.d, self.p
        if isinstance(s, Rect):
            if s.role == "region":
                return
            box = [p(s.x), p(s.y), p(s.x + s.w), p(s.y + s.h)]
            if s.role == "label-bg":
                d.rounded_rectangle(box, radius=p(s.rx), fill="#ffffff")
                return
            d.rounded_rectangle(box, radius=p(s.rx), fill=fill, outline=stroke, width=max(1, round(p(width))))
        elif isinstance(s, Circle):
            box = [p(s.cx - s.r), p(s.cy - s.r), p(s.cx + s.r), p(s.cy + s.r)]
            if s.filled:
                d.ellipse(box, fill=INK)
            else:
                d.ellipse(box, fill=fill, outline=stroke, width=max(1, round(p(width))))
        elif isinstance(s, Line):
            self.line(s)
        else:
            self.text(s)

    def line(self, s: Line) -> None:
        d, p = self.d, self.p
        pts = [(p(x), p(y)) for x, y in s.points]
        w = max(1, round(p(1.3)))
        if s.dashed:
            for (x0, y0), (x1, y1) in itertools.pairwise(pts):
                length = math.hypot(x1 - x0, y1 - y0)
                dash, gap = p(6), p(4)
                t = 0.0
                while t < length:
                    e = min(t + dash, length)
                    d.line([(x0 + (x1 - x0) * t / length, y0 + (y1 - y0) * t / length),
                            (x0 + (x1 - x0) * e / length, y0 + (y1 - y0) * e / length)], fill=LINE, width=w)
                    t = e + gap
            return
        d.line(pts, fill=LINE, width=w, joint="curve")
        if s.arrow and len(pts) >= 2:
            (x0, y0), (x1, y1) = pts[-2], pts[-1]
            ang = math.atan2(y1 - y0, x1 - x0)
            size = p(8)
            left = (x1 - size * math.cos(ang - 0.4), y1 - size * math.sin(ang - 0.4))
            right = (x1 - size * math.cos(ang + 0.4), y1 - size * math.sin(ang + 0.4))
            d.polygon([(x1, y1), left, right], fill=LINE)

    def text(self, s: Text) -> None:
        size = round(self.p(s.size))
        font = _font(size, s.bold)
        colour = NOTE if s.role in ("note", "region-title") else INK
        # the layout's widths are estimates: a line that would not fit is drawn smaller
        limit = self.p(text_width(s.text, s.size)) * 1.05
        while size > 6 and self.d.textlength(s.text, font=font) > limit:
            size -= 1
            font = _font(size, s.bold)
        anchor = "mm" if s.anchor == "middle" else "lm"
        self.d.text((self.p(s.x), self.p(s.y)), s.text, fill=colour, font=font, anchor=anchor)


def to_png(lay: Layout, scale: float = 2.0) -> bytes:
    """The PNG bytes of ``lay``, ``scale`` device pixels per layout unit (2: sharp on high-DPI screens).

    The image is ``round(lay.width * scale)`` by ``round(lay.height * scale)`` pixels.
    """
    if not scale > 0 or scale > 8:
        raise ValueError(f"scale must be more than 0 and at most 8, got {scale!r}")
    image_mod, draw_mod, _ = _pil()
    img = image_mod.new("RGB", (round(lay.width * scale), round(lay.height * scale)), "#ffffff")
    painter = _Painter(draw_mod.Draw(img), scale, lay.status)
    for s in lay.root.shapes:
        painter.shape(s)
    for c in lay.root.children:
        painter.group(c)
    for s in lay.edges:
        painter.shape(s)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()
