"""``durastate heartbeat TASK_ID``: a long task (a shell script, a job elsewhere) reports progress through the
CLI; the heartbeat queues in the store's inbox like any event, ``durastate serve`` applies it, and ``show``
prints the task's last heartbeat. Bad input is one line of error and changes nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.tasks import TaskRequest, heartbeat_message
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.tasks import TaskRunner
from durastate.store import SqliteStore
from durastate.transport.sqlite import SqliteTransport

from ._support import CLOCK, Env, Outcome, assert_one_line_error, durastate_executable

CHART = """\
id: export
initial: exporting
states:
  exporting:
    invoke: {task: {python: "exporter:export"}, heartbeat_timeout: 1m}
    on_done: {target: exported, actions: [{assign: {rows: $event.output.rows}}]}
    on_error: {target: failed, actions: [{assign: {why: $event.error}}]}
  exported: {type: final}
  failed: {type: final}
"""

EXPORTER = """\
import json
import os
import subprocess


def export(task):
    # A long job reporting its progress the way a shell script would: through the CLI.
    for done in (50, 100):
        subprocess.run([*json.loads(os.environ["DURASTATE_EXE"]), "heartbeat", task["task_id"],
                        "--details", json.dumps({"done": done})], check=True, capture_output=True)
    return {"rows": 100}
"""


def test_a_task_heartbeats_through_the_cli_and_serve_applies_it(env: Env, durastate_proc: Callable[..., Outcome],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (env.definitions / "export.yaml").write_text(CHART)
    (env.tmp / "exporter.py").write_text(EXPORTER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(env.tmp), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("DURASTATE_EXE", json.dumps(durastate_executable()))
    assert durastate_proc("start", "export", "--id", "x1").code == 0
    out = durastate_proc("serve", "--until-idle", "-q", timeout=120)
    assert out.code == 0, out.stderr
    shown = json.loads(durastate_proc("show", "x1", "--json").stdout)
    assert (shown["active_path"], shown["context"]["rows"]) == ("exported", 100)
    trace = json.loads(durastate_proc("trace", "x1", "--json").stdout)
    beats = [t["data"]["details"] for t in trace if t["event"] == "durastate.heartbeat"]
    assert beats == [{"done": 50}, {"done": 100}]


class Accepting(TaskRunner):
    """The task's endpoint accepted the job (its answer comes later): the relay gets a first heartbeat."""

    def run(self, request: TaskRequest) -> object:
        self.request = request
        return heartbeat_message(request.task_id, {"accepted": True}, request.execution_id)[1]


def running_task(env: Env) -> tuple[LocalRuntime, str]:
    (env.definitions / "export.yaml").write_text(CHART)
    store = SqliteStore(env.db)
    runner = Accepting()
    rt = LocalRuntime(store, DefinitionRegistry([load_definition(CHART)]), SqliteTransport(store),
                      ManualClock(CLOCK), tasks=runner)
    rt.start("export", execution_id="x1")
    rt.run_until_idle()
    return rt, runner.request.task_id


def test_show_prints_the_last_heartbeat_of_a_running_task(env: Env, cli: Callable[..., Outcome]) -> None:
    rt, tid = running_task(env)
    out = cli("heartbeat", tid, "--details", '{"done": 40, "of": 100}')
    assert out.code == 0, out.stderr
    assert "queued heartbeat for x1" in out.stdout
    rt.run_until_idle()
    out = cli("show", "x1")
    assert out.code == 0, out.stderr
    assert '"done": 40, "of": 100' in out.stdout and "heartbeat 2026-01-05 10:00:00Z" in out.stdout
    assert "exporting (task heartbeat timeout)" in out.stdout
    shown = json.loads(cli("show", "x1", "--json").stdout)
    assert shown["children"][tid]["heartbeat"] == {"done": 40, "of": 100}


def test_bad_heartbeats_are_one_line_errors(env: Env, durastate_proc: Callable[..., Outcome]) -> None:
    rt, tid = running_task(env)
    assert_one_line_error(durastate_proc("heartbeat", tid, "--details", "{nope"), "--details is not valid JSON")
    assert_one_line_error(durastate_proc("heartbeat", "~" + "a" * 64), "pass the task's `execution_id` too")
    assert_one_line_error(durastate_proc("heartbeat", "nobody~1~" + "0" * 16), "nobody")
    assert_one_line_error(durastate_proc("heartbeat", tid, "--details", json.dumps({"x": "y" * 9000})),
                          "bytes of JSON")
    assert rt.run_until_idle().applied == 0  # nothing reached the inbox
