"""A definitions folder's ``.scxml`` and ``.xstate.json`` files are loaded as definitions, converted when the
folder is read (:mod:`durastate.runtime.definitions`), by the CLI and the runtime alike; a construct that
does not map makes the file invalid, reported with its element and line, like any definition issue."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from durastate.cli.app import app
from durastate.engine import DefinitionRegistry
from durastate.engine.model import Event
from durastate.errors import DefinitionError
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.definitions import folder_files, load_folder
from durastate.store.sqlite import SqliteStore

from .charts import LIGHT_XSTATE, ORDER_SCXML, PAYMENT_SCXML, SCRIPTED_SCXML, TURNSTILE_SCXML

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    defs = tmp_path / "definitions"
    defs.mkdir()
    (defs / "turnstile.scxml").write_text(TURNSTILE_SCXML)
    (defs / "light.xstate.json").write_text(LIGHT_XSTATE)
    (defs / "plain.json").write_text(json.dumps({"id": "plain", "initial": "a", "states": {"a": {"type": "final"}}}))
    return defs


def test_the_folder_loads_scxml_and_xstate_files_beside_yaml_and_json(folder: Path) -> None:
    registry = load_folder(folder)
    assert registry.ids() == ["light", "plain", "turnstile"]
    assert [p.name for p in folder_files(folder)] == ["light.xstate.json", "plain.json", "turnstile.scxml"]
    assert registry.get("light").states["red"].on_done[0].target == "off"


def test_a_machine_without_an_id_is_named_after_its_file(tmp_path: Path) -> None:
    (tmp_path / "door.xstate.json").write_text('{"initial": "shut", "states": {"shut": {"type": "final"}}}')
    assert load_folder(tmp_path).ids() == ["door"]


def test_the_engine_alone_reads_only_yaml_and_json(folder: Path) -> None:
    """Without the runtime's loaders the engine takes ``light.xstate.json`` for a durastate JSON definition
    (and finds it invalid): the converters are the caller's to give, never imported by the engine."""
    (folder / "light.xstate.json").unlink()
    assert DefinitionRegistry.from_dir(folder).ids() == ["plain"]


def test_an_imported_chart_runs_durably_from_the_folder(folder: Path, tmp_path: Path) -> None:
    """Each event in a runtime of its own (a process each), the state kept in the SQLite file between them."""
    db = tmp_path / "store.db"
    for name, data in (("start", None), ("coin", {"amount": 60}), ("coin", {"amount": 40}), ("push", {})):
        store = SqliteStore(str(db))
        rt = LocalRuntime(store, load_folder(folder), clock=ManualClock(1_700_000_000.0))
        if data is None:
            rt.start("turnstile", execution_id="gate")
        else:
            rt.send("gate", Event(name=name, data=data))
        rt.run_until_idle()
        store.close()
    exe = SqliteStore(str(db)).load("gate")
    assert exe is not None
    assert (exe.active_path, exe.context) == ("locked", {"paid": 0, "passes": 1})


def test_a_construct_that_does_not_map_fails_the_folder_with_its_element_and_line(folder: Path) -> None:
    (folder / "scripted.scxml").write_text(SCRIPTED_SCXML)
    (folder / "broken.xstate.json").write_text('{"id": "broken", "initial": "a", "states": {"a": '
                                               '{"entry": ["trackVisit"]}}}')
    with pytest.raises(DefinitionError) as caught:
        load_folder(folder)
    issues = caught.value.issues
    assert any(i.startswith("scripted.scxml: scxml/state[@id='s']/onentry[1]/script[1] (line 3): <script>")
               for i in issues), issues
    assert any(i.startswith("broken.xstate.json: states.a.entry[0]") for i in issues), issues


def test_validate_checks_imported_files_as_it_checks_yaml(folder: Path) -> None:
    (folder / "scripted.scxml").write_text(SCRIPTED_SCXML)
    runner = CliRunner()
    out = runner.invoke(app, ["validate", str(folder), "--json"], prog_name="durastate")
    assert out.exit_code == 1, out.stdout
    rows = {Path(r["file"]).name: r for r in json.loads(out.stdout)}
    assert {n: r["valid"] for n, r in rows.items()} == {
        "light.xstate.json": True, "plain.json": True, "scripted.scxml": False, "turnstile.scxml": True}
    assert rows["scripted.scxml"]["issues"][0].startswith("scxml/state[@id='s']/onentry[1]/script[1] (line 3)")
    one = runner.invoke(app, ["validate", str(folder / "turnstile.scxml")], prog_name="durastate")
    assert one.exit_code == 0 and "turnstile (3 states)" in one.stdout


def test_two_files_with_one_id_clash_whatever_their_format(folder: Path) -> None:
    (folder / "turnstile.yaml").write_text("id: turnstile\ninitial: a\nstates: {a: {type: final}}\n")
    with pytest.raises(DefinitionError, match=r"also defined by turnstile\.scxml"):
        load_folder(folder)


def test_a_chart_brings_the_charts_it_invokes_and_they_run_as_invoked_children(tmp_path: Path) -> None:
    """``order.scxml`` invokes ``payment.scxml`` (beside it, also a chart of the folder in its own right) and
    a chart written inline: the folder holds one definition more per ``<invoke>``, named after the order."""
    (tmp_path / "order.scxml").write_text(ORDER_SCXML)
    (tmp_path / "payment.scxml").write_text(PAYMENT_SCXML)
    registry = load_folder(tmp_path)
    assert registry.ids() == ["order", "order~courier", "order~payment", "payment"]
    rt = LocalRuntime(SqliteStore(str(tmp_path / "store.db")), registry, clock=ManualClock(1_700_000_000.0))
    rt.start("order", execution_id="o-1")
    rt.run_until_idle()
    rt.send("o-1~1", Event(name="approve"))  # the payment, a child execution of its own
    rt.run_until_idle()
    exe = rt.get("o-1")
    assert exe is not None
    assert (exe.status, exe.outcome, exe.context) == ("finished", "delivered", {"amount": 30, "receipt": 30})
    checked = CliRunner().invoke(app, ["validate", str(tmp_path / "order.scxml")], prog_name="durastate")
    assert checked.exit_code == 0, checked.stdout


def test_a_definition_written_with_the_id_of_an_invoked_chart_clashes_with_the_chart(tmp_path: Path) -> None:
    (tmp_path / "order.scxml").write_text(ORDER_SCXML)
    (tmp_path / "payment.scxml").write_text(PAYMENT_SCXML)
    (tmp_path / "mine.yaml").write_text("id: order~courier\ninitial: a\nstates: {a: {type: final}}\n")
    with pytest.raises(DefinitionError) as caught:
        load_folder(tmp_path)
    assert any(i.startswith("mine.yaml: id: 'order~courier' is also defined by order.scxml")
               for i in caught.value.issues), caught.value.issues


def test_a_folder_of_yaml_does_not_import_the_converters(tmp_path: Path) -> None:
    """The handlers' cold start: the converters are imported only when the folder holds a chart to convert."""
    defs = tmp_path / "defs"
    defs.mkdir()
    (defs / "a.yaml").write_text("id: a\ninitial: x\nstates: {x: {type: final}}\n")
    code = ("import sys; from durastate.runtime.aws import build_runtime; "
            "from durastate.runtime.definitions import load_folder; "
            f"load_folder({str(defs)!r}); print('durastate.importers' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert run.stdout.strip() == "False"
    (defs / "b.scxml").write_text(TURNSTILE_SCXML)
    code = code.replace("'durastate.importers' in", "'durastate.importers.scxml' in")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert run.stdout.strip() == "True"
