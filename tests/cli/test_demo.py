"""``make demo`` (``python -m durastate.demo``) runs the example through the CLI to the expected outcomes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ._support import ROOT


@pytest.mark.slow
def test_demo_runs_every_order_to_its_outcome(tmp_path: Path) -> None:
    keep = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "durastate.demo", "--dir", str(keep)], capture_output=True,
                          text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for line in ("✓ o-1001: fulfilled", "✓ o-1002: payment_failed", "✓ o-1003: payment_failed",
                 "✓ o-1004: abandoned"):
        assert line in proc.stdout
    assert "$ durastate serve --until-idle --advance 3700" in proc.stdout
    diagram = ElementTree.fromstring((keep / "o-1001.svg").read_text())
    active = {g.get("data-path") for g in diagram.iter("{http://www.w3.org/2000/svg}g")
              if "active" in (g.get("class") or "").split()}
    assert active == {"processing.fulfilment.packing.picking", "processing.fulfilment.shipping.awaiting_label"}
    assert f"open {(keep / 'o-1001.svg').as_uri()} in a browser" in proc.stdout
    assert (keep / "durastate.db").exists()
