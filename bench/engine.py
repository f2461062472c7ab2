"""Engine section: durastate's worker on ``DictStore`` against transitions, python-statemachine and sismic.

Same chart, same event sequence, events per second (median of interleaved repeats) and the ratio to
each peer. durastate runs with a *full commit* per event: the worker loads the execution with its dedupe
check, steps a detached copy of it, and commits it with the event's dedupe mark and its trace step —
exactly what it does on a durable store, minus the I/O.

Copy-on-load: ``DictStore`` hands out its live objects, so by default the worker steps a *copy* (the
commit then swaps the copy in). That is what keeps a half-applied step out of the store if a step
ever raises, and lets the store's compare-and-swap see a concurrent writer; a single-user embedded
store does not need the latter, but the former is still a guarantee worth its price, so the headline
row keeps the default (copy on). The ``copy_on_load=False`` row shows what skipping it buys.

Chart 2 has a parallel state. durastate runs each region as a child execution (that is what makes regions
durable and distributable), so a fork is two child creations by the relay and the join is two
``durastate.finished`` events; the durastate row for chart 2 therefore runs the whole local runtime (worker,
relay, in-memory transport) per event — every child commit and forwarded event included.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._util import Series, interleave, paired_ratio, rate
from bench.peers import CHART1_CYCLE, CHART2_CYCLE, PEERS_CHART1, PEERS_CHART2, Peer

DEFS = Path(__file__).parent / "defs"


def _registry() -> Any:
    from durastate.engine import DefinitionRegistry, load_definition

    reg = DefinitionRegistry()
    reg.register(load_definition(DEFS / "toggle.yaml"))
    reg.register(load_definition(DEFS / "history.yaml"))
    reg.register(load_definition(DEFS / "history_inline.yaml"))
    return reg


def durastate_worker(definition_id: str, copy_on_load: bool | None = None) -> Peer:
    """durastate's ``Worker.handle`` per event on a ``DictStore`` (full commit: dedupe mark + trace)."""
    from durastate.engine import Event
    from durastate.runtime.worker import Worker
    from durastate.store.memory.sync import DictStore

    reg = _registry()
    counter = [0]

    def make() -> Any:
        store = DictStore()
        w = Worker(store, reg, clock=lambda: 1_700_000_000.0, copy_on_load=copy_on_load)
        w.handle("x", Event(id="x:start", name="durastate.start", data={"definition_id": definition_id}))
        return w

    def send(w: Any, name: str) -> None:
        counter[0] += 1
        w.handle("x", Event(id=f"e{counter[0]}", name=name))

    def where(w: Any) -> str:
        exe = w.store.load("x")
        return str(exe.active_path)

    return make, send, where


def durastate_runtime(definition_id: str, copy_on_load: bool | None = None) -> Peer:
    """durastate's local runtime per event (send, then run until idle): worker + relay + transport."""
    from durastate.engine import Event
    from durastate.runtime import LocalRuntime
    from durastate.store.memory.sync import DictStore

    reg = _registry()
    counter = [0]

    def make() -> Any:
        rt = LocalRuntime(DictStore(), reg, clock=lambda: 1_700_000_000.0, copy_on_load=copy_on_load)
        rt.start(definition_id, execution_id="x")
        rt.run_until_idle()
        return rt

    def send(rt: Any, name: str) -> None:
        counter[0] += 1
        rt.send("x", Event(id=f"e{counter[0]}", name=name))
        rt.run_until_idle()

    def where(rt: Any) -> str:
        exe = rt.get("x")
        if rt.dead_letters:
            raise AssertionError(f"durastate dead-lettered {rt.dead_letters[0]}")
        return str(exe.active_path)

    return make, send, where


def durastate_runtime_queued(definition_id: str, cycle_len: int) -> Peer:
    """The local runtime as a server sees it: a cycle's events are queued, then run until idle.

    Same commits, same semantics (the queue delivers a target's events in order), fewer rounds.
    ``send`` queues; every ``cycle_len``-th event it runs the runtime until idle.
    """
    from durastate.engine import Event

    make, _, where = durastate_runtime(definition_id)
    counter = [0]

    def send(rt: Any, name: str) -> None:
        counter[0] += 1
        rt.send("x", Event(id=f"q{counter[0]}", name=name))
        if counter[0] % cycle_len == 0:
            rt.run_until_idle()

    return make, send, where


def _runner(peer: Peer, seq: list[str], expect: str) -> Callable[[], float]:
    make, send, where = peer

    def run() -> float:
        m = make()

        def go() -> None:
            for name in seq:
                send(m, name)

        r = rate(len(seq), go)
        got = where(m)
        if expect not in got:
            raise AssertionError(f"ended in {got!r}, expected {expect!r}: the peer mishandled the sequence")
        return r

    return run


def _check_history(peer: Peer) -> None:
    """After go, toggle, pause, resume every engine must be back in ``b`` (deep history)."""
    make, send, where = peer
    m = make()
    for name in CHART2_CYCLE[:4]:
        send(m, name)
    got = where(m)
    if "b" not in got.replace("both", "").split(".")[-1] and not got.endswith("b"):
        raise AssertionError(f"after resume: {got!r}, expected b (history)")


DURASTATE = "durastate (Worker + DictStore, full commit)"
DURASTATE_NOCOPY = "durastate, copy_on_load=False"
DURASTATE_RT = "durastate (LocalRuntime + DictStore, full commit)"
DURASTATE_RT_NOCOPY = "durastate runtime, copy_on_load=False"
DURASTATE_RT_QUEUED = "durastate runtime, each cycle queued then run (a server's view)"
DURASTATE_INLINE = "durastate, regions: inline (Worker + DictStore, full commit)"


def run(cycles: int = 300, repeats: int = 7, warmup: bool = True) -> dict[str, Any]:
    """Both charts; returns the series and the ratios of durastate (copy on) to each peer."""
    out: dict[str, Any] = {}
    charts = [
        ("chart1", CHART1_CYCLE, PEERS_CHART1, {DURASTATE: durastate_worker("toggle"),
                                                DURASTATE_NOCOPY: durastate_worker("toggle", False)}),
        ("chart2", CHART2_CYCLE, PEERS_CHART2, {DURASTATE_RT: durastate_runtime("history"),
                                                DURASTATE_RT_NOCOPY: durastate_runtime("history", False),
                                                DURASTATE_RT_QUEUED: durastate_runtime_queued("history",
                                                                                      len(CHART2_CYCLE)),
                                                DURASTATE_INLINE: durastate_worker("history-inline")}),
    ]
    for chart, cycle, peers, durastates in charts:
        seq = cycle * cycles
        contenders: dict[str, Peer] = dict(durastates)
        contenders.update({name: f() for name, f in peers.items()})
        if chart == "chart2":
            for name, p in contenders.items():
                if name != DURASTATE_RT_QUEUED:  # it applies a cycle only at its end
                    _check_history(p)
        runners = {name: _runner(p, seq, "idle") for name, p in contenders.items()}
        series = interleave(runners, repeats, warmup=warmup)
        head = next(iter(durastates))
        ratios = {name: paired_ratio(series[head], series[name]) for name in peers}
        fastest = max(peers, key=lambda n: series[n].median)
        out[chart] = {"events": len(seq), "repeats": repeats, "series": series, "durastate": head,
                      "ratios": ratios, "fastest_peer": fastest, "peers": list(peers),
                      "durastate_rows": list(durastates)}
        if DURASTATE_INLINE in durastates:
            out[chart]["inline_ratios"] = {name: paired_ratio(series[DURASTATE_INLINE], series[name])
                                           for name in peers}
    return out


def run_inline(cycles: int = 300, repeats: int = 7, warmup: bool = True) -> dict[str, Any]:
    """Chart 2 with ``regions: inline`` against the chart-2 peers only (the row alone, quicker than
    :func:`run`): events per second and durastate's ratio to each peer."""
    seq = CHART2_CYCLE * cycles
    contenders: dict[str, Peer] = {DURASTATE_INLINE: durastate_worker("history-inline")}
    contenders.update({name: f() for name, f in PEERS_CHART2.items()})
    for p in contenders.values():
        _check_history(p)
    series = interleave({name: _runner(p, seq, "idle") for name, p in contenders.items()}, repeats,
                        warmup=warmup)
    fastest = max(PEERS_CHART2, key=lambda n: series[n].median)
    return {"events": len(seq), "repeats": repeats, "series": series, "fastest_peer": fastest,
            "ratios": {name: paired_ratio(series[DURASTATE_INLINE], series[name]) for name in PEERS_CHART2}}


if __name__ == "__main__":  # python -m bench.engine inline [cycles] [repeats]: the inline chart-2 row alone
    import sys

    if sys.argv[1:2] != ["inline"]:
        sys.exit("usage: python -m bench.engine inline [cycles] [repeats] (the whole section: python -m bench "
                 "--only engine)")
    got = run_inline(*(int(a) for a in sys.argv[2:4]))
    for name, ser in got["series"].items():
        ratio = got["ratios"].get(name)
        shown = f"  durastate / this: {ratio[0]:.1f}x ({ratio[1]:.1f}-{ratio[2]:.1f})" if ratio else ""
        print(f"{name:70} {ser.median:>12,.0f} events/s{shown}")
    print(f"fastest peer: {got['fastest_peer']}; inline / fastest: {got['ratios'][got['fastest_peer']][0]:.1f}x")


def series_of(result: dict[str, Any], chart: str) -> dict[str, Series]:
    s: dict[str, Series] = result[chart]["series"]
    return s
