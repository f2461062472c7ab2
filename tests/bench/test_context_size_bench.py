"""The context-size benchmark runs end to end at tiny sizes and reports each store (numbers meaningless
here)."""

from __future__ import annotations

import json

from bench import context_size

INFO = {"date (UTC)": "2026-12-01 00:00", "CPU": "test", "cores": "2",
        "load average at start (1/5/15 min)": "0/0/0", "SQLite": "3"}
"""What the report's header reads of the machine (the bench's own probe is private to it)."""


def test_the_blob_has_about_the_size_asked_for() -> None:
    for size in context_size.SIZES:
        assert 0.8 * size <= len(json.dumps(context_size.blob(size))) <= 1.1 * size


def test_the_context_size_bench_reports_each_store() -> None:
    res = context_size.run({"memory": 3, "sqlite": 3}, repeats=1, stores=("memory", "sqlite"))
    assert set(res["cpu"]) == set(res["wall"]) == {"memory", "sqlite"}
    text = context_size.markdown(res, "python -m bench.context_size", INFO)
    assert "| memory |" in text and "| sqlite |" in text and "100 KB ÷ 1 KB" in text
