"""``durastate trace`` (what each step did, as a timeline or raw JSON, and ``--follow``), ``show``'s view
of what waits for an execution, and ``list`` by parent and recent update — through the real command."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from durastate.engine.model import Event, Execution
from durastate.engine.tracing import DATA_MAX, VALUE_MAX
from durastate.store.sqlite import SqliteStore
from durastate.transport.base import DeadLetter
from durastate.transport.sqlite import SqliteTransport

from ._support import Env, Outcome, durastate_executable, postgres_schema_url

WAIT = 60.0
"""How long a test waits for a line of a following ``trace`` before it fails (never a sleep)."""


TRACED = """\
# A chart for the trace tests: a step that changes the context and notifies, timers, parallel regions.
id: traced
initial: idle
context: {n: 0, note: null}
states:
  idle:
    after: {seconds: 600, target: expired}
    on:
      set:
        actions:
          - assign: {n: {add: ["$context.n", 1]}, note: "$event.note"}
          - send: {event: noted, data: {n: "$context.n"}}
      split: both
  both:
    type: parallel
    on_done: done
    states:
      a: {initial: a1, states: {a1: {after: {seconds: 7200, target: a2}, on: {go: a2}}, a2: {type: final}}}
      b: {initial: b1, states: {b1: {on: {go: b2}}, b2: {type: final}}}
  expired: {type: final, outcome: expired}
  done: {type: final, outcome: ok}
"""


@pytest.fixture(autouse=True)
def traced_definition(env: Env) -> None:
    (env.definitions / "traced.yaml").write_text(TRACED)


def ok(out: Outcome) -> Outcome:
    assert out.code == 0, (out.code, out.stdout, out.stderr)
    return out


def steps_of(cli: Callable[..., Outcome], exe_id: str, *store: str) -> list[dict[str, Any]]:
    return json.loads(ok(cli(*store, "trace", exe_id, "--json")).stdout)  # type: ignore[no-any-return]


def test_trace_records_what_each_step_did(cli: Callable[..., Outcome]) -> None:
    ok(cli("start", "traced", "--id", "t1"))
    ok(cli("send", "t1", "set", "--data", '{"note": "hi"}', "--id", "e-set"))
    ok(cli("send", "t1", "split", "--id", "e-split"))
    ok(cli("serve", "--until-idle", "-q"))
    start, set_, split = steps_of(cli, "t1")

    assert (start["event"], start["from"], start["to"]) == ("durastate.start", None, "idle")
    assert start["data"]["definition_id"] == "traced"
    [armed] = start["timers"]
    assert (armed["action"], armed["path"], armed["fire_at"] - start["at"]) == ("schedule", "idle", 600)

    assert (set_["event"], set_["event_id"], set_["data"]) == ("set", "e-set", {"note": "hi"})
    assert set_["context"] == {"n": [0, 1], "note": [None, "hi"]}
    assert set_["emits"] == [{"target": None, "name": "noted", "id": set_["emits"][0]["id"]}]
    assert set_["transitions"] == [{"source": "idle", "target": None, "event": "set"}]
    assert start["at"] <= set_["at"] <= split["at"]

    assert (split["from"], split["to"]) == ("idle", "both")
    assert split["timers"] == [{"action": "cancel", "path": "idle"}]
    assert split["spawns"] == [{"child_id": "t1~1", "path": "both.a"}, {"child_id": "t1~2", "path": "both.b"}]
    assert split["transitions"] == [{"source": "idle", "target": "both", "event": "split"}]
    assert "data" not in split and "context" not in split  # nothing to say: no data, no change

    [region_start] = steps_of(cli, "t1~1")  # a region child's first step is recorded by the relay
    assert region_start["timers"][0]["path"] == "both.a.a1" and "at" in region_start

    text = ok(cli("trace", "t1")).stdout
    for shown in ("#1   set", "(e-set)", "idle → idle", "context.n: 0 → 1", 'context.note: null → "hi"',
                  "emit noted → (notification)", "timer idle armed: fires", "(in 10m)", "timer idle disarmed",
                  "spawn t1~1 (region both.a)", "transition idle → both [on split]"):
        assert shown in text, (shown, text)
    assert "e-set" not in ok(cli("trace", "t1", "--no-ids")).stdout


def test_big_event_data_and_context_values_are_cut_with_a_marker(cli: Callable[..., Outcome]) -> None:
    big = "x" * (DATA_MAX + 500)
    ok(cli("start", "traced", "--id", "t2"))
    ok(cli("send", "t2", "set", "--data", json.dumps({"note": big})))
    ok(cli("serve", "--until-idle", "-q"))
    _, step = steps_of(cli, "t2")
    assert step["data_cut"] is True and isinstance(step["data"], str) and len(step["data"]) == DATA_MAX
    assert step["data"].startswith('{"note":"xxx')
    old, new = step["context"]["note"]
    assert old is None and new == json.dumps(big)[:VALUE_MAX] and step["context_cut"] is True
    assert step["context"]["n"] == [0, 1]  # small values are kept whole beside the cut one
    shown = ok(cli("trace", "t2")).stdout
    assert f"(cut: {DATA_MAX}+ characters)" in shown and "context: (more changes, or values cut)" in shown
    assert ok(cli("show", "t2")).code == 0  # the execution itself keeps the whole value
    exe = json.loads(ok(cli("show", "t2", "--json")).stdout)
    assert exe["context"]["note"] == big


def test_old_steps_without_the_new_fields_still_print(cli: Callable[..., Outcome], env: Env) -> None:
    ok(cli("start", "counter", "--id", "old"))
    ok(cli("serve", "--until-idle", "-q"))
    with SqliteStore(env.db) as store:  # a step as durastate recorded it before times and details
        store.append_trace("old", {"event": "inc", "event_id": "e9", "from": "counting", "to": "counting",
                                   "status": "running"})
    text = ok(cli("trace", "old")).stdout
    assert "inc" in text and "(e9) counting → counting" in text
    assert steps_of(cli, "old")[-1] == {"event": "inc", "event_id": "e9", "from": "counting", "to": "counting",
                                        "status": "running", "index": 1}


def test_show_lists_children_timers_and_what_waits(cli: Callable[..., Outcome], env: Env) -> None:
    ok(cli("start", "traced", "--id", "t3"))
    ok(cli("send", "t3", "split"))
    ok(cli("serve", "--until-idle", "-q"))
    ok(cli("send", "t3", "set", "--data", '{"note": "later"}', "--force", "--id", "queued-1"))
    with SqliteStore(env.db) as store:  # an event emitted to t3 that the relay has not moved yet
        store.commit(Execution(id="other", definition_id="counter"), [("t3", Event(id="poke-1", name="poke"))])
    with SqliteTransport(env.db) as transport:
        transport.dead_letter_box.add(DeadLetter(target_id="t3", event=Event(id="lost-1", name="lost"),
                                                 reason="it could not apply", error="MalformedEvent"))
        transport.dead_letter_box.add(DeadLetter(target_id="elsewhere", event=Event(id="lost-2", name="lost"),
                                                 reason="not t3's", error="MalformedEvent"))

    shown = ok(cli("show", "t3")).stdout
    assert "both.a.a1" in shown and "t3~1" in shown and "region" in shown
    assert re.search(r"both\.a\.a1 +t3~1 +region +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(in (2h|1h 59m)", shown), shown
    assert "queued   1 event(s) in the inbox" in shown and "set  (queued-1)" in shown
    assert "outbox   1 event(s) emitted to it" in shown and "poke  (poke-1)" in shown
    assert "dead letters   1:" in shown and "lost-2" not in shown

    data = json.loads(ok(cli("show", "t3", "--json")).stdout)["waiting"]
    assert [(t["execution_id"], t["path"], t["kind"]) for t in data["timers"]] == [("t3~1", "both.a.a1", "region")]
    assert [e["id"] for e in data["queued"]] == ["queued-1"]
    assert [o["event"]["id"] for o in data["outbox"]] == ["poke-1"]
    assert [d["event"]["id"] for d in data["dead_letters"]] == ["lost-1"]


def test_list_by_parent_and_recent_update(cli: Callable[..., Outcome]) -> None:
    ok(cli("start", "traced", "--id", "p1"))
    ok(cli("send", "p1", "split"))
    ok(cli("start", "counter", "--id", "c1"))
    ok(cli("serve", "--until-idle", "-q"))
    children = json.loads(ok(cli("list", "--parent", "p1", "--json")).stdout)["items"]
    assert [c["id"] for c in children] == ["p1~1", "p1~2"]
    assert all(c["created_at"] and c["updated_at"] >= c["created_at"] for c in children)
    recent = json.loads(ok(cli("list", "--since", "1h", "--json")).stdout)["items"]
    assert {c["id"] for c in recent} == {"p1", "p1~1", "p1~2", "c1"}
    table = ok(cli("list", "--parent", "p1")).stdout
    assert "created" in table and "updated" in table and "c1" not in table
    paged = ok(cli("list", "--parent", "p1", "--limit", "1"))
    assert "--parent p1" in paged.stderr and "--limit 1" in paged.stderr
    bad = cli("list", "--since", "yesterday")
    assert bad.code == 2 and "not a duration" in bad.stderr


# -- --follow, as a process of its own -------------------------------------------------------------------
class Follower:
    """``durastate trace ID --follow`` in a subprocess; its stdout lines are read by a thread into a queue,
    so the test waits for a line (with a timeout) instead of sleeping."""

    def __init__(self, env_vars: dict[str, str], cwd: str, *args: str) -> None:
        self.proc = subprocess.Popen([*durastate_executable(), "trace", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=cwd, env={**os.environ, **env_vars})
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, fragment: str) -> list[str]:
        """The lines up to and including the first that contains ``fragment``."""
        seen: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(f"no line with {fragment!r} within {WAIT}s; got {seen}") from None
            if line is None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"trace --follow ended before {fragment!r}; got {seen}; stderr: {err}")
            seen.append(line)
            if fragment in line:
                return seen

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=WAIT)


@pytest.fixture
def pg_url() -> Iterator[str]:
    with postgres_schema_url("trace") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, env: Env) -> str:
    if request.param == "sqlite":
        return env.store_url
    return request.getfixturevalue("pg_url")  # type: ignore[no-any-return]


def test_follow_prints_steps_as_they_land(durastate_proc: Callable[..., Outcome], env: Env, store_url: str) -> None:
    def run(*args: str) -> Outcome:
        return ok(durastate_proc("--store", store_url, *args))

    run("start", "counter", "--id", "f1")
    run("serve", "--until-idle", "-q")
    follower = Follower({**env.vars(), "DURASTATE_STORE": store_url}, str(env.tmp), "f1", "--follow",
                        "--until-ended", "--poll", "50ms")
    try:
        follower.wait_for("start")  # what was there already
        run("send", "f1", "inc", "--id", "first-inc")
        run("serve", "--until-idle", "-q")
        follower.wait_for("(first-inc)")
        follower.wait_for("context.count: 0 → 1")  # the step's detail lines follow its headline
        run("send", "f1", "inc", "--id", "second-inc")
        run("send", "f1", "finish", "--id", "the-end")
        run("serve", "--until-idle", "-q")
        rest = follower.wait_for("(the-end)")
        assert any("(second-inc)" in line for line in rest)  # in order, each once
        assert follower.proc.wait(timeout=WAIT) == 0  # --until-ended: it stops once the execution has ended
    finally:
        follower.stop()


def test_follow_json_is_one_step_a_line_and_ctrl_c_stops_it(durastate_proc: Callable[..., Outcome],
                                                            env: Env) -> None:
    ok(durastate_proc("start", "counter", "--id", "f2"))
    ok(durastate_proc("serve", "--until-idle", "-q"))
    follower = Follower(env.vars(), str(env.tmp), "f2", "--follow", "--json", "--poll", "50ms")
    try:
        first = json.loads(follower.wait_for("durastate.start")[-1])
        assert (first["index"], first["to"]) == (0, "counting")
        ok(durastate_proc("send", "f2", "inc", "--id", "j-inc"))
        ok(durastate_proc("serve", "--until-idle", "-q"))
        step = json.loads(follower.wait_for("j-inc")[-1])
        assert (step["index"], step["context"]) == (1, {"count": [0, 1]})
        follower.proc.send_signal(2)  # SIGINT, as from Ctrl-C
        assert follower.proc.wait(timeout=WAIT) == 0
    finally:
        follower.stop()


def test_serve_no_trace_records_only_the_step_that_failed(cli: Callable[..., Outcome], env: Env) -> None:
    """`serve --no-trace` is the trace-on-failure deployment (AWS's default): healthy steps commit no trace
    step, and a step that fails still records one, with its error, for `trace` and `show`."""
    (env.definitions / "boom.yaml").write_text(
        "id: boom\ninitial: idle\ncontext: {n: 0}\nstates:\n  idle:\n    on:\n"
        "      inc: {actions: [{assign: {n: {add: [\"$context.n\", 1]}}}]}\n"
        "      boom: {actions: [{assign: {n: {div: [\"$context.n\", 0]}}}]}\n")
    ok(cli("start", "boom", "--id", "b1"))
    ok(cli("send", "b1", "inc", "--id", "e-inc"))
    ok(cli("serve", "--until-idle", "-q", "--no-trace"))
    assert steps_of(cli, "b1") == []
    ok(cli("send", "b1", "boom", "--id", "e-boom"))
    ok(cli("serve", "--until-idle", "-q", "--no-trace"))
    [failed] = steps_of(cli, "b1")
    assert (failed["event_id"], failed["status"]) == ("e-boom", "failed")
    assert "ZeroDivisionError" in failed["error"]
    assert "ZeroDivisionError" in ok(cli("show", "b1")).stdout
