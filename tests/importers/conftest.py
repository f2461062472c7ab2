"""Helpers for the importer tests: run an imported definition to its end on the real local runtime."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Execution
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.memory import DictStore

HERE = Path(__file__).parent


def run_to_end(document: dict[str, Any], events: tuple[str, ...] = (), *, max_seconds: float = 20.0,
               invoked: list[dict[str, Any]] | None = None) -> Execution:
    """Start an execution of ``document`` on a LocalRuntime, send ``events``, and let time pass (a manual
    clock, half a second per round, so the delayed sends mapped onto timers fire) until it ends or
    ``max_seconds`` of chart time have passed. ``invoked``: the definitions the chart invokes (an import's
    ``invoked``), registered beside it. Returns the execution as the store holds it."""
    from durastate.engine.model import Event

    registry = DefinitionRegistry([load_definition(document), *(load_definition(d) for d in invoked or ())])
    clock = ManualClock(1_700_000_000.0)
    logging.getLogger("durastate").setLevel(logging.ERROR)
    rt = LocalRuntime(DictStore(), registry, clock=clock)
    eid = rt.start(document["id"], execution_id="x-1")
    rt.run_until_idle()
    for name in events:
        rt.send(eid, Event(name=name))
        rt.run_until_idle()
    waited = 0.0
    while True:
        exe = rt.get(eid)
        assert exe is not None
        if exe.status != "running" or waited >= max_seconds:
            return exe
        clock.advance(0.5)
        waited += 0.5
        rt.run_until_idle()
