"""Timers through the ``durastate`` command on SQLite: ``serve --advance`` takes a duration, durations print
as ``2d 3h``, several timers of a state and a deadline from ``--context``, a bad computed delay, diagrams.

The subprocess tests run the installed console script, as a user does; the others run the same application
in-process (typer's runner), which is faster.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from durastate.engine import load_definition
from durastate.viz import to_mermaid

from ._support import CLOCK, Env, Outcome

Cli = Callable[..., Outcome]

TICKET = """\
id: ticket
initial: open
context: {deadline: null, backoff: 60}
states:
  open:
    on: {answer: answered}
    after:
      - {seconds: 1d, actions: [{send: {event: reminder}}]}
      - {seconds: 3d, target: escalated}
  escalated:
    after: {at: $context.deadline, target: breached}
  answered: {type: final}
  breached: {type: final}
"""


def write_ticket(env: Env) -> Path:
    path = env.definitions / "ticket.yaml"
    path.write_text(TICKET)
    return path


def ok(out: Outcome) -> Outcome:
    assert out.code == 0, (out.code, out.stdout, out.stderr)
    return out


def shown(cli: Cli, execution_id: str) -> dict[str, object]:
    data = json.loads(ok(cli("show", execution_id, "--json")).stdout)
    assert isinstance(data, dict)
    return data


def test_serve_advance_2d_fires_the_one_day_timer_and_not_the_three_day_one(
        env: Env, durastate_proc: Cli) -> None:
    write_ticket(env)
    ok(durastate_proc("start", "ticket", "--id", "t1"))
    ok(durastate_proc("serve", "--until-idle", "-q"))  # started now: both timers armed on the real clock
    out = ok(durastate_proc("serve", "--until-idle", "--advance", "2d"))
    assert "clock +2d)" in out.stderr
    assert "1 timer(s) fired" in out.stderr
    assert "notification reminder" in out.stdout  # the 1-day reminder: the ticket stays open
    # the 3-day escalation is still armed: a day after the shifted clock (less the seconds this test took)
    assert re.search(r"1 timer\(s\) armed, next due in (1d|23h \d+m) \(", out.stderr), out.stderr
    assert "--advance DURATION" in out.stderr
    data = json.loads(ok(durastate_proc("show", "t1", "--json")).stdout)
    assert data["active_path"] == "open" and list(data["timers"]) == ["open~after:1"]


def test_serve_advance_takes_durations_and_plain_seconds_and_refuses_anything_else(
        env: Env, cli: Cli) -> None:
    write_ticket(env)
    ok(cli("start", "ticket", "--id", "t2"))
    ok(cli("serve", "--until-idle", "-q"))
    out = ok(cli("serve", "--until-idle", "--advance", "2d 23h"))
    assert "clock +2d 23h)" in out.stderr and re.search(r"next due in (1h|59m \d+s) \(", out.stderr), out.stderr
    out = ok(cli("serve", "--until-idle", "--advance", "262800"))  # 3d 1h in seconds, as before
    assert "clock +3d 1h)" in out.stderr and "1 timer(s) fired" in out.stderr
    assert shown(cli, "t2")["active_path"] == "escalated"
    for bad, why in (("soon", "is not a duration (use e.g. 90s, 15m, 14d or 2d 3h"),
                     ("-5", "is not a duration"), ("5 parsecs", "unknown unit 'parsecs'")):
        out = cli("serve", "--until-idle", "--advance", bad)
        error = " ".join(out.stderr.replace("│", " ").split())
        assert out.code == 2 and "Invalid value for '--advance'" in error and why in error, (bad, error)


def test_a_deadline_from_the_start_context_fires_with_advance(env: Env, cli: Cli) -> None:
    write_ticket(env)
    deadline = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(CLOCK + 5 * 86400))
    ok(cli("start", "ticket", "--id", "t3", "--context", json.dumps({"deadline": deadline})))
    ok(cli("serve", "--until-idle", "-q"))
    ok(cli("serve", "--until-idle", "--advance", "3d 1h"))
    data = shown(cli, "t3")
    assert data["active_path"] == "escalated"
    out = ok(cli("show", "t3")).stdout
    # on the manual clock, advanced 3d 1h: exactly 5 days after the start
    assert re.search(r"escalated +\S+ \S+Z, in 1d 23h\n", out), out
    ok(cli("serve", "--until-idle", "--advance", "2d"))
    assert shown(cli, "t3")["outcome"] == "breached"


def test_a_missing_deadline_fails_the_execution_with_the_reason_and_serve_goes_on(env: Env, cli: Cli) -> None:
    write_ticket(env)
    ok(cli("start", "ticket", "--id", "bad"))
    ok(cli("start", "ticket", "--id", "fine", "--context", json.dumps({"deadline": 4102444800})))
    ok(cli("serve", "--until-idle", "-q"))
    out = ok(cli("serve", "--until-idle", "--advance", "3d 1h"))
    assert "failed" in out.stdout
    bad, fine = shown(cli, "bad"), shown(cli, "fine")
    assert bad["status"] == "failed" and fine["status"] == "running" and fine["active_path"] == "escalated"
    assert str(bad["error"]).startswith(
        "state 'escalated', after[0]: at $context.deadline = null (missing?) is not a time")
    assert "durastate redrive bad" in ok(cli("show", "bad")).stdout


def test_validate_reports_timer_issues_at_their_paths(env: Env, cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "timers.yaml"
    bad.write_text("id: t\ninitial: a\nstates:\n  a:\n    after:\n      - {seconds: 1d, target: b}\n"
                   "      - {seconds: -5, target: b}\n      - {at: next tuesday, target: b}\n  b: {}\n")
    out = cli("validate", str(bad))
    assert out.code == 1
    text = " ".join(out.stdout.split())
    assert "states.a.after[1].seconds: must be a positive number of seconds, got -5.0" in text
    assert "states.a.after[2].at: 'next tuesday' is not a time" in text


def test_a_diagram_labels_each_timer_with_its_duration_or_deadline(env: Env) -> None:
    text = to_mermaid(load_definition(write_ticket(env)))
    assert "open --> escalated : after 3d" in text
    assert "escalated --> breached : at $context.deadline" in text
    assert "after 1d" in text
