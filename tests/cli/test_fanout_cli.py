"""A map through the command: start, serve, send to its children, and `show` printing its progress."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ._support import EXAMPLES, Outcome


def test_show_prints_a_maps_progress_until_it_is_done(cli: Callable[..., Outcome]) -> None:
    assert cli("start", "batch", "--id", "b").code == 0
    assert cli("serve", "--until-idle").code == 0
    shown = cli("show", "b")
    assert shown.code == 0, shown.stderr
    assert "charging: 3 started, 0 done, 0 failed of 5 (3 running)" in shown.stdout
    assert [line.split()[:3] for line in shown.stdout.splitlines() if line.startswith("b~")][:3] == [
        ["b~1", "map", "charging"], ["b~2", "map", "charging"], ["b~3", "map", "charging"]]

    assert cli("send", "b~2", "decline", "--data", '{"reason": "expired"}').code == 0
    assert cli("serve", "--until-idle").code == 0
    assert "charging: 4 started, 1 done, 0 failed of 5 (3 running)" in cli("show", "b").stdout

    for child in ("b~1", "b~3", "b~4"):
        assert cli("send", child, "authorize", "--data", '{"receipt": "r"}').code == 0
    assert cli("serve", "--until-idle").code == 0
    assert cli("send", "b~5", "authorize", "--data", '{"receipt": "r"}').code == 0
    assert cli("serve", "--until-idle").code == 0
    done = json.loads(cli("show", "b", "--json").stdout)
    assert done["status"] == "finished" and done["active_path"] == "settled"
    assert done["context"]["outcomes"] == ["paid", "declined", "paid", "declined", "paid"]
    assert "maps" not in done  # the progress goes with the state


def test_validate_explores_every_order_in_which_a_maps_children_end(cli: Callable[..., Outcome]) -> None:
    out = cli("validate", str(EXAMPLES / "batch.yaml"), "--explore", "5000")
    assert out.code == 0, out.stdout + out.stderr
    assert "explored 90 configurations (all of them)" in out.stdout
    assert "note:" not in out.stdout  # what the map keeps ($event.outcome) comes from its children's ends


def test_validate_names_a_map_of_a_definition_not_among_the_files(cli: Callable[..., Outcome]) -> None:
    out = cli("validate", str(EXAMPLES / "batch.yaml"), str(EXAMPLES / "order.yaml"))
    assert "states.charging.map.invoke.definition: no definition 'payment' among the files checked" in out.stdout


def test_show_says_no_child_runs_once_the_execution_ended_in_the_map(cli: Callable[..., Outcome]) -> None:
    assert cli("start", "batch", "--id", "c").code == 0
    assert cli("serve", "--until-idle").code == 0
    assert cli("cancel", "c").code == 0
    assert cli("serve", "--until-idle").code == 0
    shown = cli("show", "c").stdout
    assert "charging: 3 started, 0 done, 0 failed of 5 (the execution ended: none running)" in shown
    assert [json.loads(cli("show", f"c~{n}", "--json").stdout)["status"] for n in (1, 2, 3)] == ["cancelled"] * 3


def test_validate_refuses_a_bad_tolerate_percentage_and_accepts_a_good_one(
        cli: Callable[..., Outcome], tmp_path: Path) -> None:
    text = (EXAMPLES / "batch.yaml").read_text()
    assert "tolerate: 1" in text
    path = tmp_path / "batch.yaml"
    path.write_text(text.replace("tolerate: 1", 'tolerate: "150%"'))
    bad = cli("validate", str(path))
    assert bad.code == 1
    assert "map.tolerate: must be a whole number of failed children from 0 (e.g. 3) or a percentage" in bad.stdout
    path.write_text(text.replace("tolerate: 1", 'tolerate: "20%"'))
    good = cli("validate", str(path))
    assert good.code == 0, good.stdout



def test_a_maps_progress_line_counts_the_items_waiting_for_their_retry() -> None:
    from durastate.cli.output import map_progress
    from durastate.engine.model import MapProgress

    progress = MapProgress(total=5, started=3, done=1, retries=[{"index": 0, "attempt": 2, "item": 120,
                                                                 "at": 1.0}])
    assert map_progress("charging", progress) == (
        "charging: 3 started, 1 done, 0 failed of 5 (1 running, 1 waiting to be retried)")
