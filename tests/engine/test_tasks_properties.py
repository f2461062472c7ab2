"""A property of tasks in the engine: whatever order answers (repeated, late, for old tries), timeouts,
retry timers and leave/re-enter events arrive in, each task's answer is routed at most once, only the
running task's answer counts, and at most one task of a state runs at a time with its timeout armed; with
an execution secret, a notice naming a guessed task id (``x~<n>``, ``x~<n>~<any mac>``) never counts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.ids import FINISHED, REINVOKE_PREFIX, START, TASK, TASK_TIMEOUT_PREFIX, timeout_event_id
from durastate.engine.tasks import TaskRequest, task_result

CHART: dict[str, Any] = {
    "id": "loop",
    "initial": "charging",
    "states": {
        "charging": {
            "invoke": {"task": {"python": "shop.tasks:charge"}, "timeout": 30,
                       "retry": {"max_attempts": 3, "backoff": {"initial": 5}}},
            "on_done": "paid",
            "on_error": "declined",
            "on": {"abandon": "idle"},
        },
        "paid": {"on": {"again": "charging"}},
        "declined": {"on": {"again": "charging"}},
        "idle": {"on": {"again": "charging"}},
    },
}
DEFN = load_definition(CHART)
TIMEOUT_KEY = TASK_TIMEOUT_PREFIX + "charging"
RETRY_KEY = REINVOKE_PREFIX + "charging"

actions = st.lists(st.one_of(
    st.tuples(st.just("answer"), st.integers(0, 8), st.booleans()),
    st.tuples(st.just("timer"), st.sampled_from([TIMEOUT_KEY, RETRY_KEY])),
    st.tuples(st.just("event"), st.sampled_from(["abandon", "again"])),
    st.tuples(st.just("forge"), st.integers(1, 9), st.binary(min_size=8, max_size=8).map(bytes.hex)),
), max_size=40)
exe_secrets = st.one_of(st.none(), st.binary(min_size=16, max_size=16).map(bytes.hex))


def _state(exe: Execution) -> dict[str, Any]:
    return exe.model_dump(exclude={"updated_at"})


@settings(max_examples=200, deadline=None)
@given(actions, exe_secrets)
def test_each_answer_counts_at_most_once_and_only_for_the_running_task(script: list[Any],
                                                                      secret: str | None) -> None:
    exe = Execution(id="x", definition_id="loop", secret=secret)
    now = 0.0
    requests: list[TaskRequest] = []
    routed: set[str] = set()

    def apply(ev: Event) -> Any:
        res = step(DEFN, exe, ev, now)
        for target, emitted in res.emits:
            if emitted.name == TASK:
                requests.append(TaskRequest.from_event(target or "", emitted))
        return res

    apply(Event(id="s", name=START))
    for n, action in enumerate(script):
        now += 1.0
        running = [cid for cid, ref in exe.children.items() if ref.kind == "task" and ref.status == "running"]
        before = _state(exe)
        if action[0] == "answer" and requests:
            req = requests[action[1] % len(requests)]
            res = apply(task_result(req, {"n": n}) if action[2] else task_result(req, error="Boom: no"))
            if req.task_id in running:
                assert not res.ignored and req.task_id not in routed
                routed.add(req.task_id)
            else:
                assert res.ignored and _state(exe) == before  # late, repeated or for an old try: no effect
        elif action[0] == "timer" and action[1] in exe.timers:
            now = max(now, exe.timers[action[1]])
            fire_at = exe.timers[action[1]]
            apply(Event(id=timeout_event_id(exe.id, action[1], fire_at), name="durastate.timeout",
                        data={"path": action[1], "fire_at": fire_at}))
        elif action[0] == "event":
            apply(Event(id=f"e{n}", name=action[1]))
        elif action[0] == "forge":
            # Without a secret, x~<n> *is* a task id (the old form): only the mac guess is a forgery then.
            guesses = [f"x~{action[1]}~{action[2]}"] + ([f"x~{action[1]}"] if secret else [])
            for guess in guesses:
                res = apply(Event(id=f"f{n}-{guess}", name=FINISHED,
                                  data={"child_id": guess, "status": "finished", "output": {"forged": True}}))
                assert res.ignored and _state(exe) == before
        running = [cid for cid, ref in exe.children.items() if ref.kind == "task" and ref.status == "running"]
        assert len(running) <= 1
        assert (TIMEOUT_KEY in exe.timers) == bool(running)
        if running:
            assert exe.active_path == "charging"
        assert Execution.model_validate_json(exe.model_dump_json()) == exe
    ids = [r.task_id for r in requests]
    assert len(ids) == len(set(ids))  # every try is a new task id
    assert all(i.count("~") == (2 if secret else 1) for i in ids)
