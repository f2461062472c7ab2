"""Transition labels sit where they can be read: never over a state's box, never over another label, never
past the picture's edge (a label that does not fit on its line goes beside it)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from durastate.engine import load_definition
from durastate.engine.definition import Definition
from durastate.render.layout import Rect, Text, layout

ROOT = Path(__file__).resolve().parents[2]
GUARDED = """\
id: guarded
initial: review
states:
  review:
    on:
      decide:
        - {target: approved, guard: {and: [{gt: ["$event.score", 700]}, {le: [{len: "$context.flags"}, 0]}]}}
        - {target: manual, guard: {in: ["$event.region", ["eu-west-1", "us-east-1", "ap-south-1"]]}}
        - {target: rejected}
      escalate: {target: manual, guard: {in_state: review}}
  manual:
    on:
      approve: {target: approved, guard: {ge: [{mul: ["$event.limit", 2]}, "$context.amount"]}}
      reject: rejected
  approved: {type: final}
  rejected: {type: final}
"""


def labels(defn: Definition) -> list[tuple[str, tuple[float, float, float, float]]]:
    lay = layout(defn)
    shapes = lay.edges
    return [(str(t.text), (r.x, r.y, r.w, r.h)) for r, t in itertools.pairwise(shapes)
            if isinstance(r, Rect) and r.role == "label-bg" and isinstance(t, Text)]


def overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


@pytest.mark.parametrize("source", ["examples/order.yaml", "examples/payment.yaml", "examples/batch.yaml",
                                    "examples/upload.yaml", "guarded"])
def test_labels_cross_no_state_and_no_other_label(source: str, tmp_path: Path) -> None:
    if source == "guarded":
        (tmp_path / "guarded.yaml").write_text(GUARDED)
        defn = load_definition(tmp_path / "guarded.yaml")
    else:
        defn = load_definition(ROOT / source)
    lay = layout(defn)
    boxes = [(g.path, (g.x, g.y, g.w, g.h)) for g in lay.states() if g.kind in ("atomic", "final", "history")]
    placed = labels(defn)
    assert placed
    for text, box in placed:
        assert box[0] >= 0 and box[1] >= 0 and box[0] + box[2] <= lay.width and box[1] + box[3] <= lay.height
        crossed = [path for path, state in boxes if overlap(box, state)]
        assert not crossed, f"label {text!r} is drawn over {crossed}"
    for i, (text, box) in enumerate(placed):
        for other, box2 in placed[i + 1:]:
            assert not overlap(box, box2), f"labels {text!r} and {other!r} overlap"
    assert not any("{'" in text or "':" in text for text, _ in placed)  # guards read as written
