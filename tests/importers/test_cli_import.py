"""``durastate import``: what a user runs, end to end, on a real SQLite file.

An imported chart is an ordinary definition file: ``validate`` accepts it and ``start``/``send``/``serve``
run it durably, each command its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from durastate.cli.app import app

from .charts import ORDER_SCXML, PAYMENT_SCXML
from .conftest import HERE

DOOR = """<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="door" datamodel="ecmascript" initial="closed">
  <datamodel><data id="opened" expr="0"/></datamodel>
  <state id="closed">
    <transition event="open" cond="_event.data.code == 1234" target="open">
      <assign location="opened" expr="opened + 1"/>
    </transition>
    <transition event="open" target="closed"><log label="refused" expr="_event.data.code"/></transition>
  </state>
  <state id="open">
    <transition event="close" target="closed"/>
    <transition event="lock" target="locked"/>
  </state>
  <final id="locked"/>
</scxml>
"""


def _durastate(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("durastate")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "durastate.cli"]
    env = {**os.environ, "DURASTATE_STORE": f"sqlite:///{tmp / 'durastate.db'}",
           "DURASTATE_DEFINITIONS": str(tmp / "definitions")}
    env.pop("DURASTATE_DEBUG", None)
    return subprocess.run([*command, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_an_imported_scxml_chart_runs_durably_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "door.scxml").write_text(DOOR, encoding="utf-8")
    steps = [
        ("import", "scxml", "door.scxml", "-o", "definitions/door.yaml"),
        ("validate",),
        ("start", "door", "--id", "front"),
        ("serve", "--until-idle"),
        ("send", "front", "open", "--data", '{"code": 1}'),
        ("send", "front", "open", "--data", '{"code": 1234}'),
        ("serve", "--until-idle"),
        ("send", "front", "lock"),
        ("serve", "--until-idle"),
    ]
    for args in steps:
        done = _durastate(tmp_path, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    shown = json.loads(_durastate(tmp_path, "show", "front", "--json").stdout)
    assert (shown["status"], shown["outcome"], shown["context"]) == ("finished", "locked", {"opened": 1})


def test_a_chart_that_invokes_others_is_imported_with_them_and_runs_through_the_cli(tmp_path: Path) -> None:
    """The order invokes the payment chart (a file beside it) and a courier chart written inline: the import
    writes one definition file more for each, the child waits durably for its own event, and the order
    takes what the child sends (after its <finalize>) and its done.invoke."""
    (tmp_path / "order.scxml").write_text(ORDER_SCXML, encoding="utf-8")
    (tmp_path / "payment.scxml").write_text(PAYMENT_SCXML, encoding="utf-8")
    imported = _durastate(tmp_path, "import", "scxml", "order.scxml", "-o", "definitions/order.yaml")
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr.splitlines() == [
        "wrote definitions/order.yaml (definition 'order')",
        "wrote definitions/order~payment.yaml (definition 'order~payment', invoked by 'order')",
        "wrote definitions/order~courier.yaml (definition 'order~courier', invoked by 'order')"]
    for args in [("validate",), ("start", "order", "--id", "o-1"), ("serve", "--until-idle"),
                 ("send", "o-1~1", "approve"), ("serve", "--until-idle")]:
        done = _durastate(tmp_path, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    shown = json.loads(_durastate(tmp_path, "show", "o-1", "--json").stdout)
    assert (shown["status"], shown["outcome"], shown["context"]) == ("finished", "delivered",
                                                                     {"amount": 30, "receipt": 30})


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_an_import_that_left_something_out_writes_nothing_and_fails(runner: CliRunner, tmp_path: Path) -> None:
    source = HERE / "w3c" / "test552.scxml"
    result = runner.invoke(app, ["import", "scxml", str(source), "-o", "out.yaml"])
    assert result.exit_code == 1
    assert ("scxml/datamodel[1]/data[@id='Var1'] (line 10): <data src> is not supported (nothing is fetched): give "
            "the value inline") in result.stderr
    assert "nothing written" in result.stderr
    assert not (tmp_path / "out.yaml").exists()


def test_allow_partial_writes_the_rest_with_the_issues_on_top(runner: CliRunner, tmp_path: Path) -> None:
    source = HERE / "w3c" / "test552.scxml"
    result = runner.invoke(app, ["import", "scxml", str(source), "-o", "defs/t.yaml", "--allow-partial"])
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "defs" / "t.yaml").read_text(encoding="utf-8")
    assert text.startswith("# Imported from test552.scxml with 1 construct(s) not mapped:\n#   scxml/datamodel")
    checked = runner.invoke(app, ["validate", "defs/t.yaml"])
    assert checked.exit_code == 0, checked.stdout


def test_without_output_the_invoked_charts_are_printed_after_the_chart(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "order.scxml").write_text(ORDER_SCXML, encoding="utf-8")
    (tmp_path / "payment.scxml").write_text(PAYMENT_SCXML, encoding="utf-8")
    result = runner.invoke(app, ["import", "scxml", "order.scxml"])
    assert result.exit_code == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert [d["id"] for d in documents] == ["order", "order~payment", "order~courier"]
    assert not list(tmp_path.glob("*.yaml"))


def test_xstate_import_prints_yaml(runner: CliRunner) -> None:
    result = runner.invoke(app, ["import", "xstate", str(HERE / "xstate" / "toggle.json")])
    assert result.exit_code == 0
    assert result.stdout.startswith("id: toggle\ninitial: Inactive\ncontext:\n  count: 0\nstates:\n")


def test_a_hostile_document_is_one_error_line(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "evil.scxml").write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><scxml/>')
    result = runner.invoke(app, ["import", "scxml", "evil.scxml"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: evil.scxml: invalid definition: (document) line 1: refused: a DOCTYPE declaration: SCXML needs "
        "none, and its entities (internal or external) are never expanded here; remove it"]
