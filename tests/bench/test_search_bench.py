"""The search-listing benchmark runs end to end at tiny sizes and reports every filter (numbers meaningless
here)."""

from __future__ import annotations

from bench import search


def test_the_search_bench_reports_every_filter() -> None:
    res = search.run(kinds=("sqlite",), sizes=(100, 200), rounds=1, calls=1)
    assert set(res["stores"]["sqlite"]["filters"]) == set(search.FILTERS)
    text = search.markdown(res, "python -m bench.search")
    for name in search.FILTERS:
        assert f"| {name} |" in text
    assert "| 200 / 100 |" in text
