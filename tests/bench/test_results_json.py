"""The committed ``bench/results/results.json`` is enough to re-render the report (a fresh clone has no
pickle): reading it back gives the same report data, series included."""

from __future__ import annotations

import json
from pathlib import Path

from bench.report import Series, from_jsonable, jsonable

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "results.json"


def test_results_json_reads_back_into_what_the_report_renders() -> None:
    data = json.loads(RESULTS.read_text(encoding="utf-8"))
    restored = from_jsonable(data)
    assert json.loads(json.dumps(jsonable(restored))) == data
    series = restored["engine"]["chart1"]["series"]
    assert series and all(isinstance(s, Series) and s.rates for s in series.values())
    assert 1 in restored["postgres"] and 8 in restored["postgres"]  # connection counts are int keys again
