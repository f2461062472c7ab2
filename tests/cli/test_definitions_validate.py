"""``durastate validate`` (and what the other commands do with a definitions folder) on the inputs that
outside testing found: duplicate ids across files, non-UTF-8 files, repeated keys, issues that used to
come in two rounds, invalid event descriptors. Each must be an issue of the file it is in, exit status 1,
and never an "unexpected error".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ._support import EXAMPLES, Env, Outcome, assert_one_line_error

Cli = Callable[..., Outcome]

COUNTER_COPY = "id: counter\ninitial: a\nstates: {a: {type: final}}\n"


def test_two_files_of_a_folder_with_the_same_id_are_both_invalid(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "one.yaml").write_text("id: same\ninitial: a\nstates: {a: {type: final}}\n")
    (folder / "two.yaml").write_text("id: same\ninitial: b\nstates: {b: {type: final}}\n")
    (folder / "other.yaml").write_text("id: other\ninitial: a\nstates: {a: {type: final}}\n")
    out = cli("validate", str(folder))
    assert out.code == 1, out.stdout
    assert "2 of 3 definition file(s) invalid" in out.stderr
    assert "id: 'same' is also defined by two.yaml" in out.stdout
    assert "id: 'same' is also defined by one.yaml" in out.stdout
    listed = {Path(r["file"]).name: r for r in json.loads(cli("validate", str(folder), "--json").stdout)}
    assert [listed[n]["valid"] for n in ("one.yaml", "other.yaml", "two.yaml")] == [False, True, False]
    assert listed["one.yaml"]["id"] == "same"


def test_the_default_folder_with_a_duplicate_id_fails_validate_as_it_fails_start(cli: Cli, env: Env) -> None:
    (env.definitions / "counter_copy.yaml").write_text(COUNTER_COPY)
    out = cli("validate")
    assert out.code == 1 and "counter_copy.yaml" in out.stdout and "counter.yaml" in out.stdout
    assert_one_line_error(cli("start", "counter"), "invalid definition", "counter")


def test_the_same_id_in_two_folders_is_only_a_warning(cli: Cli, tmp_path: Path) -> None:
    for name in ("dev", "prod"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "counter.yaml").write_text(COUNTER_COPY)
    out = cli("validate", str(tmp_path / "dev"), str(tmp_path / "prod"))
    assert out.code == 0 and "warning: id 'counter' is also defined in" in out.stdout


def test_a_file_named_twice_is_checked_once(cli: Cli, env: Env) -> None:
    path = env.definitions / "counter.yaml"
    out = cli("validate", str(path), str(env.definitions / "." / "counter.yaml"))
    assert out.code == 0 and out.stdout.count("✓") == 1


def test_a_non_utf8_file_is_an_issue_of_that_file(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("id: x\ninitial: a\nstates: {a: {description: é}}\n".encode("latin-1"))
    out = cli("validate", str(bad))
    assert out.code == 1
    assert "not UTF-8" in out.stdout and "line 3" in out.stdout and "0xe9" in out.stdout


@pytest.mark.slow
def test_proc_a_non_utf8_definition_is_not_an_unexpected_error(
    durastate_proc: Callable[..., Outcome], env: Env
) -> None:
    bad = env.tmp / "latin1.yaml"
    bad.write_bytes("id: x\ninitial: a\nstates: {a: {description: é}}\n".encode("latin-1"))
    out = durastate_proc("validate", str(bad))
    assert out.code == 1 and "not UTF-8" in out.stdout
    assert "unexpected" not in out.stderr and "Traceback" not in out.stderr
    (env.definitions / "latin1.yaml").write_bytes(bad.read_bytes())
    assert_one_line_error(durastate_proc("start", "counter"), "not UTF-8")


def test_a_repeated_state_is_reported_with_both_lines(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "twice.yaml"
    bad.write_text("id: x\ninitial: a\nstates:\n  a: {}\n  a: {on: {go: a}}\n")
    out = cli("validate", str(bad))
    assert out.code == 1
    assert "states.a: duplicate key 'a' (first at line 4" in out.stdout and "again at line 5" in out.stdout


def test_one_validate_reports_the_issues_of_every_stage(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: x\ninitial: a\ncontext: &c {loop: *c}\nstates:\n"
        "  a:\n    type: compund\n    initial: a1\n    states:\n      a1: {on: {go: nowhere, 'error.': a1}}\n"
        "  b: {}\n  b: {}\n"
    )
    out = cli("validate", str(bad), "--json")
    (result,) = json.loads(out.stdout)
    issues = result["issues"]
    for want in ("states.b: duplicate key 'b'", "context.loop: refers back", "states.a.type: ",
                 "states.a.states.a1.on.go[0].target: no state 'nowhere'",
                 "states.a.states.a1.on.error.: 'error.' is not a valid event descriptor"):
        assert any(i.startswith(want) for i in issues), (want, issues)


def test_send_accepts_an_event_a_descriptor_matches(cli: Cli, env: Env) -> None:
    (env.definitions / "errors.yaml").write_text(
        "id: errors\ninitial: a\nstates:\n  a: {on: {error.send: b, done: a}}\n  b: {}\n")
    assert cli("start", "errors", "--id", "e1").code == 0
    assert cli("serve", "--until-idle").code == 0
    assert cli("send", "e1", "error.send.failed").code == 0
    assert_one_line_error(cli("send", "e1", "error.sender"), "no transition on event 'error.sender'")
    assert cli("serve", "--until-idle").code == 0
    assert json.loads(cli("show", "e1", "--json").stdout)["active_path"] == "b"


def test_static_issues_fail_validate_with_their_paths(cli: Cli, tmp_path: Path) -> None:
    chart = tmp_path / "chart.yaml"
    chart.write_text("id: chart\ninitial: a\nstates:\n  a: {on: {go: [b, c]}}\n  b: {type: final}\n"
                     "  c: {type: final}\n  lost: {on: {x: b}}\n")
    out = cli("validate", str(chart))
    assert out.code == 1 and "1 of 1 definition file(s) invalid" in out.stderr
    assert "states.lost: unreachable" in out.stdout
    assert "states.a.on.go[1]: never taken: two unguarded transitions on one event" in out.stdout


def test_explore_reports_a_deadlock_with_the_events_that_reach_it_and_domains_open_guards(
    cli: Cli, tmp_path: Path
) -> None:
    chart = tmp_path / "approval.yaml"
    chart.write_text("id: approval\ninitial: submitted\nstates:\n"
                     "  submitted:\n    on:\n      review:\n"
                     "        - {target: approved, guard: {gt: [$event.score, 70]}}\n"
                     "        - {target: waiting}\n"
                     "  waiting:\n    on: {nudge: {target: approved, guard: {eq: [$context.escalated, true]}}}\n"
                     "  approved: {type: final}\n")
    out = cli("validate", str(chart), "--explore", "100")
    assert out.code == 1 and "exploration found 1 problem" in out.stderr
    assert "deadlock in 'waiting' after start → review" in out.stdout
    assert "reached 3/3 states, 3/3 transitions" in out.stdout  # score 71, from the guard's own 70
    opened = cli("validate", str(chart), "--explore", "100", "--domain", "event.score=50,90",
                 "--domain", "context.escalated=true")
    assert opened.code == 0 and "explored 2 configurations (all of them)" in opened.stdout
    [entry] = json.loads(cli("validate", str(chart), "--explore", "100", "--json").stdout)
    found = entry["exploration"]
    assert found["complete"] and found["undomained_event_keys"] == []
    assert found["coverage"] == {"states": 3, "states_reached": 3, "transitions": 3, "transitions_taken": 3,
                                 "never_reached": [], "never_taken": []}
    assert [(f["kind"], f["active_path"], f["events"]) for f in found["findings"]] == [
        ("deadlock", "waiting", ["start", "review"])]
    assert "--domain is for --explore N" in cli("validate", str(chart), "--domain", "event.score=1").stderr


def test_explore_on_the_example_order_tries_prices_and_payment_outcomes_and_says_what_it_reached(
        cli: Cli) -> None:
    """It used to report success after one configuration: every transition read ``$event.price``."""
    out = cli("validate", str(EXAMPLES / "order.yaml"), "--explore", "300")
    assert out.code == 0, out.stdout
    text = " ".join(out.stdout.split())
    assert "explored 300 configurations (the bound of 300 reached" in text  # the cart's total grows
    assert "reached 9/9 states, 12/12 transitions (not counted: 6 states inside parallel regions" in text
    assert "note:" not in text


def test_explore_names_what_it_never_took_and_a_failure_gets_a_hint_for_the_chart_author(
        cli: Cli, tmp_path: Path) -> None:
    chart = tmp_path / "late.yaml"
    chart.write_text("id: late\ninitial: a\nstates:\n  a: {on: {go: b, skip: {target: c, guard: "
                     "{gt: [$event.n, $context.limit]}}}}\n"
                     "  b: {after: {at: $context.deadline, target: c}}\n  c: {type: final}\n")
    out = cli("validate", str(chart), "--explore", "100")
    assert out.code == 1 and "exploration found 1 problem" in out.stderr
    text = " ".join(out.stdout.split())
    assert ("reached 2/3 states, 1/3 transitions; never taken: state c; a -> c on skip [guard "
            '{"gt": ["$event.n", "$context.limit"]}]; b -> c after $context.deadline') in text
    assert "failure in 'b' after start → go: state 'b', after[0]: at $context.deadline = null" in text
    assert "redrive" not in out.stdout  # not the operator's `durastate redrive explore`
    assert "hint: an execution that takes these steps fails the same way; fix the definition" in text
    assert "note: guards compare $event.n with no constant" in text and "--domain event.n=…" in text
