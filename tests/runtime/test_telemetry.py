"""OpenTelemetry spans: one per committed event, and an order's whole life as one linked trace.

The spans go to the SDK's in-memory exporter through a tracer provider given to the runtime (the global
provider can be set once per process; one test sets it and puts it back, as OpenTelemetry's own tests do).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from durastate.client import start_event
from durastate.engine import DefinitionRegistry
from durastate.engine.model import Event, Execution
from durastate.errors import MalformedEvent, TelemetryUnavailable
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.telemetry import Telemetry
from durastate.runtime.worker import Worker
from durastate.store.base import ExecutionStore
from durastate.transport import InMemoryTransport, QueueTransport
from durastate.transport.tracecontext import from_message_attributes, from_xray_header
from durastate.transport.wire import parse_envelope
from tests.otel import as_global, linked, memory_provider, parent_of, spans_of, the_span
from tests.runtime.conftest import HookedStore, ev

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def examples() -> DefinitionRegistry:
    return DefinitionRegistry.from_dir(EXAMPLES)


@pytest.fixture
def otel() -> tuple[TracerProvider, InMemorySpanExporter]:
    return memory_provider()


@pytest.fixture
def exporter(otel: tuple[TracerProvider, InMemorySpanExporter]) -> InMemorySpanExporter:
    return otel[1]


@pytest.fixture
def provider(otel: tuple[TracerProvider, InMemorySpanExporter]) -> TracerProvider:
    return otel[0]


@pytest.fixture
def rt(every_store: ExecutionStore, examples: DefinitionRegistry, clock: ManualClock,
       provider: TracerProvider) -> LocalRuntime:
    transport: QueueTransport
    if type(every_store).__name__ == "SqliteStore":  # its durable inbox: the queue table carries the context too
        from durastate.transport.sqlite import SqliteTransport

        transport = SqliteTransport(every_store, clock)  # type: ignore[arg-type]
    else:
        transport = InMemoryTransport(clock)
    return LocalRuntime(every_store, examples, transport, clock, tracer_provider=provider)


def send(rt: LocalRuntime, target: str, name: str, **data: Any) -> None:
    rt.send(target, Event(id=f"{target}:{name}", name=name, data=data))


def load(rt: LocalRuntime, eid: str) -> Execution:
    exe = rt.get(eid)
    assert exe is not None, eid
    return exe


def hex_id(span_id: int) -> str:
    return f"{span_id:016x}"


def test_an_orders_whole_life_is_one_linked_trace(rt: LocalRuntime, clock: ManualClock,
                                                  exporter: InMemorySpanExporter) -> None:
    rt.start("order", execution_id="o1")
    send(rt, "o1", "add_item", price=40)
    send(rt, "o1", "submit")
    rt.run_until_idle()
    pay = next(cid for cid, ref in load(rt, "o1").children.items() if ref.kind == "invoke")
    send(rt, pay, "authorize", receipt="r-1")
    rt.run_until_idle()
    regions = {ref.path.rsplit(".", 1)[1]: cid for cid, ref in load(rt, "o1").children.items()
               if ref.kind == "region"}
    send(rt, "o1", "label_printed", tracking="T-1")
    rt.run_until_idle()
    send(rt, "o1", "hold")  # on hold for a day: its timer cancels the order
    rt.run_until_idle()
    clock.advance(86_400)
    rt.run_until_idle()
    assert (load(rt, "o1").status, load(rt, "o1").outcome) == ("finished", "cancelled")

    spans = list(exporter.get_finished_spans())
    assert {s.context.trace_id for s in spans} == {spans[0].context.trace_id}  # one trace
    assert {s.attributes["workflow.execution.id"] for s in spans if s.attributes} == {
        "o1", pay, regions["packing"], regions["shipping"]}
    # one span per committed event: the order's own events, each once
    assert [s.attributes["durastate.event.name"] for s in spans_of(spans, "o1") if s.attributes] == [
        "durastate.start", "add_item", "submit", "durastate.finished", "label_printed", "shipped_with",
        "durastate.finished", "hold", "durastate.timeout"]

    root = the_span(spans, "o1", "durastate.start")
    assert root.parent is None  # nothing traced started it: the root of the trace
    assert all(parent_of(s) == root.context.span_id for s in spans_of(spans, "o1") if s is not root)
    # the payment child: started by the span that entered the payment state; its answer links back to it
    submit, paid = the_span(spans, "o1", "submit"), the_span(spans, pay, "authorize")
    assert parent_of(the_span(spans, pay, "durastate.start")) == submit.context.span_id
    entered_fulfilment = spans_of(spans, "o1", "durastate.finished")[0]
    assert paid.context.span_id in linked(entered_fulfilment)
    # the regions: created by the relay, children of the span that spawned them
    for cid in regions.values():
        assert parent_of(the_span(spans, cid, "durastate.start")) == entered_fulfilment.context.span_id
    # a forwarded event links to the order's span that forwarded it; the region's send to its parent too
    label = the_span(spans, "o1", "label_printed")
    assert label.context.span_id in linked(the_span(spans, regions["shipping"], "label_printed"))
    assert the_span(spans, regions["shipping"], "label_printed").context.span_id in linked(
        the_span(spans, "o1", "shipped_with"))
    # the timer: its timeout links to the span that armed it
    assert the_span(spans, "o1", "hold").context.span_id in linked(the_span(spans, "o1", "durastate.timeout"))

    attrs = the_span(spans, "o1", "submit").attributes
    assert attrs is not None
    assert (attrs["workflow.definition.id"], attrs["durastate.state.from"], attrs["durastate.state.to"]) == (
        "order", "cart", "processing.payment")
    assert (attrs["workflow.execution.state"], attrs["durastate.result"], attrs["durastate.attempt"]) == (
        "running", "applied", 1)
    assert attrs["workflow.definition.version"] == load(rt, "o1").definition_version
    end = the_span(spans, "o1", "durastate.timeout").attributes
    assert end is not None and (end["workflow.execution.state"], end["workflow.execution.outcome"]) == (
        "finished", "cancelled")


def test_the_span_context_is_stored_with_the_execution(rt: LocalRuntime, exporter: InMemorySpanExporter) -> None:
    rt.start("order", execution_id="o1")
    rt.run_until_idle()
    exe = load(rt, "o1")
    root = the_span(list(exporter.get_finished_spans()), "o1", "durastate.start")
    flags = int(root.context.trace_flags)
    assert exe.traceparent == f"00-{root.context.trace_id:032x}-{hex_id(root.context.span_id)}-{flags:02x}"
    assert exe.trace_links == {"cart": hex_id(root.context.span_id)}  # the cart's timer, armed by the start


def test_a_commit_that_loses_the_race_makes_no_span_and_its_retry_one(
        any_store: ExecutionStore, registry: DefinitionRegistry, provider: TracerProvider,
        exporter: InMemorySpanExporter) -> None:
    store = HookedStore(any_store)
    telemetry = Telemetry(provider)
    w = Worker(store, registry, telemetry=telemetry)  # type: ignore[arg-type]
    other = Worker(store, registry, telemetry=telemetry)  # type: ignore[arg-type]
    w.handle("c1", start_event("c1", "counter"))
    store.before_commit = lambda _exe: other.handle("c1", ev("inc", "i1"))
    assert w.handle("c1", ev("wait", "w")) == "applied"
    assert w.conflicts == 1
    spans = list(exporter.get_finished_spans())
    assert [s.attributes["durastate.event.name"] for s in spans if s.attributes] == [
        "durastate.start", "inc", "wait"]
    wait = the_span(spans, "c1", "wait")
    assert wait.attributes is not None and wait.attributes["durastate.attempt"] == 2


def test_a_redelivered_event_makes_no_span(any_store: ExecutionStore, registry: DefinitionRegistry,
                                           provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    w = Worker(any_store, registry, telemetry=Telemetry(provider))
    w.handle("c1", start_event("c1", "counter"))
    assert w.handle("c1", ev("inc", "i1")) == "applied"
    assert w.handle("c1", ev("inc", "i1")) == "duplicate"
    assert len(spans_of(list(exporter.get_finished_spans()), "c1", "inc")) == 1


def test_a_producers_active_span_is_the_parent_of_the_execution(
        dict_store: ExecutionStore, examples: DefinitionRegistry, clock: ManualClock, provider: TracerProvider,
        exporter: InMemorySpanExporter) -> None:
    rt = LocalRuntime(dict_store, examples, InMemoryTransport(clock), clock, tracer_provider=provider)
    with provider.get_tracer("shop").start_as_current_span("checkout") as checkout:
        rt.start("order", execution_id="o1")
        send(rt, "o1", "add_item", price=5)
    rt.run_until_idle()
    spans = list(exporter.get_finished_spans())
    ctx = checkout.get_span_context()
    assert parent_of(the_span(spans, "o1", "durastate.start")) == ctx.span_id
    assert ctx.span_id in linked(the_span(spans, "o1", "add_item"))
    assert {s.context.trace_id for s in spans} == {ctx.trace_id}


def test_a_task_request_carries_the_context_and_its_answer_links_back(
        dict_store: ExecutionStore, clock: ManualClock, provider: TracerProvider,
        exporter: InMemorySpanExporter) -> None:
    from durastate.engine import load_definition

    reg = DefinitionRegistry()
    reg.register(load_definition({"id": "t", "initial": "run", "states": {
        "run": {"invoke": {"task": {"python": "json:dumps"}, "input": {"a": 1}}, "on_done": "ok"},
        "ok": {"type": "final", "outcome": "ok"}}}))
    rt = LocalRuntime(dict_store, reg, InMemoryTransport(clock), clock, tracer_provider=provider)
    rt.start("t", execution_id="t1")
    rt.run_until_idle()
    assert load(rt, "t1").outcome == "ok"
    spans = list(exporter.get_finished_spans())
    started, answered = the_span(spans, "t1", "durastate.start"), the_span(spans, "t1", "durastate.finished")
    assert started.context.span_id in linked(answered)


def test_the_applications_global_provider_is_used(dict_store: ExecutionStore, registry: DefinitionRegistry,
                                                  provider: TracerProvider,
                                                  exporter: InMemorySpanExporter) -> None:
    w = Worker(dict_store, registry)
    w.handle("c1", start_event("c1", "counter"))  # no provider yet: no span
    with as_global(provider):
        w.handle("c1", ev("inc", "i1"))
    w.handle("c1", ev("inc", "i2"))  # gone again: no span
    assert [s.attributes["durastate.event.name"] for s in exporter.get_finished_spans() if s.attributes] == ["inc"]


def test_durastate_otel_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURASTATE_OTEL", "1")
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(TelemetryUnavailable, match=r"durastate\[otel\]"):
        Telemetry().tracer()


def test_no_tracer_provider_no_opentelemetry() -> None:
    """Without a provider, an order's whole life imports no OpenTelemetry package (and stores no context)."""
    script = f"""
import sys, json
sys.path.insert(0, {str(ROOT)!r})
from durastate.engine import DefinitionRegistry
from durastate.engine.model import Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store import DictStore
rt = LocalRuntime(DictStore(), DefinitionRegistry.from_dir({str(EXAMPLES)!r}), clock=ManualClock(0.0))
rt.start("order", execution_id="o1")
rt.send("o1", Event(id="a", name="add_item", data={{"price": 3}}))
rt.send("o1", Event(id="s", name="submit"))
rt.run_until_idle()
exe = rt.get("o1")
print(json.dumps([sorted(m for m in sys.modules if m.startswith("opentelemetry")), exe.traceparent,
                  exe.trace_links, exe.active_path]))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == [[], None, {}, "processing.payment"]


def test_the_context_comes_from_the_message_attributes_or_the_xray_header() -> None:
    tp = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    assert from_message_attributes({"traceparent": {"stringValue": tp, "dataType": "String"}}) == tp
    assert from_message_attributes({"traceparent": {"StringValue": tp, "DataType": "String"}}) == tp
    xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    assert from_xray_header(xray) == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    assert from_message_attributes({}, {"AWSTraceHeader": xray}) == from_xray_header(xray)
    assert from_message_attributes({"traceparent": {"stringValue": "junk"}}) is None
    assert from_xray_header("Root=1-5759e988-bd862e3fe1be46a994272793") is None  # no parent: nothing to link


def test_a_malformed_traceparent_on_the_wire_is_refused_with_the_format() -> None:
    with pytest.raises(MalformedEvent, match="not a W3C trace context"):
        parse_envelope({"target_id": "o1", "event": {"id": "e", "name": "x", "traceparent": "00-zz"}})


def test_durastate_otel_sends_the_spans_over_otlp_http(tmp_path: Path) -> None:
    """``DURASTATE_OTEL=1`` with the exporter's own variables: the spans reach an OTLP/HTTP endpoint (a
    collector stand-in on this machine), in a fresh process (a global provider is set once per process)."""
    import http.server
    import threading

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, bytes]] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from durastate.engine import DefinitionRegistry
from durastate.runtime import LocalRuntime, ManualClock, telemetry
from durastate.store import DictStore
rt = LocalRuntime(DictStore(), DefinitionRegistry.from_dir({str(EXAMPLES)!r}), clock=ManualClock(0.0))
rt.start("order", execution_id="o1")
rt.run_until_idle()
telemetry.flush()
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DURASTATE_"))}
    env.update({"DURASTATE_OTEL": "1", "OTEL_SERVICE_NAME": "shop", "OTEL_BSP_SCHEDULE_DELAY": "60000",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}"})
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr
    (path, body), = received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    (resource,) = request.resource_spans
    assert {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"] == "shop"
    assert [s.name for scope in resource.scope_spans for s in scope.spans] == ["order durastate.start"]
