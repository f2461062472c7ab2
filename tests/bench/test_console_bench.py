"""The console benchmark runs end to end at tiny sizes and reports every page (numbers meaningless here)."""

from __future__ import annotations

from bench import console


def test_the_console_bench_reports_every_page() -> None:
    res = console.run(sizes=(70, 120), rounds=1)  # enough for a second page of 10
    assert set(res["pages"]) == set(console.PAGES)
    text = console.markdown(res, "python -m bench.console")
    for name in console.PAGES:
        assert f"| {name} |" in text
    assert "| 120 / 70 |" in text
