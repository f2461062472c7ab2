"""OpenTelemetry spans: one per committed event, linked across executions by W3C trace context.

A span is made from the commit, not from an attempt. The worker (and the relay, for a region child it creates)
starts the span just before the commit — its context has to go into what the commit writes — and ends it
only once the commit went through. A commit that loses its compare-and-swap, or fails, leaves its span
unended, and an unended span is never exported; the retry makes its own. A redelivered event is a duplicate,
which commits nothing: no span. So a retried or redelivered event is one span.

How spans hang together (the context travels in what durastate already stores and sends, never in a side
channel):

* the first traced commit of an execution (its start) is its root span; its context is kept on the execution
  (``Execution.traceparent``) and every later span of the execution is its child: one trace per execution;
* an emitted event carries the emitting span's context (``Event.traceparent``, stored in the outbox, sent in
  the message body and as the SQS message attribute ``traceparent``); the span that applies it links to it.
  An invoked child's start is such an event, so the child's root span is a child of the span that invoked
  it, and a whole family of executions (an order, its payment child, its regions) is one trace;
* a region child is created by the relay from a spawn intent: its root span is a child of the span that
  spawned it, found in the parent's ``trace_links``;
* a timer's timeout links to the span that armed it (``trace_links`` by state path);
* a task request carries the context to the task (the HTTP ``traceparent`` header) and back in its answer.

The attributes follow the OpenTelemetry proposal for workflow semantic conventions (``workflow.*``, still in
development: open-telemetry/semantic-conventions#1688, #2387), so their names may change with it; what the
proposal has no name for is ``durastate.*``.

Cost: nothing when OpenTelemetry is not installed or no tracer provider is configured. This module imports
no ``opentelemetry`` package at import time; :meth:`Telemetry.tracer` looks for one only in ``sys.modules``
(an application that configured a provider has imported it), unless ``DURASTATE_OTEL=1`` asks durastate to
configure the OTLP exporter itself.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from durastate.engine.ids import TIMEOUT
from durastate.engine.model import TRACEPARENT, Event, Execution
from durastate.errors import TelemetryUnavailable
from durastate.store.base import Emit, Spawn, TimerOp
from durastate.transport.tracecontext import format_traceparent as _format

__all__ = ["ENV", "CommitSpan", "Telemetry", "flush", "spawned_by"]

ENV = "DURASTATE_OTEL"
"""``DURASTATE_OTEL=1``: durastate sets up a tracer provider with the OTLP/HTTP exporter (configured by the
exporter's own ``OTEL_EXPORTER_OTLP_*`` variables, the service by ``OTEL_SERVICE_NAME``) unless the process
already has one (an ADOT Lambda layer's, the application's)."""

_SCOPE = "durastate"
_configure_lock = threading.Lock()


class Telemetry:
    """Where a worker's spans go: ``provider`` if given, else the process's global tracer provider.

    Asked before every commit (:meth:`tracer`), so that a provider the application sets up after building
    its runtime is still used; while there is none the question costs a dictionary look-up. With
    ``DURASTATE_OTEL=1`` the provider is set up (or :class:`TelemetryUnavailable` raised) when it is made.
    """

    def __init__(self, provider: Any = None) -> None:
        self._provider = provider
        self._for: Any = None
        self._tracer: Any = None
        self._configure = os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")
        if self._configure and provider is None:
            _configured()  # now, so that a missing extra stops the runtime from starting, not each event

    def tracer(self) -> Any | None:
        """The tracer to make spans with, or ``None``: no span is made."""
        provider = self._provider
        if provider is None:
            provider = _global_provider()
            if provider is None:
                if not self._configure:
                    return None
                provider = _configured()
        if provider is not self._for:  # the first span, or the process replaced its provider
            from durastate import __version__

            self._for, self._tracer = provider, provider.get_tracer(_SCOPE, __version__)
        return self._tracer


_ENTRY_POINT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
"""A provider named by the environment, which the API loads on first use (else one is set in code)."""


def _global_provider() -> Any | None:
    """The provider the process configured, or ``None`` (OpenTelemetry not imported, or no provider set)."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    if getattr(api, "_TRACER_PROVIDER", api) is None and not _ENTRY_POINT:
        # None set yet: the API's own test, without the environment look-up its getter makes (3 µs a call,
        # twice an event, is 10 % of an in-memory event)
        return None
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None
    return provider


def _configured() -> Any:
    """``DURASTATE_OTEL=1``: the global provider, set up here with the OTLP/HTTP exporter if there is none."""
    with _configure_lock:
        provider = _global_provider()
        if provider is not None:
            return provider
        try:
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise TelemetryUnavailable(f"{ENV}=1 asks for OpenTelemetry spans, which need the otel extra: pip "
                                       f"install 'durastate[otel]', or unset {ENV} ({exc})") from None
        sdk = TracerProvider()  # its resource reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
        sdk.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(sdk)
        return trace.get_tracer_provider()


def flush(timeout_millis: int = 5000) -> None:
    """Export the spans still buffered by the global provider (a Lambda handler, before it returns: the
    function may be frozen before a batch processor's next export). Nothing when there is no provider."""
    provider = _global_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(timeout_millis)


def _span_context(traceparent: str | None) -> Any | None:
    if traceparent is None or TRACEPARENT.fullmatch(traceparent) is None:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags

    _, trace_id, span_id, flags = traceparent.split("-")
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))


def spawned_by(parent: Execution, child_id: str) -> str | None:
    """The context of ``parent``'s span that spawned region ``child_id`` (its trace, the span in its
    ``trace_links``); else the parent's own root span's; ``None`` for an untraced parent."""
    own = parent.traceparent
    if own is None:
        return None
    span_id = parent.trace_links.get(child_id)
    return own if span_id is None else f"{own[:36]}{span_id}{own[52:]}"


class CommitSpan:
    """The span of one commit, started before it and ended (:meth:`end`) only once the commit went through."""

    __slots__ = ("_span", "traceparent")

    def __init__(self, span: Any) -> None:
        self._span = span
        ctx = span.get_span_context()
        self.traceparent = _format(ctx.trace_id, ctx.span_id, int(ctx.trace_flags))
        """This span's W3C context: what the commit's emitted events carry."""

    @classmethod
    def begin(cls, tracer: Any, exe: Execution, event: Event, *, cause: str | None = None,
              start_ns: int | None = None) -> CommitSpan:
        """Start the span of the commit applying ``event`` to ``exe`` (already stepped, not yet committed).

        ``cause``: the context of what caused it (default: the event's own); the parent of the execution's
        first traced commit, a link of every other one."""
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.trace import Link, SpanKind

        own = _span_context(exe.traceparent)
        came = _span_context(cause if cause is not None else event.traceparent)
        links: list[Any] = []
        if own is not None:
            parent = own
            if came is not None:
                links.append(Link(came))
            if event.name == TIMEOUT:
                armed = exe.trace_links.get(str(event.data.get("path")))
                if armed is not None:
                    links.append(Link(trace.SpanContext(own.trace_id, int(armed, 16), is_remote=True,
                                                        trace_flags=own.trace_flags)))
        else:
            parent = came
        context = (trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent is not None
                   else otel_context.Context())
        defn = exe.definition_id
        attributes: dict[str, Any] = {
            "workflow.execution.id": exe.id,
            "workflow.definition.id": defn,
            "durastate.event.name": event.name,
            "durastate.event.id": event.id,
        }
        if exe.definition_version:
            attributes["workflow.definition.version"] = exe.definition_version
        if exe.parent_id is not None:
            attributes["durastate.parent.id"] = exe.parent_id
        span = tracer.start_span(f"{defn} {event.name}", context=context, kind=SpanKind.CONSUMER, links=links,
                                 attributes=attributes, start_time=start_ns if start_ns is not None else time.time_ns())
        return cls(span)

    def prepare(self, exe: Execution, emits: Sequence[Emit], timers: Sequence[TimerOp],
                spawns: Iterable[Spawn]) -> list[Emit]:
        """Write this span's context into what the commit stores: the emitted events (returned, copied: an
        engine's event object is never changed), the execution's own context on its first traced commit,
        and the links of the timers it arms and the regions it spawns."""
        tp = self.traceparent
        if exe.traceparent is None:
            exe.traceparent = tp
        span_id = tp[36:52]
        links = exe.trace_links
        for op in timers:
            if op.action == "schedule":
                links[op.path] = span_id
        for child_id, _root, _context in spawns:
            links[child_id] = span_id
        if links:
            stale = [k for k in links if k not in exe.timers and k not in exe.children]
            for k in stale:
                del links[k]
        return [(t, e.model_copy(update={"traceparent": tp}) if e.traceparent is None else e) for t, e in emits]

    def end(self, exe: Execution, result: str, record: dict[str, Any] | None, attempts: int) -> None:
        """The commit went through: say what it did, and export the span."""
        span = self._span
        if span.is_recording():
            attributes: dict[str, Any] = {"workflow.execution.state": exe.status, "durastate.result": result,
                                          "durastate.attempt": attempts}
            if exe.outcome is not None:
                attributes["workflow.execution.outcome"] = exe.outcome
            if record is not None:
                if record.get("from") is not None:
                    attributes["durastate.state.from"] = str(record["from"])
                if record.get("to") is not None:
                    attributes["durastate.state.to"] = str(record["to"])
                if "attempt" in record:
                    attributes["durastate.retry.attempt"] = int(record["attempt"])
                if "steps" in record:
                    attributes["durastate.steps"] = 1 + len(record["steps"])
            span.set_attributes(attributes)
            error = (record or {}).get("error") or (exe.error if exe.status == "failed" else None)
            if error:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()
