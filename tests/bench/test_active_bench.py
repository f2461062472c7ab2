"""The active-executions benchmark runs end to end at tiny sizes and reports both workers (numbers
meaningless here)."""

from __future__ import annotations

from bench import active
from bench._util import machine_info


def test_the_active_executions_bench_reports_each_worker_at_each_size() -> None:
    res = active.run(events=10, repeats=1, sizes=(64, 65))
    assert set(res["ratio_to_64"]) == set(active.MODES)
    assert all(ratios["64"] == 1.0 for ratios in res["ratio_to_64"].values())
    text = active.markdown(res, "python -m bench.active", machine_info())
    for mode in active.MODES:
        assert f"| {mode} |" in text
    assert "| 65 active |" in text
