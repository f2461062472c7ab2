"""Telemetry section: what OpenTelemetry costs the worker per event, off and on.

The worker of the engine section's headline row (``Worker.handle`` on ``DictStore``, a full commit per event,
chart 1) in three contenders, interleaved in one run:

* **extra absent** — no ``opentelemetry`` package in the process (``sys.modules`` without it, as on an install
  without the ``otel`` extra): the worker's one look-up finds nothing;
* **tracing off** — OpenTelemetry imported but no tracer provider configured (``pip install durastate[otel]``
  and nothing set up): the worker asks the API for the global provider before each commit and finds the
  default proxy;
* **tracing on** — spans to an SDK tracer provider whose processor drops them (no export cost): a span per
  commit, started before it and ended after.

Targets: tracing off within 5 % of the extra absent (it is the path of every user who installs the extra
and configures nothing); tracing on is reported, not targeted (its cost is the SDK's).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from bench._util import interleave, paired_ratio, rate
from bench.engine import _registry
from bench.peers import CHART1_CYCLE

ABSENT, OFF, ON = "extra absent", "tracing off (installed, no provider)", "tracing on (SDK, spans dropped)"


@contextlib.contextmanager
def _without_opentelemetry() -> Iterator[None]:
    """The process as without the extra: no ``opentelemetry`` module importable by name while in the block
    (put back afterwards)."""
    hidden = {name: mod for name, mod in sys.modules.items() if name == "opentelemetry" or
              name.startswith("opentelemetry.")}
    for name in hidden:
        del sys.modules[name]
    try:
        yield
    finally:
        sys.modules.update(hidden)


def _contender(events: int, provider: Any = None, hide: bool = False) -> Any:
    from durastate.engine import Event
    from durastate.runtime.telemetry import Telemetry
    from durastate.runtime.worker import Worker
    from durastate.store.memory.sync import DictStore

    reg = _registry()
    counter = [0]
    names = (CHART1_CYCLE * (events // len(CHART1_CYCLE) + 1))[:events]

    def run() -> float:
        w = Worker(DictStore(), reg, clock=lambda: 1_700_000_000.0, telemetry=Telemetry(provider))
        w.handle("x", Event(id="x:start", name="durastate.start", data={"definition_id": "toggle"}))

        def drive() -> None:
            for name in names:
                counter[0] += 1
                w.handle("x", Event(id=f"e{counter[0]}", name=name))

        with _without_opentelemetry() if hide else contextlib.nullcontext():
            result = rate(events, drive)
        exe = w.store.load("x")
        if exe is None or exe.active_path != "idle":
            raise AssertionError(f"the worker ended in {exe and exe.active_path}, not idle")
        return result

    return run


def run(events: int = 2000, repeats: int = 9, warmup: bool = True) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class _Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    series = interleave({ABSENT: _contender(events, hide=True), OFF: _contender(events),
                         ON: _contender(events, provider)}, repeats, warmup)
    return {"events": events, "repeats": repeats, "series": series,
            "ratios": {OFF: paired_ratio(series[OFF], series[ABSENT]), ON: paired_ratio(series[ON], series[ABSENT])}}
