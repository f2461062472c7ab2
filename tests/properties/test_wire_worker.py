"""Properties of the wire and the worker, on every registered store.

1. An invalid message body (wrong types, missing or extra fields, non-finite numbers anywhere in the
   data, nesting past 64 levels, ids with control characters / NUL / surrogates / over 128 characters,
   non-UTF-8 bytes, broken JSON, huge ids) gets a :class:`MalformedEvent` from ``parse_envelope`` —
   never another exception, with a message that can be printed — and changes nothing in the store.
2. A valid message (user events with random data, forged ``durastate.*`` events with random data, starts
   of random definitions with random contexts, to executions that exist and that do not; values within
   the entry rules, including NUL inside strings, lone surrogates, 4300-digit integers, 1e308, -0.0,
   empty keys and keys with dots), in any wire form (mapping, JSON text, ASCII-escaped text, UTF-8
   bytes), is applied or refused with a typed :class:`DurastateError` — no other exception escapes the
   worker, the relay or the sweeper, and a refusal writes nothing. Afterwards every execution of the
   example lists, loads, equals exactly (types included: ints stay ints, -0.0 stays -0.0) what the
   worker committed, and survives its own JSON round trip.
3. Exactly once: redelivering messages that were accepted — right after another message, or the whole
   sequence again at the end — finds each a duplicate and leaves every execution exactly as delivering
   the sequence once does.

Beyond the brief, the postconditions also hold the runtime to what an idle store must look like: every
value committed is one every store can keep (finite numbers, integers JSON readers accept, no lone
surrogates, emitted events within the entry rules), the timers an execution counts on are the ones the
store will fire, and an execution waiting for a child finds it not ended.

Examples per store: the ``ci`` profile (``conftest.CI_EXAMPLES`` on the fast stores, shares of it on
PostgreSQL and DynamoDB: ``harness.EXAMPLE_SHARE``); ``DURASTATE_HYPOTHESIS_EXAMPLES=N`` selects the
``deep`` profile. Known bugs that would make a property fail are listed in ``known_bugs.py``: an example
that fails with one of them (and only that) is rejected instead, and each is pinned by a strict ``xfail``
regression test in ``test_regressions.py``; ``DURASTATE_PROPERTIES_STRICT=1`` runs without exclusions.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, note, reject
from hypothesis import strategies as st

from durastate.errors import MalformedEvent
from durastate.runtime.worker import HandleResult
from durastate.transport import parse_envelope
from tests.store.conformance.backends import BACKENDS

from .harness import (
    Driver,
    Namespaces,
    Outcome,
    backend_params,
    check_namespace,
    list_all,
    renamed,
    settings_for,
    snapshot,
    strict_diff,
    utf8_printable,
)
from .known_bugs import known_failure
from .strategies import Message, Tick, encode, invalid_messages, materialize, sequences


@pytest.fixture(params=backend_params())
def namespaces(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Namespaces]:
    with Namespaces(BACKENDS[request.param], tmp_path) as ns:
        yield ns


def run(driver: Driver, steps: list[Any], prefix: str) -> list[tuple[Any, Outcome]]:
    """Deliver ``steps`` in order; return each delivered body with its outcome."""
    delivered: list[tuple[Any, Outcome]] = []
    for s in steps:
        if isinstance(s, Tick):
            note(f"tick {s.seconds}")
            driver.tick(s.seconds)
            continue
        assert isinstance(s, Message)
        envelope = materialize(s.body, prefix, driver.store)
        body = encode(envelope, s.form)
        outcome = driver.deliver(body)
        event(f"{s.form}: {outcome.kind} {outcome.result or type(outcome.error).__name__}")
        note(f"{s.form} {_show(envelope)} -> {outcome.kind} {outcome.result or _show(outcome.error)}")
        delivered.append((body, outcome))
    return delivered


def _show(v: Any) -> str:
    try:
        r = repr(v)
    except ValueError:  # an int past the str-conversion limit
        r = f"<{type(v).__name__}>"
    return r if len(r) <= 300 else r[:297] + "..."


# -- 1 ------------------------------------------------------------------------------------------------


def test_an_invalid_message_gets_a_typed_error_and_changes_nothing(namespaces: Namespaces) -> None:
    with namespaces.namespace() as (store, prefix):
        driver = Driver(store)
        seed = [("c1", "durastate.start", {"definition_id": "counter", "context": {"count": 2**70}}),
                ("c1", "wait", {}),  # a timer armed
                ("k1", "durastate.start", {"definition_id": "keeper"}),
                ("k1", "put", {"s": "a\x00b", "z": -0.0, "big": 10**300}),
                ("f1", "durastate.start", {"definition_id": "fork"}),  # two region children
                ("i1", "durastate.start", {"definition_id": "invoker"})]  # an invoked child
        for i, (name, kind, data) in enumerate(seed):
            out = driver.deliver({"target_id": prefix + name, "event": {"id": f"s{i}", "name": kind, "data": data}})
            assert out.accepted, out
        before = snapshot(store, prefix)
        targets = sorted(before["executions"])

        @settings_for(namespaces.backend.name)
        @given(invalid_messages(targets))
        def prop(inv: Any) -> None:
            note(f"why: {inv.why}")
            body = inv.message.body
            try:
                env = parse_envelope(body)
            except MalformedEvent:
                pass
            except Exception as exc:
                raise AssertionError(f"parse_envelope raised {type(exc).__name__} for {inv.why}: {exc!r}") from exc
            else:  # not applied: it would change the store every later example starts from
                raise AssertionError(f"an invalid message ({inv.why}) got past the wire: {env!r}")
            outcome = driver.deliver(body)  # the whole pipeline, as a worker runs it
            assert outcome.kind == "wire", f"an invalid message ({inv.why}) got past the wire: {outcome}"
            assert isinstance(outcome.error, MalformedEvent)
            assert utf8_printable(str(outcome.error)), f"the error message cannot be printed: {outcome.error!r}"
            diff = strict_diff(before, snapshot(store, prefix))
            assert diff is None, f"a refused message changed the store: {diff}"

        prop()


# -- 2 ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def known_bugs_rejected(backend: str, steps: list[Any]) -> Iterator[None]:
    """Reject (not fail) an example whose failure is a known bug's (see ``known_bugs.SIGNATURES``)."""
    try:
        yield
    except AssertionError as exc:
        regression = known_failure(exc, backend, steps)
        if regression is None:
            raise
        event(f"known bug: {regression}")
        reject()


def test_a_valid_message_applies_or_gets_a_typed_error_and_everything_stored_round_trips(
    namespaces: Namespaces,
) -> None:
    backend = namespaces.backend.name

    @settings_for(backend)
    @given(sequences())
    def prop(steps: list[Any]) -> None:
        with namespaces.namespace() as (store, prefix), known_bugs_rejected(backend, steps):
            driver = Driver(store)
            delivered = run(driver, steps, prefix)
            for _, outcome in delivered:
                if outcome.error is not None:
                    assert utf8_printable(str(outcome.error)), f"unprintable error: {outcome.error!r}"
            check_namespace(driver, prefix)

    prop()


# -- 3 ------------------------------------------------------------------------------------------------


def test_redelivered_messages_are_duplicates_and_change_nothing(namespaces: Namespaces) -> None:
    backend = namespaces.backend.name

    @settings_for(backend, share=0.6)
    @given(sequences(long_ids=False), st.lists(st.lists(st.integers(0, 40), max_size=2), max_size=10), st.booleans())
    def prop(steps: list[Any], schedule: list[list[int]], replay_all: bool) -> None:
        with namespaces.namespace() as (store, once_prefix), known_bugs_rejected(backend, steps):
            once = Driver(store)
            run(once, steps, once_prefix)
            want = _state(once, once_prefix)
        with namespaces.namespace() as (store, twice_prefix), known_bugs_rejected(backend, steps):
            twice = Driver(store)
            delivered: list[tuple[Any, Outcome]] = []
            for i, s in enumerate(steps):
                delivered += run(twice, [s], twice_prefix)
                accepted = [d for d in delivered if d[1].accepted]
                for j in schedule[i] if i < len(schedule) else ():
                    if accepted:
                        _redeliver(twice, *accepted[j % len(accepted)])
            if replay_all:
                for d in delivered:
                    if d[1].accepted:
                        _redeliver(twice, *d)
            got = _state(twice, twice_prefix)
        diff = strict_diff(renamed(want, once_prefix, "<ns>"), renamed(got, twice_prefix, "<ns>"))
        assert diff is None, f"redelivery changed the outcome: {diff}"

    prop()


def _redeliver(driver: Driver, body: Any, first: Outcome) -> None:
    again = driver.deliver(body)
    note(f"redelivered {first.event.name if first.event else '?'} -> {again.kind} {again.result or again.error!r}")
    # An event with an id in the runtime's namespace that changed nothing is not recorded, by design (its id
    # stays free for the true event: durastate.engine.ids), so its redelivery is ignored again, not a
    # duplicate; that it changes nothing either is what the state comparison checks.
    unrecorded = (first.result is HandleResult.IGNORED and first.event is not None
                  and first.event.id.startswith("~") and again.result is HandleResult.IGNORED)
    assert again.accepted and (again.result is HandleResult.DUPLICATE or unrecorded), (
        f"a redelivery of an accepted message ({first.result}) came out {again.kind} "
        f"{again.result or again.error!r}"
    )


_MAC = re.compile(r'(:\d+):[0-9a-f]{16}"')


def _state(driver: Driver, prefix: str) -> dict[str, Any]:
    # An execution's secret (the key of its task ids) is random by design: two runs compare on having one.
    # So is the mac its emitted event ids end with (``<exe>:<version>:<n>:<mac>``, under that secret): two
    # runs compare on the id without it.
    exes = {eid: json.loads(_MAC.sub(r'\1:<mac>"', json.dumps({**dump, "secret": dump.get("secret") and "<secret>"})))
            for eid, dump in check_namespace(driver, prefix).items()}
    return {
        "executions": exes,
        "trace_lengths": {eid: len(driver.store.read_trace(eid)) for eid in exes},
        "listed": sorted(s.id for s in list_all(driver.store, prefix)),
    }
