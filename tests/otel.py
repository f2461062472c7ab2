"""What the OpenTelemetry tests share: a tracer provider that keeps its spans in memory, set as the process's
global provider for one test and then taken back (OpenTelemetry allows setting it once per process; its own
tests reset it the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@contextmanager
def as_global(provider: TracerProvider) -> Iterator[None]:
    """``provider`` is the global tracer provider (the application's, an ADOT layer's) while in the block."""
    trace.set_tracer_provider(provider)
    try:
        yield
    finally:
        trace._TRACER_PROVIDER = None
        trace._TRACER_PROVIDER_SET_ONCE = type(trace._TRACER_PROVIDER_SET_ONCE)()  # a fresh "set once" guard


def spans_of(spans: list[ReadableSpan], execution_id: str, event: str | None = None) -> list[ReadableSpan]:
    """The spans of one execution (and one event name), in the order they ended."""
    return [s for s in spans if s.attributes is not None and s.attributes.get("workflow.execution.id") == execution_id
            and (event is None or s.attributes["durastate.event.name"] == event)]


def the_span(spans: list[ReadableSpan], execution_id: str, event: str) -> ReadableSpan:
    (span,) = spans_of(spans, execution_id, event)
    return span


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def linked(span: ReadableSpan) -> set[int]:
    return {link.context.span_id for link in span.links}
