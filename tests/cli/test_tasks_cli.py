"""A Python task through the real ``durastate serve`` on SQLite: the task's module is found on the
server's ``PYTHONPATH``, it runs once, its answer is routed to ``on_done``, and the summary counts it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest

from ._support import Env, Outcome

CHART = """\
id: ship
initial: booking
states:
  booking:
    invoke: {task: {python: "courier:book"}, input: {parcel: $context.parcel}, timeout: 1m}
    on_done: {target: booked, actions: [{assign: {label: $event.output.label}}]}
    on_error: {target: failed, actions: [{assign: {why: $event.error}}]}
  booked: {type: final}
  failed: {type: final}
"""

COURIER = """\
import pathlib


def book(task):
    with pathlib.Path("calls.log").open("a") as log:
        log.write(task["task_id"] + "\\n")
    return {"label": "L-" + task["input"]["parcel"]}
"""


def test_serve_runs_a_python_task_and_routes_its_answer(env: Env, durastate_proc: Callable[..., Outcome],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (env.definitions / "ship.yaml").write_text(CHART)
    (env.tmp / "courier.py").write_text(COURIER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(env.tmp), os.environ.get("PYTHONPATH", "")]))
    out = durastate_proc("start", "ship", "--id", "s1", "--context", '{"parcel": "p7"}')
    assert out.code == 0, out.stderr
    out = durastate_proc("serve", "--until-idle", "-q")
    assert out.code == 0, out.stderr
    assert "1 task(s) run" in out.stdout + out.stderr
    shown = json.loads(durastate_proc("show", "s1", "--json").stdout)
    assert shown["active_path"] == "booked" and shown["context"]["label"] == "L-p7"
    (called,) = (env.tmp / "calls.log").read_text().split()
    assert called.startswith("s1~1~") and len(called) == len("s1~1~") + 16  # <id>~<n>~<mac>: unguessable
    assert "secret" not in shown  # show --json leaves out the key of its task ids


def test_local_refuses_a_task_function_it_cannot_import(env: Env, cli: Callable[..., Outcome]) -> None:
    for spec, says in (("charge", "expected NAME=module:handler"),
                       ("charge=no_such_module:handler", "No module named 'no_such_module'")):
        out = cli("local", "--until-idle", "--task-function", spec)
        assert out.code == 2 and says in " ".join((out.stdout + out.stderr).split()), out.stderr
