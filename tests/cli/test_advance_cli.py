"""``serve --advance`` on every store the command line runs on: it applies what is due now, then moves the
clock step by step to each timer that falls due within the advance, and the store keeps the clock where it
left it, so ``show``, ``list`` and the next ``serve`` tell the same time as the one that moved it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest

from ._support import CLOCK, Env, Outcome, assert_one_line_error, moto_dynamodb_url, postgres_schema_url

Cli = Callable[..., Outcome]
DAY = 86400.0

STEPS = """\
id: steps
initial: waiting
states:
  waiting:
    after: {seconds: 1d, target: second}
  second:
    after: {seconds: 1d, target: third}
  third:
    after:
      - {seconds: 12h, target: done}
      - {seconds: 7d, target: late}
  done: {type: final}
  late: {type: final}
"""

WEEK = """\
id: week
initial: open
states:
  open:
    after: {seconds: 7d, target: closed}
  closed: {type: final}
"""

@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow),
                        pytest.param("dynamodb", marks=pytest.mark.slow)])
def store_url(request: pytest.FixtureRequest, env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The store of the test (set as DURASTATE_STORE): the env's SQLite file, a fresh PostgreSQL schema, or a
    fresh table prefix on moto's DynamoDB."""
    (env.definitions / "steps.yaml").write_text(STEPS)
    (env.definitions / "week.yaml").write_text(WEEK)
    if request.param == "sqlite":
        yield env.store_url
        return
    if request.param == "postgresql":
        with postgres_schema_url("adv") as url:
            monkeypatch.setenv("DURASTATE_STORE", url)
            yield url
        return
    url = moto_dynamodb_url(monkeypatch, "adv")
    monkeypatch.setenv("DURASTATE_STORE", url)
    yield url


def ok(out: Outcome) -> Outcome:
    assert out.code == 0, (out.code, out.stdout, out.stderr)
    return out


def shown(cli: Cli, execution_id: str) -> dict[str, object]:
    data = json.loads(ok(cli("show", execution_id, "--json")).stdout)
    assert isinstance(data, dict)
    return data


def test_advance_applies_the_waiting_start_now_then_fires_each_timer_when_it_falls_due(
        store_url: str, cli: Cli) -> None:
    ok(cli("start", "steps", "--id", "s1"))
    out = ok(cli("serve", "--until-idle", "--advance", "3d"))
    assert "3 timer(s) fired" in out.stderr, out.stderr
    # each line at the time it was applied, with the date once it is another day (on DynamoDB without a
    # queue, `start` applied the start itself)
    assert [line.split(" s1 ")[0] for line in out.stdout.splitlines()][-3:] == [
        "2026-01-06 10:00:00", "2026-01-07 10:00:00", "2026-01-07 22:00:00"], out.stdout
    exe = shown(cli, "s1")
    # the start was applied at the time it was due (now), each timer at its own time: +1d, +2d, +2d 12h
    assert (exe["status"], exe["outcome"]) == ("finished", "done")
    assert exe["created_at"] == CLOCK
    assert exe["ended_at"] == CLOCK + 2.5 * DAY
    trace = json.loads(ok(cli("trace", "s1", "--json")).stdout)
    assert [step["at"] - CLOCK for step in trace] == [0.0, DAY, 2 * DAY, 2.5 * DAY]


def test_show_list_and_the_next_serve_read_the_clock_the_store_was_advanced_to(
        store_url: str, cli: Cli) -> None:
    ok(cli("start", "steps", "--id", "s2"))
    ok(cli("start", "week", "--id", "w1"))
    out = ok(cli("serve", "--until-idle", "--advance", "3d"))
    if store_url.startswith("sqlite"):  # the summary lists armed timers on the embedded stores only
        assert re.search(r"1 timer\(s\) armed, next due in 4d \(", out.stderr), out.stderr
    text = ok(cli("show", "s2")).stdout
    assert re.search(r"ended +2026-01-07 22:00:00Z, 12h ago", text), text
    text = ok(cli("show", "w1")).stdout
    assert re.search(r"open +2026-01-12 10:00:00Z, in 4d\n", text), text  # what serve said: in 4d
    listed = ok(cli("list")).stdout
    assert "2026-01-05 10:00:00" in listed and "2026-01-08" not in listed.split("s2")[0], listed
    assert "~clock" not in listed  # the record that keeps the offset is no execution
    assert_one_line_error(cli("send", "~clock~offset", "durastate.cancel"), "'~clock~offset' is a system record")
    # the next --advance moves on from there: 4 more days close the week
    out = ok(cli("serve", "--until-idle", "--advance", "4d"))
    assert "1 timer(s) fired" in out.stderr, out.stderr
    assert shown(cli, "w1")["ended_at"] == CLOCK + 7 * DAY
    # a start sent now is stamped with the store's clock, not a week before what it already recorded
    ok(cli("start", "week", "--id", "w2"))
    ok(cli("serve", "--until-idle", "-q"))
    assert shown(cli, "w2")["created_at"] == CLOCK + 7 * DAY


def test_the_line_after_an_advance_says_exactly_how_far_ahead_the_store_is(store_url: str, cli: Cli) -> None:
    """Two advances add up, to the second: a user who moved 3d 1h and then 31m reads 3d 1h 31m, not a
    rounded 3d 1h that looks as if the second advance did nothing."""
    out = ok(cli("serve", "--until-idle", "--advance", "3d1h"))
    assert "clock moved 3d 1h: this store's clock is 3d 1h ahead of DURASTATE_CLOCK" in out.stderr, out.stderr
    out = ok(cli("serve", "--until-idle", "--advance", "31m5s"))
    assert "clock moved 31m 5s: this store's clock is 3d 1h 31m 5s ahead of DURASTATE_CLOCK" in out.stderr, \
        out.stderr
