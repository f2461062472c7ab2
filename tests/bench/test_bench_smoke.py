"""Smoke test of ``bench/``: every section runs at a tiny size and the report is written.

No timing assertions (the numbers at these sizes mean nothing); the point is that the benchmark code
cannot rot unnoticed. PostgreSQL sections run when the test database answers, else they are reported
as skipped — which is also checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transitions")
pytest.importorskip("statemachine")
pytest.importorskip("sismic")
pytest.importorskip("matplotlib")
pytest.importorskip("moto")

from bench import __main__ as bench_main
from bench import report
from bench._util import machine_info


def test_every_section_runs_and_reports(tmp_path: Path) -> None:
    results = bench_main.run(bench_main.TINY, log=lambda *a: None)
    errors = {k: v["error"] for k, v in results.items() if isinstance(v, dict) and "error" in v}
    assert not errors, errors
    for chart in ("chart1", "chart2"):
        assert results["engine"][chart]["series"]
    assert results["dynamo"]["paths"]["state-only, steady state"]["worker"]["requests"] >= 1
    assert results["dynamo_local"]["paths"]["state-only, steady state"]["all"]["requests"] >= 1
    assert results["queue"]["paths"]["queue sqlite NORMAL"]["series"]  # harel's rows too, if its venv is there
    assert set(results["telemetry"]["series"]) == {"extra absent", "tracing off (installed, no provider)",
                                                   "tracing on (SDK, spans dropped)"}
    text = report.write(tmp_path, results, machine_info(), "python -m bench --tiny")
    assert "### Targets" in text
    assert (tmp_path / "README.md").exists()
    assert (tmp_path / "engine.png").exists()
    assert (tmp_path / "cost.png").exists()


def test_cli_rejects_unknown_section() -> None:
    with pytest.raises(SystemExit):
        bench_main.main(["--only", "nope"])
