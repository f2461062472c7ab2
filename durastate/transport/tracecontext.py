"""W3C trace context on the messages producers and the runtime send (:mod:`durastate.runtime.telemetry` makes
the spans).

An event carries the context of the span that sent it in ``Event.traceparent``; the SQS transport also puts it
in the message attribute :data:`MESSAGE_ATTRIBUTE`, where OpenTelemetry's instrumentations of SQS look for it
(and put it, for a producer that sends with an instrumented boto3). Nothing here imports OpenTelemetry: the
caller's active span is read only when the application has imported it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from durastate.engine.model import TRACEPARENT, Event

__all__ = ["MESSAGE_ATTRIBUTE", "current_traceparent", "format_traceparent", "from_message_attributes",
           "from_xray_header", "stamp"]

MESSAGE_ATTRIBUTE = "traceparent"
"""The SQS message attribute (and HTTP header) that carries an event's W3C trace context."""


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """The ``traceparent`` header of a span context."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def current_traceparent() -> str | None:
    """The W3C context of the caller's active span (a producer's ``start``/``send``), or ``None``: none, or
    OpenTelemetry not in use."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    ctx = api.get_current_span().get_span_context()
    return format_traceparent(ctx.trace_id, ctx.span_id, int(ctx.trace_flags)) if ctx.is_valid else None


def stamp(events: Iterable[tuple[str, Event]], traceparent: str | None) -> list[tuple[str, Event]]:
    """``events`` with ``traceparent`` on each that has none yet (producers' events: see
    :func:`current_traceparent`)."""
    if traceparent is None:
        return list(events)
    return [(t, e if e.traceparent is not None else e.model_copy(update={"traceparent": traceparent}))
            for t, e in events]


def from_xray_header(header: str | None) -> str | None:
    """The W3C form of an X-Ray trace header (``Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=1``, the
    ``AWSTraceHeader`` of an SQS message), or ``None`` if it has no root and parent."""
    if not header:
        return None
    parts = dict(p.split("=", 1) for p in header.split(";") if "=" in p)
    root, parent = parts.get("Root", ""), parts.get("Parent", "")
    pieces = root.split("-")
    if len(pieces) != 3 or pieces[0] != "1":
        return None
    sampled = "01" if parts.get("Sampled") == "1" else "00"
    value = f"00-{(pieces[1] + pieces[2]).lower()}-{parent.lower()}-{sampled}"
    return value if TRACEPARENT.fullmatch(value) else None


def from_message_attributes(attributes: Mapping[str, Any] | None, system: Mapping[str, Any] | None = None
                            ) -> str | None:
    """The trace context an SQS message brings besides its body: the ``traceparent`` message attribute (as
    boto3 reads it, ``StringValue``, or as Lambda hands it over, ``stringValue``), else the X-Ray
    ``AWSTraceHeader`` system attribute. ``None`` if neither is a valid one."""
    attr = (attributes or {}).get(MESSAGE_ATTRIBUTE)
    if isinstance(attr, Mapping):
        value = attr.get("StringValue", attr.get("stringValue"))
        if isinstance(value, str) and TRACEPARENT.fullmatch(value):
            return value
    header = (system or {}).get("AWSTraceHeader")
    return from_xray_header(header) if isinstance(header, str) else None
