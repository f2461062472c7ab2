"""``durastate send --explain / --dry-run`` and its "did you mean", through the real CLI on SQLite and
PostgreSQL.

What a user relies on: ``--explain`` lists the transitions that may take the event in the order the
interpreter tries them, with each guard's value and the one taken; ``--dry-run`` prints what the step would
do — transitions, log lines, emits, timers, the new active state and context — and neither sends nor
stores anything (the execution's version and trace stay as they were, and ``serve`` finds nothing to
apply). A name that is a typo gets a suggestion: an error when no state knows it, a warning (and the event
still goes) when only the active states do not handle it now.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest

from ._support import Env, Outcome, postgres_schema_url

TURNSTILE = """\
id: turnstile
initial: locked
context: {coins: 0}
states:
  locked:
    on:
      coin:
        - target: unlocked
          guard: {ge: ["$event.amount", 50]}
          actions: [{assign: {coins: {add: ["$context.coins", 1]}}}]
        - {guard: {gt: ["$event.amount", 0]}, actions: [{log: "not enough"}]}
        - {actions: [{log: "no coin"}]}
  unlocked:
    after: {seconds: 30, target: locked}
    on:
      push: locked
"""


@pytest.fixture(params=["sqlite", "postgres"])
def run(request: pytest.FixtureRequest, cli: Callable[..., Outcome], env: Env) -> Iterator[Callable[..., Outcome]]:
    """``durastate --store URL ARGS…`` on a fresh store of either kind, with the turnstile definition."""
    (env.definitions / "turnstile.yaml").write_text(TURNSTILE)
    if request.param == "postgres":
        with postgres_schema_url("explain") as url:
            yield lambda *args: cli("--store", url, *args)
        return
    yield lambda *args: cli("--store", env.store_url, *args)


def ok(out: Outcome) -> Outcome:
    assert out.code == 0, (out.code, out.stdout, out.stderr)
    return out


def lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def stored(run: Callable[..., Outcome], exe_id: str) -> tuple[int, str, int]:
    """(version, active state, number of trace steps) as stored."""
    exe = json.loads(ok(run("show", exe_id, "--json")).stdout)
    steps = json.loads(ok(run("trace", exe_id, "--json")).stdout)
    return exe["version"], exe["active_path"], len(steps)


def started(run: Callable[..., Outcome], exe_id: str, definition: str = "turnstile") -> None:
    ok(run("start", definition, "--id", exe_id))
    ok(run("serve", "--until-idle", "-q"))


def nothing_queued(run: Callable[..., Outcome]) -> None:
    assert "idle: 0 applied, 0 ignored" in ok(run("serve", "--until-idle")).stderr


def test_explain_lists_the_candidates_in_order_with_each_guard_value(run: Callable[..., Outcome]) -> None:
    started(run, "t1")
    before = stored(run, "t1")
    out = ok(run("send", "t1", "coin", "--data", '{"amount": 20}', "--explain"))
    shown = lines(out.stdout)
    assert shown[0] == "explain coin in t1 (active: locked, running)"
    assert "1 locked coin unlocked event.amount >= 50 false" in shown
    assert "2 locked coin (targetless) event.amount > 0 true ← taken" in shown
    assert "3 locked coin (targetless) - (no guard) (not reached)" in shown
    assert shown[-1] == "→ taken: locked on coin (targetless: actions only)"
    assert stored(run, "t1") == before
    nothing_queued(run)

    ignored = ok(run("send", "t1", "push", "--explain", "--force"))
    assert lines(ignored.stdout)[-1] == "→ ignored: no transition handles it in locked or the states above it"


def test_dry_run_prints_the_step_and_stores_nothing(run: Callable[..., Outcome]) -> None:
    started(run, "t2")
    before = stored(run, "t2")
    out = ok(run("send", "t2", "coin", "--data", '{"amount": 50}', "--dry-run"))
    shown = lines(out.stdout)
    assert shown[0] == "dry run coin → t2 (nothing is sent or stored)"
    assert "transition locked → unlocked (coin)" in shown
    assert any(re.fullmatch(r"timer arm unlocked: fires in 30s \(at \d\d:\d\d:\d\d\)", line) for line in shown)
    assert "active locked → unlocked" in shown
    assert "context coins: 0 → 1" in shown
    assert stored(run, "t2") == before
    nothing_queued(run)

    small = lines(ok(run("send", "t2", "coin", "--data", '{"amount": 5}', "--dry-run", "--explain")).stdout)
    assert "2 locked coin (targetless) event.amount > 0 true ← taken" in small  # --explain first
    assert "log not enough" in small and "context unchanged" in small
    assert small.index("dry run coin → t2 (nothing is sent or stored)") > small.index(
        "→ taken: locked on coin (targetless: actions only)")
    assert stored(run, "t2") == before


def test_dry_run_shows_emits_and_children_of_the_real_step(run: Callable[..., Outcome]) -> None:
    started(run, "o1", "order")
    ok(run("send", "o1", "add_item", "--data", '{"price": 25}'))
    ok(run("serve", "--until-idle", "-q"))
    before = stored(run, "o1")
    shown = lines(ok(run("send", "o1", "submit", "--dry-run")).stdout)
    for line in ("transition cart → processing (submit)", "log order submitted", "emit durastate.start → o1~1",
                 "timer cancel cart", "active cart → processing.payment"):
        assert line in shown
    assert stored(run, "o1") == before
    nothing_queued(run)


def test_did_you_mean(run: Callable[..., Outcome]) -> None:
    started(run, "t3")
    unknown = run("send", "t3", "coins")
    assert unknown.code == 1
    assert "no transition on event 'coins' (did you mean 'coin'?)" in unknown.stderr
    # `push` is handled, but not in `locked`: a warning, and the event still goes (a later state may take it)
    later = ok(run("send", "t3", "push"))
    assert "warning: no transition of the active state locked (or above it) handles 'push' now" in \
        " ".join(later.stderr.split())
    assert "queued push for t3" in later.stdout
    assert "← push" in ok(run("serve", "--until-idle")).stdout  # it went (and locked ignores it)


def test_dry_run_needs_a_started_execution(run: Callable[..., Outcome]) -> None:
    ok(run("start", "turnstile", "--id", "t4"))
    out = run("send", "t4", "coin", "--dry-run")
    assert out.code == 1 and "queued but not started yet" in out.stderr
    missing = run("send", "nope", "coin", "--explain")
    assert missing.code == 1 and "nope" in missing.stderr


def test_a_queue_url_does_not_make_a_dry_run_send(run: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch) -> None:
    started(run, "t5")
    before = stored(run, "t5")
    # with a queue configured, `send` enqueues there; --dry-run / --explain still only read the store
    monkeypatch.setenv("DURASTATE_QUEUE_URL", "https://sqs.eu-west-1.amazonaws.com/000000000000/nowhere.fifo")
    out = ok(run("send", "t5", "coin", "--data", '{"amount": 50}', "--dry-run", "--explain"))
    assert "transition locked → unlocked (coin)" in lines(out.stdout)
    monkeypatch.delenv("DURASTATE_QUEUE_URL")
    assert stored(run, "t5") == before
