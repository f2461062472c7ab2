"""The active-executions benchmark runs end to end at tiny sizes and reports both workers (numbers
meaningless here)."""

from __future__ import annotations

from bench import active

INFO = {"date (UTC)": "2026-12-01 00:00", "CPU": "test", "cores": "2",
        "load average at start (1/5/15 min)": "0/0/0", "SQLite": "3"}
"""What the report's header reads of the machine (the bench's own probe is private to it)."""


def test_the_active_executions_bench_reports_each_worker_at_each_size() -> None:
    res = active.run(events=10, repeats=1, sizes=(64, 65))
    assert set(res["ratio_to_64"]) == set(active.MODES)
    assert all(ratios["64"] == 1.0 for ratios in res["ratio_to_64"].values())
    text = active.markdown(res, "python -m bench.active", INFO)
    for mode in active.MODES:
        assert f"| {mode} |" in text
    assert "| 65 active |" in text
