"""``durastate.render``: statechart pictures (SVG, PNG) laid out in Python.

The layout is checked for what a reader relies on — every state drawn, children inside their parents,
siblings apart — over every example and test definition; the SVG for what a page that embeds it relies
on (it parses, each state's ``<g>`` has its documented id, ``data-path`` and classes, the status colours
are in its style); the PNG for decoding at the promised size with the status colour painted in the
active box. ``docs/images/order.svg`` (shown in the README) must be what the current renderer draws.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from PIL import Image

from durastate.engine import load_definition
from durastate.engine.definition import Definition
from durastate.engine.model import Execution
from durastate.errors import DurastateError
from durastate.render import layout, statechart_png, statechart_svg
from durastate.render.layout import Layout, StateGroup
from durastate.viz import PARENT_COLOURS, STATUS_COLOURS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEFINITION_FILES = sorted([*EXAMPLES.glob("*.yaml"), *(ROOT / "tests" / "cli" / "defs").glob("*.yaml")])
SVG = "{http://www.w3.org/2000/svg}"
ORDER_LEAVES = ["processing.fulfilment.packing.picking", "processing.fulfilment.shipping.awaiting_label"]


def order() -> Definition:
    return load_definition(EXAMPLES / "order.yaml")


def groups(svg_text: str) -> dict[str, ElementTree.Element]:
    root = ElementTree.fromstring(svg_text)
    return {g.get("data-path", ""): g for g in root.iter(f"{SVG}g") if g.get("data-path") is not None}


def classes(el: ElementTree.Element) -> set[str]:
    return set((el.get("class") or "").split())


def _inside(inner: StateGroup, outer: StateGroup) -> bool:
    return (outer.x <= inner.x and inner.x + inner.w <= outer.x + outer.w
            and outer.y <= inner.y and inner.y + inner.h <= outer.y + outer.h)


def _apart(a: StateGroup, b: StateGroup) -> bool:
    return a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_layout_draws_every_state_inside_its_parent_and_apart_from_its_siblings(path: Path) -> None:
    defn = load_definition(path)
    lay = layout(defn)
    drawn = {g.path: g for g in lay.states()}
    assert sorted(drawn) == sorted(defn.paths)

    def check(parent: StateGroup) -> None:
        for i, child in enumerate(parent.children):
            if parent.path:  # the root is the drawing itself
                assert _inside(child, parent), (child.path, parent.path)
            assert child.x >= 0 and child.x + child.w <= lay.width and child.y + child.h <= lay.height
            for other in parent.children[i + 1:]:
                assert _apart(child, other), (child.path, other.path)
            check(child)

    check(lay.root)
    assert lay.edges, "transitions are drawn"
    # deterministic: the same input gives the same picture
    assert statechart_svg(defn) == statechart_svg(load_definition(path))


def test_svg_names_every_state_as_documented() -> None:
    defn = order()
    text = statechart_svg(defn)
    root = ElementTree.fromstring(text)
    assert classes(root) == {"statechart", "status-running"}
    assert root.get("data-definition") == "order"
    found = groups(text)
    assert set(found) == set(defn.paths)
    for path, g in found.items():
        assert g.get("id") == "state-" + path.replace(".", "-")
        assert "state" in classes(g)
    assert "parallel" in classes(found["processing.fulfilment"])
    assert "region" in classes(found["processing.fulfilment.packing"])
    assert "history" in classes(found["processing.resume_point"])
    assert "final" in classes(found["completed"])
    # nesting: a state's <g> holds its children's
    fulfilment = found["processing.fulfilment"]
    assert fulfilment in list(found["processing"]) and found["processing.fulfilment.packing"] in list(fulfilment)
    labels = [t.text for t in root.iter(f"{SVG}text")]
    for label in ("submit [context.items > 0]", "after 1h", "done [event.outcome == 'paid']", "H*", "picked"):
        assert label in labels
    assert not any("active" in classes(g) for g in found.values())


@pytest.mark.parametrize("status", list(STATUS_COLOURS))
def test_svg_marks_the_active_states_in_the_colour_of_the_status(status: str) -> None:
    exe = Execution(id="o-1", definition_id="order", status=status, active_path="processing.fulfilment")  # type: ignore[arg-type]
    text = statechart_svg(order(), exe, active=ORDER_LEAVES)
    root = ElementTree.fromstring(text)
    assert f"status-{status}" in classes(root)
    found = groups(text)
    assert {p for p, g in found.items() if "active" in classes(g)} == set(ORDER_LEAVES)
    assert {p for p, g in found.items() if "active-parent" in classes(g)} == {
        "processing", "processing.fulfilment", "processing.fulfilment.packing", "processing.fulfilment.shipping"}
    style = "".join(root.itertext())
    fill, stroke = STATUS_COLOURS[status]
    assert f".statechart.status-{status} .active > .box" in style and fill in style and stroke in style


def test_svg_escapes_text(tmp_path: Path) -> None:
    doc = tmp_path / "odd.yaml"
    doc.write_text("id: 'a&b'\ninitial: a\nstates:\n  a: {on: {'x<y&z': {target: b, guard: {lt: ['$context.n', 3]}}}}\n"
                   "  b: {type: final}\n")
    text = statechart_svg(load_definition(doc))
    root = ElementTree.fromstring(text)  # parses: & and < are escaped
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "x<y&z [context.n < 3]" in labels
    assert root.get("data-definition") == "a&b"


def test_child_status_marks_the_state_running_the_child() -> None:
    exe = Execution.model_validate({"id": "o-1", "definition_id": "order", "active_path": "processing.payment",
                                    "children": {"o-1~1": {"path": "processing.payment", "kind": "invoke"}}})
    found = groups(statechart_svg(order(), exe, {"o-1~1": "failed"}))
    assert "child-failed" in classes(found["processing.payment"])
    assert "active" in classes(found["processing.payment"])


def _box_pixel(lay: Layout, path: str, scale: float) -> tuple[int, int]:
    g = next(s for s in lay.states() if s.path == path)
    return round((g.x + 10) * scale), round((g.y + g.h - 10) * scale)  # inside the borders, clear of the text


def _hex(rgb: tuple[int, ...]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb[:3])


@pytest.mark.parametrize("status", ["running", "finished", "failed", "cancelled", "suspended"])
def test_png_decodes_at_its_size_with_the_status_colour(status: str) -> None:
    exe = Execution(id="o-1", definition_id="order", status=status, active_path="completed")  # type: ignore[arg-type]
    data = statechart_png(order(), exe, scale=2)
    img = Image.open(io.BytesIO(data))
    img.load()
    lay = layout(order(), exe)
    assert img.format == "PNG" and img.size == (round(lay.width * 2), round(lay.height * 2))
    rgb = img.convert("RGB")
    assert _hex(rgb.getpixel(_box_pixel(lay, "completed", 2))) == STATUS_COLOURS[status][0]  # type: ignore[arg-type]
    assert _hex(rgb.getpixel(_box_pixel(lay, "cart", 2))) == "#ffffff"  # type: ignore[arg-type]


def test_png_colours_the_parents_of_the_active_state() -> None:
    exe = Execution(id="o-1", definition_id="order", active_path="processing.payment")
    lay = layout(order(), exe)
    img = Image.open(io.BytesIO(statechart_png(order(), exe, scale=1))).convert("RGB")
    g = next(s for s in lay.states() if s.path == "processing")
    assert _hex(img.getpixel((round(g.x + g.w - 6), round(g.y + g.h - 6)))) == PARENT_COLOURS[0]  # type: ignore[arg-type]


def test_png_without_pillow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # what `import PIL` sees when Pillow is not installed
    with pytest.raises(DurastateError, match=r'pip install "durastate\[png\]"'):
        statechart_png(order())


def test_committed_readme_picture_is_what_the_renderer_draws() -> None:
    committed = (ROOT / "docs" / "images" / "order.svg").read_text(encoding="utf-8")
    assert committed == statechart_svg(order()), (
        "docs/images/order.svg is stale: run `durastate viz examples/order.yaml -o docs/images/order.svg`")
