"""``durastate history`` (every step, JSON Lines) and the replay check, ``validate --replay FILE`` and
``validate --from-store``, through the real command."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.model import Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.definitions import load_file
from durastate.store.sqlite import SqliteStore

from ._support import Env, Outcome, assert_one_line_error

TALLY = """\
id: tally
initial: idle
context: {count: 0}
states:
  idle:
    on:
      inc:
        actions:
          - assign: {count: {add: ["$context.count", 1]}}
          - send: {event: counted, data: {n: "$context.count"}}
      stop: done
  done: {type: final, outcome: ok}
"""

Cli = Callable[..., Outcome]


@pytest.fixture
def kept(env: Env, monkeypatch: pytest.MonkeyPatch) -> Env:
    """The test's store with whole histories kept (``?history=1``), a tally run of 250 incs and a stop."""
    monkeypatch.setenv("DURASTATE_STORE", f"{env.store_url}?history=1")
    (env.definitions / "tally.yaml").write_text(TALLY)
    return env


def run_tally(cli: Cli, incs: int) -> None:
    assert cli("start", "tally", "--id", "t-1", "-q").code == 0
    for n in range(incs):
        assert cli("send", "t-1", "inc", "--id", f"e{n}", "-q").code == 0
    assert cli("send", "t-1", "stop", "--id", "e-stop", "-q").code == 0
    assert cli("serve", "--until-idle", "-q").code == 0


def test_history_prints_every_step_as_json_lines(kept: Env, cli: Cli) -> None:
    # More steps than the ring's 200, applied in-process (210 `send` commands would take long).
    registry = DefinitionRegistry()
    registry.register(load_file(kept.definitions / "tally.yaml"))
    store = SqliteStore(kept.db, history=True)
    rt = LocalRuntime(store, registry, clock=ManualClock(1_000.0))
    rt.start("tally", execution_id="t-1")
    for n in range(210):
        rt.send("t-1", Event(id=f"e{n}", name="inc"))
    rt.send("t-1", Event(id="e-stop", name="stop"))
    rt.run_until_idle()
    store.close()
    out = cli("history", "t-1", "--json")
    assert out.code == 0, out.stderr
    steps = [json.loads(line) for line in out.stdout.splitlines()]
    assert [s["index"] for s in steps] == list(range(212))
    assert steps[0]["event"] == "durastate.start" and steps[-1]["event"] == "stop"
    assert len(json.loads(cli("trace", "t-1", "--json").stdout)) == 200  # the trace: still the ring
    timeline = cli("history", "t-1").stdout
    assert "#0   start" in timeline and "#211 stop" in timeline
    assert "emits_digest" not in timeline  # what the replay needs is not for reading


def test_history_of_a_store_without_histories_warns(env: Env, cli: Cli) -> None:
    (env.definitions / "tally.yaml").write_text(TALLY)
    run_tally(cli, 2)
    out = cli("history", "t-1", "--json")
    assert out.code == 0 and len(out.stdout.splitlines()) == 4
    assert "keeps only the newest 200 steps" in out.stderr and "?history=1" in out.stderr


def test_history_of_an_unknown_execution(kept: Env, cli: Cli) -> None:
    assert cli("start", "tally", "--id", "t-1", "-q").code == 0
    assert_one_line_error(cli("history", "nope"), "nope")


def test_replay_of_the_same_definition_passes(kept: Env, cli: Cli, tmp_path: Path) -> None:
    run_tally(cli, 3)
    (tmp_path / "t-1.jsonl").write_text(cli("history", "t-1", "--json").stdout)
    out = cli("validate", str(kept.definitions / "tally.yaml"), "--replay", str(tmp_path / "t-1.jsonl"))
    assert out.code == 0, out.stdout + out.stderr
    assert "5 steps replayed, no difference" in out.stdout


def test_replay_catches_a_changed_action(kept: Env, cli: Cli, tmp_path: Path) -> None:
    run_tally(cli, 3)
    (tmp_path / "t-1.jsonl").write_text(cli("history", "t-1", "--json").stdout)
    new = tmp_path / "tally.yaml"
    new.write_text(TALLY.replace("send: {event: counted", "send: {event: tallied"))
    out = cli("validate", str(new), "--replay", str(tmp_path / "t-1.jsonl"))
    assert out.code == 1
    assert "step #1 inc (e0) would differ" in out.stdout
    assert 'emits: recorded [{"target": null, "name": "counted"}], new version [{"target": null, "name": ' \
           '"tallied"}]' in out.stdout
    assert "1 of 1 recorded history would run differently" in out.stderr


def test_from_store_is_the_deploy_gate(kept: Env, cli: Cli, tmp_path: Path) -> None:
    run_tally(cli, 2)
    new = tmp_path / "tally.yaml"
    new.write_text(TALLY.replace('add: ["$context.count", 1]', 'add: ["$context.count", 2]'))
    store = f"{kept.store_url}?history=1"
    same = cli("validate", str(kept.definitions / "tally.yaml"), "--against", store, "--from-store")
    assert same.code == 0, same.stdout + same.stderr
    out = cli("validate", str(new), "--against", store, "--from-store", "--replay-limit", "5")
    assert out.code == 1
    assert "t-1" in out.stdout and 'context: recorded {"count": [0, 1]}, new version {"count": [0, 2]}' in out.stdout


def test_replay_of_a_file_that_is_not_a_history(kept: Env, cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert_one_line_error(cli("validate", str(kept.definitions / "tally.yaml"), "--replay", str(bad)),
                          "not the JSON lines")


@pytest.mark.parametrize("content, says", [
    ("", "has no step"),
    ("{}\n", "line 1 is not a step (no event or control)"),
    ('{"index": 0, "event": "durastate.start", "at": "noon"}\n', "line 1: at is not a number"),
    ('{"index": 0, "event": 5, "at": 1}\n', "line 1 is not a step (no event or control)"),
    ('{"index": 0, "event": "durastate.start", "at": 1}\n{"index": "one", "event": "inc", "at": 2}\n',
     "line 2: index is not a whole number"),
    ('{"index": 0, "event": "durastate.start", "at": 1, "steps": [3]}\n', "line 1: steps is not a list of steps"),
])
def test_replay_of_a_malformed_history_is_one_line_and_exit_1(kept: Env, cli: Cli, tmp_path: Path, content: str,
                                                              says: str) -> None:
    """A history file a user edited or cut by hand: refused with the line at fault, never passed as "0 steps
    replayed, no difference" (the deploy gate would let anything through) nor an unexpected error."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    assert_one_line_error(cli("validate", str(kept.definitions / "tally.yaml"), "--replay", str(bad)),
                          f"--replay {bad}", says)


def test_an_empty_trace_on_dynamodb_says_only_failed_steps_are_recorded(tmp_path: Path) -> None:
    """On AWS the trace is off unless DURASTATE_TRACE=1: only failed steps are recorded, and `trace` says so."""
    from durastate.cli.executions import no_trace_note
    from tests.store.conformance.backends import BACKENDS, BackendRequest, open_backend

    with open_backend(BACKENDS["dynamodb-moto"], BackendRequest(tmp_path, unique="notrace")) as store:
        said = no_trace_note(store, "o-1")
    assert said.startswith("no trace step recorded for o-1: on AWS only the steps that fail are recorded")
    assert "DURASTATE_TRACE=1" in said and "durastate:trace=true" in said
    assert no_trace_note(SqliteStore(tmp_path / "x.db"), "o-1") == "no trace recorded for o-1"
