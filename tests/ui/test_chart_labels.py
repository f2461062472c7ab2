"""The console's chart labels a guarded transition with the guard as written (``event.score > 700``,
``in_state(review)``), never a Python dict, and lays the labels out clear of the states: measured in the
browser, on the chart it draws."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.render.test_labels import GUARDED

from .conftest import Served, fill

pytestmark = pytest.mark.slow

BOXES = """svg => {
  const box = e => { const b = e.getBBox(); return [b.x, b.y, b.width, b.height]; };
  return {
    states: [...svg.querySelectorAll("g.state.atomic > rect.box, g.state.final > rect.box")].map(box),
    labels: [...svg.querySelectorAll("rect.label-bg")].map(box),
    texts: [...svg.querySelectorAll("text.edge-label")].map(t => t.textContent),
  };
}"""


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_guard_labels_read_as_written_and_cross_no_state(
        sqlite_url: str, tmp_path: Path, serve_console: Callable[..., Served], page: Any) -> None:
    defs = tmp_path / "definitions"
    defs.mkdir()
    (defs / "guarded.yaml").write_text(GUARDED)
    fill(sqlite_url, [])  # an empty store
    served = serve_console(sqlite_url, "--definitions", str(defs))
    page.goto(served.url + "/definitions/guarded")
    svg = page.locator("#chart svg")
    expect(svg).to_have_count(1)
    drawn = svg.evaluate(BOXES)
    assert "escalate [in_state(review)]" in drawn["texts"]
    assert "decide [(event.score > 700) and (len(context.flags) <= 0)]" in drawn["texts"]
    assert not [t for t in drawn["texts"] if "{'" in t or "':" in t]
    assert drawn["states"] and drawn["labels"]
    for label in drawn["labels"]:
        assert not [s for s in drawn["states"] if overlap(label, s)]
    for i, label in enumerate(drawn["labels"]):
        assert not [o for o in drawn["labels"][i + 1:] if overlap(label, o)]
