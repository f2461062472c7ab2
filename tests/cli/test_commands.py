"""Each ``durastate`` command doing its job, in-process through the typer app (the real parsing and output)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ._support import DEFS, EXAMPLES, Env, Outcome

Cli = Callable[..., Outcome]


def ok(out: Outcome) -> Outcome:
    assert out.code == 0, (out.code, out.stdout, out.stderr)
    return out


def show_json(cli: Cli, execution_id: str) -> dict[str, object]:
    data = json.loads(ok(cli("show", execution_id, "--json")).stdout)
    assert isinstance(data, dict)
    return data


def test_start_queues_and_serve_applies(cli: Cli) -> None:
    out = ok(cli("start", "counter", "--id", "c1", "--context", '{"count": 5}'))
    assert "started c1 (counter): queued" in out.stdout
    # queued, not applied: show says so instead of pretending it does not exist
    pending = cli("show", "c1")
    assert pending.code == 1 and "queued but not started yet" in pending.stderr
    served = ok(cli("serve", "--until-idle"))
    assert "c1" in served.stdout and "start (counter)" in served.stdout
    assert "1 applied" in served.stderr
    exe = show_json(cli, "c1")
    assert exe["status"] == "running" and exe["active_path"] == "counting"
    assert exe["context"] == {"count": 5}


def test_send_before_serve_keeps_order_and_applies_once(cli: Cli) -> None:
    ok(cli("start", "counter", "--id", "c2"))
    for _ in range(3):
        ok(cli("send", "c2", "inc"))
    ok(cli("send", "c2", "inc", "--id", "dup-1"))
    ok(cli("send", "c2", "inc", "--id", "dup-1"))  # same event id: applied once
    ok(cli("send", "c2", "finish", "--data", '{"note": "bye"}'))
    ok(cli("serve", "--until-idle"))
    exe = show_json(cli, "c2")
    assert exe["status"] == "finished" and exe["outcome"] == "counted"
    assert exe["context"] == {"count": 4}


def test_an_exclusive_server_applies_runs_of_events_once_and_in_order(cli: Cli) -> None:
    ok(cli("start", "counter", "--id", "c9"))
    ok(cli("serve", "--until-idle", "--exclusive"))
    for _ in range(3):
        ok(cli("send", "c9", "inc"))
    ok(cli("send", "c9", "inc", "--id", "again"))
    served = ok(cli("serve", "--until-idle", "--exclusive"))
    assert "4 applied" in served.stderr
    # The same id again, once the first was served: the worker meets it with a commit on its kept copy
    # of c9, the commit refuses it, and the reread reports it a duplicate.
    ok(cli("send", "c9", "inc"))
    ok(cli("send", "c9", "inc", "--id", "again"))
    served = ok(cli("serve", "--until-idle", "--exclusive"))
    assert "1 applied" in served.stderr and "1 duplicate" in served.stderr
    assert show_json(cli, "c9")["context"] == {"count": 5}


def test_exclusive_says_so_where_it_cannot_help(cli: Cli) -> None:
    served = ok(cli("--store", "memory://", "serve", "--until-idle", "--exclusive"))
    assert "--exclusive has no effect on memory://" in served.stderr


def test_start_is_idempotent(cli: Cli) -> None:
    ok(cli("start", "counter", "--id", "c3"))
    ok(cli("serve", "--until-idle"))
    again = ok(cli("start", "counter", "--id", "c3", "--context", '{"count": 99}'))
    assert "already exists" in again.stderr
    ok(cli("serve", "--until-idle"))
    assert show_json(cli, "c3")["context"] == {"count": 0}


def test_start_quiet_prints_generated_id(cli: Cli) -> None:
    out = ok(cli("start", "counter", "-q"))
    exe_id = out.stdout.strip()
    assert len(exe_id) == 32 and exe_id.isalnum()
    ok(cli("serve", "--until-idle", "-q"))
    assert show_json(cli, exe_id)["definition_id"] == "counter"


def test_show_renders_status_context_children_and_timers(cli: Cli) -> None:
    ok(cli("start", "order", "--id", "o1"))
    ok(cli("send", "o1", "add_item", "--data", '{"price": 30}'))
    ok(cli("send", "o1", "submit"))
    ok(cli("serve", "--until-idle"))
    out = ok(cli("show", "o1")).stdout
    assert "processing.payment" in out and "running" in out
    assert '"total": 30' in out
    assert "o1~1" in out and "invoke" in out  # the payment child
    child = ok(cli("show", "o1~1")).stdout
    assert "armed timer" in child and "pending" in child and "in 15m" in child
    data = show_json(cli, "o1")
    assert [c["id"] for c in data["child_executions"]] == ["o1~1"]  # type: ignore[index]


def test_list_filters_and_json(cli: Cli) -> None:
    for i in range(3):
        ok(cli("start", "counter", "--id", f"l{i}"))
    ok(cli("start", "order", "--id", "lo"))
    ok(cli("send", "l0", "finish"))
    ok(cli("serve", "--until-idle"))
    table = ok(cli("list")).stdout
    assert all(f"l{i}" in table for i in range(3)) and "lo" in table
    finished = json.loads(ok(cli("list", "--status", "finished", "--json")).stdout)
    assert [i["id"] for i in finished["items"]] == ["l0"]
    running = json.loads(ok(cli("list", "--status", "running", "--definition", "counter", "--json")).stdout)
    assert [i["id"] for i in running["items"]] == ["l1", "l2"]
    page = json.loads(ok(cli("list", "--limit", "2", "--json")).stdout)
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = json.loads(ok(cli("list", "--limit", "2", "--cursor", page["next_cursor"], "--json")).stdout)
    assert {i["id"] for i in page["items"]} | {i["id"] for i in rest["items"]} == {"l0", "l1", "l2", "lo"}
    assert "more: durastate list --cursor" in ok(cli("list", "--limit", "1")).stderr
    assert "no executions match" in ok(cli("list", "--status", "failed")).stderr


def test_trace_shows_each_step(cli: Cli) -> None:
    ok(cli("start", "counter", "--id", "t1"))
    ok(cli("send", "t1", "inc"))
    ok(cli("send", "t1", "finish"))
    ok(cli("serve", "--until-idle"))
    out = [line for line in ok(cli("trace", "t1")).stdout.splitlines() if "#" in line]  # each step's headline
    assert len(out) == 3
    assert "start" in out[0] and "counting" in out[0]
    assert "finish" in out[2] and "counting → done" in out[2] and "finished (counted)" not in out[0]
    steps = json.loads(ok(cli("trace", "t1", "--json")).stdout)
    assert [s["event"] for s in steps] == ["durastate.start", "inc", "finish"]
    assert len([line for line in ok(cli("trace", "t1", "--last", "1")).stdout.splitlines() if "#" in line]) == 1


def test_serve_fires_timers_on_an_advanced_clock(cli: Cli) -> None:
    ok(cli("start", "order", "--id", "late"))
    ok(cli("serve", "--until-idle"))
    assert "timer(s) armed" in ok(cli("serve", "--until-idle")).stderr
    out = ok(cli("serve", "--until-idle", "--advance", "3601"))
    assert "timeout (cart)" in out.stdout and "abandoned" in out.stdout
    exe = show_json(cli, "late")
    assert exe["status"] == "finished" and exe["outcome"] == "abandoned"


def test_serve_once_runs_one_round(cli: Cli) -> None:
    ok(cli("start", "counter", "--id", "once"))
    out = ok(cli("serve", "--once"))
    assert "1 applied" in out.stderr


def test_validate_reports_good_and_bad_files(cli: Cli, tmp_path: Path) -> None:
    good = ok(cli("validate", str(EXAMPLES / "order.yaml"), str(DEFS / "counter.yaml")))
    assert "✓" in good.stdout and "order" in good.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\ninitial: a\nstates:\n  a: {on: {go: nowhere}}\n"
                   "  b: {on: {x: alsonot}}\n  c: {after: 5}\n")
    out = cli("validate", str(bad), str(DEFS / "counter.yaml"))
    assert out.code == 1
    assert "✗" in out.stdout and "nowhere" in out.stdout and "alsonot" in out.stdout
    assert "states.c.after" in out.stdout  # every issue, each with its path
    assert "1 of 2 definition file(s) invalid" in out.stderr
    folder = len([*DEFS.glob("*.yaml"), *EXAMPLES.glob("*.yaml")])  # what the env fixture copies there
    assert ok(cli("validate")).stdout.count("✓") == folder  # default: the definitions folder
    listed = json.loads(cli("validate", str(bad), "--json").stdout)
    assert listed[0]["valid"] is False and len(listed[0]["issues"]) >= 3


def test_viz_prints_mermaid_and_marks_the_active_states(cli: Cli, env: Env) -> None:
    plain = ok(cli("viz", str(EXAMPLES / "order.yaml"))).stdout
    assert plain.startswith("stateDiagram-v2\n") and "[*] --> cart" in plain
    assert "class " not in plain
    by_id = ok(cli("viz", "order", "--markdown")).stdout
    assert by_id.startswith("```mermaid\nstateDiagram-v2\n") and by_id.rstrip().endswith("```")
    ok(cli("start", "order", "--id", "v1"))
    ok(cli("send", "v1", "add_item", "--data", '{"price": 5}'))
    ok(cli("send", "v1", "submit"))
    ok(cli("serve", "--until-idle"))
    ok(cli("send", "v1~1", "authorize", "--data", '{"receipt": "r"}'))
    ok(cli("serve", "--until-idle"))
    marked = ok(cli("viz", "--execution", "v1")).stdout
    assert "classDef active" in marked
    assert "class processing__fulfilment__packing__picking active\n" in marked
    assert "class processing__fulfilment__shipping__awaiting_label active\n" in marked
    target = env.tmp / "o.mmd"
    ok(cli("viz", "order", "-e", "v1", "-o", str(target)))
    assert target.read_text() == marked


def test_memory_store_applies_in_process(cli: Cli) -> None:
    out = ok(cli("--store", "memory://", "start", "counter", "--id", "m1"))
    assert "started m1 (counter)" in out.stdout and "counting" in out.stdout
    # a new process, a new memory: nothing is left
    assert cli("--store", "memory://", "show", "m1").code == 1


def test_command_options_override_global_and_env(cli: Cli, env: Env) -> None:
    other = env.tmp / "other.db"
    ok(cli("start", "counter", "--id", "x1", "--store", f"sqlite:///{other}"))
    ok(cli("--store", f"sqlite:///{other}", "serve", "--until-idle"))
    assert cli("show", "x1").code == 1  # not in the env's store
    assert ok(cli("show", "x1", "--store", f"sqlite:///{other}")).code == 0


def test_help_lists_every_command(cli: Cli) -> None:
    out = ok(cli("--help")).stdout
    for command in ("start", "send", "show", "list", "trace", "serve", "validate", "viz"):
        assert command in out


def test_send_without_definitions_folder_skips_only_the_check(cli: Cli, env: Env,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ok(cli("start", "counter", "--id", "nd"))
    ok(cli("serve", "--until-idle"))
    monkeypatch.delenv("DURASTATE_DEFINITIONS")
    out = ok(cli("send", "nd", "inc"))
    assert "event name not checked" in out.stderr
    assert cli("start", "counter").code == 1  # start does need to know the definition
    monkeypatch.setenv("DURASTATE_DEFINITIONS", str(env.definitions))
    ok(cli("serve", "--until-idle"))
    assert show_json(cli, "nd")["context"] == {"count": 1}


def test_cancel_may_be_sent_by_hand(cli: Cli) -> None:
    ok(cli("start", "counter", "--id", "cx"))
    ok(cli("send", "cx", "durastate.cancel"))
    ok(cli("serve", "--until-idle"))
    assert show_json(cli, "cx")["status"] == "cancelled"
