"""Tasks run by the runtime (``invoke: {task: ...}``): on a SQLite file and on the real PostgreSQL.

The Python callables the definitions name live in this module (``tests.runtime.test_tasks:charge``).
A "crash" is an exception that aborts the relay at a chosen point (before the task runs, or after its
answer was sent and before the request was acked); a fresh runtime on the same database then carries on,
as a restarted process would.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import TASK, task_id
from durastate.engine.tasks import TaskRequest
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.tasks import MAX_ERROR_CHARS, MAX_RESULT_BYTES, TaskRunner
from durastate.store import DictStore, SqliteStore
from durastate.store.base import ExecutionStore
from durastate.transport import InMemoryTransport
from durastate.transport.sqlite import SqliteTransport

from .conftest import HookedStore

CALLS: dict[str, list[dict[str, Any]]] = {}
"""What the callables below were called with, by task id (they are idempotent on it)."""


def charge(doc: dict[str, Any]) -> dict[str, Any]:
    CALLS.setdefault(doc["task_id"], []).append(doc)
    if doc["input"]["amount"] > 100:
        raise ValueError("amount over the limit")
    return {"receipt": f"r-{doc['task_id']}", "amount": doc["input"]["amount"]}


def too_big(doc: dict[str, Any]) -> str:
    return "x" * (MAX_RESULT_BYTES + 1)


def not_json(doc: dict[str, Any]) -> dict[str, Any]:
    return {"ratio": math.nan}


def chart(target: str = "tests.runtime.test_tasks:charge", kind: str = "python",
          **invoke: Any) -> dict[str, Any]:
    return {
        "id": "pay",
        "initial": "charging",
        "context": {"amount": 5},
        "states": {
            "charging": {
                "invoke": {"task": {kind: target}, "input": {"amount": "$context.amount"}, **invoke},
                "on_done": {"target": "paid", "actions": [{"assign": {"result": "$event.output"}}]},
                "on_error": {"target": "declined", "actions": [{"assign": {"why": "$event.error"}}]},
            },
            "paid": {"type": "final"},
            "declined": {"type": "final"},
        },
    }


class Crash(BaseException):
    """A process dying at a chosen point (not an Exception: nothing in the runtime handles it)."""


class CrashingRunner(TaskRunner):
    """Dies before running the first ``crashes`` tasks."""

    def __init__(self, crashes: int = 1) -> None:
        super().__init__()
        self.crashes = crashes

    def run(self, request: TaskRequest) -> Any:
        if self.crashes:
            self.crashes -= 1
            raise Crash("killed before the task ran")
        return super().run(request)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[Any]:
    """A factory of (store, transport) on one database; each call is a restarted process's connection."""
    opened: list[Any] = []
    if request.param == "sqlite":
        path = tmp_path / "tasks.db"

        def make() -> tuple[ExecutionStore, Any]:
            store = SqliteStore(path)
            opened.append(store)
            return store, SqliteTransport(store, clock=clock)

        yield make
    else:
        psycopg = pytest.importorskip("psycopg")
        from durastate.store.postgres.sync import PostgresStore
        from durastate.transport.postgres import PostgresTransport

        server = os.environ.get("DURASTATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
        try:
            psycopg.connect(server, connect_timeout=3).close()
        except psycopg.OperationalError as exc:
            pytest.skip(f"PostgreSQL not reachable at {server}: {exc}")
        schema = f"t_{uuid.uuid4().hex[:12]}"
        dsn = f"{server}{'&' if '?' in server else '?'}schema={schema}"

        def make() -> tuple[ExecutionStore, Any]:
            store = PostgresStore.from_dsn(dsn)
            transport = PostgresTransport.from_dsn(dsn, clock=clock)
            opened.extend((transport, store))
            return store, transport

        yield make
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    for thing in opened:
        with contextlib.suppress(Exception):
            thing.close()


def registry(doc: dict[str, Any]) -> DefinitionRegistry:
    return DefinitionRegistry([load_definition(doc)])


def first_task(store: ExecutionStore, eid: str) -> str:
    """The id of the first task of ``eid``: derived from its secret, so read from the store."""
    exe = store.load(eid)
    assert exe is not None and exe.secret
    return task_id(eid, 1, exe.secret)


def test_a_python_task_answers_on_done(database: Any, clock: ManualClock) -> None:
    store, transport = database()
    rt = LocalRuntime(store, registry(chart()), transport, clock)
    eid = f"p-{uuid.uuid4().hex[:8]}"
    rt.start("pay", {"amount": 7}, execution_id=eid)
    stats = rt.run_until_idle()
    exe = rt.get(eid)
    assert exe is not None and exe.active_path == "paid"
    tid = first_task(store, eid)
    assert tid.startswith(f"{eid}~1~") and len(tid) == len(eid) + 19  # <id>~1~<16 hex>
    assert exe.context["result"] == {"receipt": f"r-{tid}", "amount": 7}
    assert stats.tasks == 1 and len(CALLS[tid]) == 1
    assert CALLS[tid][0] == {"task_id": tid, "execution_id": eid, "state": "charging",
                             "attempt": 1, "input": {"amount": 7}}


def test_a_raising_task_answers_on_error(database: Any, clock: ManualClock) -> None:
    store, transport = database()
    rt = LocalRuntime(store, registry(chart()), transport, clock)
    eid = f"p-{uuid.uuid4().hex[:8]}"
    rt.start("pay", {"amount": 500}, execution_id=eid)
    rt.run_until_idle()
    exe = rt.get(eid)
    assert exe is not None and exe.active_path == "declined"
    assert exe.context["why"] == "ValueError: amount over the limit"


def test_a_crash_between_commit_and_run_still_runs_the_task(database: Any, clock: ManualClock) -> None:
    store, transport = database()
    rt = LocalRuntime(store, registry(chart()), transport, clock, tasks=CrashingRunner())
    eid = f"p-{uuid.uuid4().hex[:8]}"
    rt.start("pay", {"amount": 3}, execution_id=eid)
    with pytest.raises(Crash):
        rt.run_until_idle()
    tid = first_task(store, eid)
    assert tid not in CALLS
    # The request was committed with the state entry: it waits in the outbox for the next relay.
    assert [e.event.name for e in store.pending_outbox()] == [TASK]
    store2, transport2 = database()
    rt2 = LocalRuntime(store2, registry(chart()), transport2, clock)
    rt2.run_until_idle()
    exe = rt2.get(eid)
    assert exe is not None and exe.active_path == "paid" and len(CALLS[tid]) == 1
    assert store2.pending_outbox() == []


def test_a_redelivered_answer_is_a_duplicate(database: Any, clock: ManualClock) -> None:
    inner, transport = database()
    store = HookedStore(inner)
    store.fail_ack_outbox = 1  # the answer went out; the process dies before the request is acked
    rt = LocalRuntime(store, registry(chart()), transport, clock)  # type: ignore[arg-type]
    eid = f"p-{uuid.uuid4().hex[:8]}"
    rt.start("pay", {"amount": 4}, execution_id=eid)
    with pytest.raises(RuntimeError, match="simulated crash"):
        rt.run_until_idle()
    store2, transport2 = database()
    rt2 = LocalRuntime(store2, registry(chart()), transport2, clock)
    stats = rt2.run_until_idle()
    calls = CALLS[first_task(store2, eid)]
    assert len(calls) == 2 and calls[0]["task_id"] == calls[1]["task_id"]  # at least once, same task id
    assert (stats.applied, stats.duplicates) == (1, 1)  # the second answer has the first one's id
    exe = rt2.get(eid)
    assert exe is not None and exe.active_path == "paid"
    done = [t for t in store2.read_trace(eid) if t.get("event") == "durastate.finished"]
    assert len(done) == 1


def test_a_timeout_abandons_a_silent_task_and_its_late_answer_is_ignored(clock: ManualClock) -> None:
    store, transport = DictStore(), InMemoryTransport(clock)
    reg = registry(chart(timeout="30s"))
    rt = LocalRuntime(store, reg, transport, clock, tasks=CrashingRunner(crashes=1))
    rt.start("pay", {"amount": 2}, execution_id="silent")
    with pytest.raises(Crash):
        rt.run_until_idle()
    clock.advance(31)
    rt2 = LocalRuntime(store, reg, transport, clock, tasks=CrashingRunner(crashes=1))
    assert rt2.sweeper.run_once(10) == 1  # the task's timeout is a durable timer like any other
    with pytest.raises(Crash):  # the worker applies the timeout; the relay still cannot run the task
        rt2.run_until_idle()
    exe = rt2.get("silent")
    assert exe is not None and exe.active_path == "declined"
    assert exe.context["why"] == f"TaskTimeout: task {first_task(store, 'silent')} did not answer within 30s"
    rt3 = LocalRuntime(store, reg, transport, clock, tasks=CrashingRunner(crashes=0))
    stats = rt3.run_until_idle()  # the task runs at last; its answer is too late
    late = rt3.get("silent")
    assert late is not None and (late.active_path, late.context) == (exe.active_path, exe.context)
    assert stats.tasks == 1 and stats.ignored == 1  # it ran at last; its answer came too late


@pytest.mark.parametrize(("target", "says"), [
    ("tests.runtime.test_tasks:too_big", f"over the {MAX_RESULT_BYTES} a task may answer with"),
    ("tests.runtime.test_tasks:not_json", "result.ratio is nan: JSON has no non-finite numbers"),
    ("tests.runtime.test_tasks:missing", "TaskNotFound: cannot import"),
])
def test_a_result_that_cannot_be_stored_is_an_error(clock: ManualClock, target: str, says: str) -> None:
    rt = LocalRuntime(DictStore(), registry(chart(target)), InMemoryTransport(clock), clock)
    rt.start("pay", {"amount": 1}, execution_id="bad")
    rt.run_until_idle()
    exe = rt.get("bad")
    assert exe is not None and exe.active_path == "declined", exe.error
    assert says in exe.context["why"]


# -- HTTP, against a real server in this process --------------------------------------------------------
class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None, dict[str, Any]]] = []
    traceparents: list[str | None] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, self.headers.get("Idempotency-Key"), body))
        self.traceparents.append(self.headers.get("traceparent"))
        status, answer = {
            "/ok": (200, json.dumps({"echo": body["input"], "key": self.headers.get("Idempotency-Key")})),
            "/empty": (204, ""),
            "/broken": (500, "database on fire"),
            "/html": (200, "<html>hello</html>"),
        }[self.path]
        data = answer.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize(("path", "state", "expect"), [
    ("/ok", "paid", {"echo": {"amount": 9}, "key": "<task id>"}),
    ("/empty", "paid", None),
    ("/broken", "declined", "TaskError: HTTP 500 from {url}: database on fire"),
    ("/html", "declined", "TaskResultInvalid: {url} answered with something that is not JSON"),
])
def test_an_http_task_posts_json_and_routes_the_answer(server: str, clock: ManualClock, path: str,
                                                       state: str, expect: Any) -> None:
    url = server + path
    store = DictStore()
    rt = LocalRuntime(store, registry(chart(url, "http")), InMemoryTransport(clock), clock)
    rt.start("pay", {"amount": 9}, execution_id="h")
    rt.run_until_idle()
    exe = rt.get("h")
    tid = first_task(store, "h")
    assert exe is not None and exe.active_path == state
    if state == "paid":
        assert exe.context["result"] == (expect and {**expect, "key": tid})
    else:
        assert exe.context["why"].startswith(expect.format(url=url))
    assert (path, tid) == _Handler.seen[-1][:2] and _Handler.seen[-1][2]["task_id"] == tid


def test_an_http_task_gets_the_trace_context_of_the_span_that_started_it(server: str, clock: ManualClock) -> None:
    from tests.otel import memory_provider, the_span

    provider, exporter = memory_provider()
    rt = LocalRuntime(DictStore(), registry(chart(server + "/ok", "http")), InMemoryTransport(clock), clock,
                      tracer_provider=provider)
    rt.start("pay", {"amount": 9}, execution_id="traced")
    rt.run_until_idle()
    started = the_span(list(exporter.get_finished_spans()), "traced", "durastate.start").context
    assert _Handler.traceparents[-1] == f"00-{started.trace_id:032x}-{started.span_id:016x}-" \
                                        f"{int(started.trace_flags):02x}"
    untraced = LocalRuntime(DictStore(), registry(chart(server + "/ok", "http")), InMemoryTransport(clock), clock)
    untraced.start("pay", {"amount": 9}, execution_id="plain")
    untraced.run_until_idle()
    assert _Handler.traceparents[-1] is None  # no provider: no header


def test_an_unreachable_endpoint_is_an_error(clock: ManualClock) -> None:
    url = "http://127.0.0.1:9/nothing"  # the discard port: nothing listens there
    rt = LocalRuntime(DictStore(), registry(chart(url, "http")), InMemoryTransport(clock), clock)
    rt.start("pay", {"amount": 1}, execution_id="u")
    rt.run_until_idle()
    exe = rt.get("u")
    assert exe is not None and exe.context["why"].startswith(f"TaskError: cannot reach {url}")


# -- Lambda, through an injected invoker (what boto3 answers) -------------------------------------------
def test_a_lambda_function_error_is_the_error_with_its_type(clock: ManualClock) -> None:
    def invoke(function: str, payload: bytes) -> tuple[bytes, str | None]:
        doc = json.loads(payload)
        if doc["input"]["amount"] > 1:
            return json.dumps({"errorType": "CardDeclined", "errorMessage": "no funds"}).encode(), "Unhandled"
        return json.dumps({"ok": function}).encode(), None

    reg = registry(chart("arn:aws:lambda:us-east-1:123456789012:function:charge", "lambda"))
    rt = LocalRuntime(DictStore(), reg, InMemoryTransport(clock), clock,
                      tasks=TaskRunner(lambda_invoker=invoke))
    rt.start("pay", {"amount": 1}, execution_id="ok")
    rt.start("pay", {"amount": 2}, execution_id="no")
    rt.run_until_idle()
    ok, no = rt.get("ok"), rt.get("no")
    assert ok is not None and ok.context["result"] == {"ok": "arn:aws:lambda:us-east-1:123456789012:function:charge"}
    assert no is not None and no.context["why"].startswith("CardDeclined: no funds (Lambda arn:")


def huge_error(doc: dict[str, Any]) -> None:
    raise RuntimeError("x" * 100_000)


def test_a_huge_error_text_is_cut_to_fit_a_message(clock: ManualClock) -> None:
    rt = LocalRuntime(DictStore(), registry(chart("tests.runtime.test_tasks:huge_error")),
                      InMemoryTransport(clock), clock)
    rt.start("pay", {"amount": 1}, execution_id="loud")
    rt.run_until_idle()
    exe = rt.get("loud")
    assert exe is not None and exe.active_path == "declined"
    assert exe.context["why"].startswith("RuntimeError: xxx") and len(exe.context["why"]) == MAX_ERROR_CHARS


# -- Lambda through boto3: the request boto3 makes, checked against the service model (botocore's Stubber) -
def test_the_boto3_path_invokes_synchronously_and_reads_a_function_error() -> None:
    import io

    import boto3
    from botocore.response import StreamingBody
    from botocore.stub import Stubber

    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    runner = TaskRunner(lambda_client=client)
    request = TaskRequest(task_id="x~1", execution_id="x", path="charging", kind="lambda", target="charge",
                          input={"amount": 1}, timeout=None, attempt=1)
    payload = json.dumps(request.payload()).encode()

    def body(doc: dict[str, Any]) -> StreamingBody:
        raw = json.dumps(doc).encode()
        return StreamingBody(io.BytesIO(raw), len(raw))

    with Stubber(client) as stub:
        expected = {"FunctionName": "charge", "InvocationType": "RequestResponse", "Payload": payload}
        stub.add_response("invoke", {"StatusCode": 200, "Payload": body({"receipt": "r"})}, expected)
        stub.add_response("invoke", {"StatusCode": 200, "FunctionError": "Unhandled",
                                     "Payload": body({"errorType": "Declined", "errorMessage": "no"})}, expected)
        ok, failed = runner.run(request), runner.run(request)
    assert ok.data["status"] == "finished" and ok.data["output"] == {"receipt": "r"}
    assert failed.data["status"] == "failed" and failed.data["error"] == "Declined: no (Lambda charge)"
    assert ok.id == failed.id  # the same task: the same answer id, whichever answer goes first


BARRIER = threading.Barrier(3, timeout=30)


def meet(doc: dict[str, Any]) -> int:
    """Returns only once three tasks are inside it at the same time."""
    return BARRIER.wait()


def test_the_tasks_of_one_relay_pass_run_at_once(clock: ManualClock) -> None:
    BARRIER.reset()
    rt = LocalRuntime(DictStore(), registry(chart("tests.runtime.test_tasks:meet")), InMemoryTransport(clock),
                      clock, tasks=TaskRunner(max_parallel=3))
    for n in range(3):
        rt.start("pay", {"amount": 1}, execution_id=f"m{n}")
    rt.run_until_idle()
    results = [rt.get(f"m{n}") for n in range(3)]
    assert all(exe is not None and exe.active_path == "paid" for exe in results)
    assert sorted(exe.context["result"] for exe in results if exe is not None) == [0, 1, 2]
