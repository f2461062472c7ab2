"""Known bugs the properties would keep finding, each excluded from them narrowly until it is fixed.

Every entry names the strict-xfail regression test in ``test_regressions.py`` that pins it: when the bug
is fixed that test XPASSes (and fails, being strict), which is the signal to delete the entry here.
``DURASTATE_PROPERTIES_STRICT=1`` turns every exclusion off (the properties then find them again).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

STRICT = bool(os.environ.get("DURASTATE_PROPERTIES_STRICT"))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(value: Any) -> bool:
    return any(_SURROGATE.search(s) for s in _strings(value))


def raw_surrogate_in_text(body: Any) -> bool:
    """test_regressions.py::test_the_error_for_a_text_body_with_a_raw_surrogate_can_be_printed: for a str
    body holding a raw lone surrogate, the MalformedEvent's message quotes the body raw, surrogate
    included, so it cannot be printed, logged as UTF-8 or put in a dead-letter attribute. (Only the
    printability check is skipped for such bodies; they must still get a MalformedEvent.)"""
    return not STRICT and isinstance(body, str) and _has_surrogate(body)


def deep_mapping_body(body: Any) -> bool:
    """test_regressions.py::test_a_mapping_body_nested_1000_deep_gets_a_malformed_event: for a mapping
    body nested about a thousand levels deep, ``parse_envelope`` raises RecursionError (its error
    message quotes the body through ``json.dumps``, which recurses) instead of MalformedEvent."""
    if STRICT or isinstance(body, str | bytes | bytearray):
        return False
    depth, level = 0, [body]
    while level and depth < 2000:
        level = [v for x in level if isinstance(x, dict | list)
                 for v in (x.values() if isinstance(x, dict) else x)]
        depth += 1
    return depth > 500


def surrogate_key_in_mapping(body: Any) -> bool:
    """test_regressions.py::test_an_entry_rule_error_under_a_surrogate_key_is_a_malformed_event: a mapping
    body whose data breaks an entry rule under a key holding a lone surrogate makes ``parse_envelope``
    raise UnicodeEncodeError (the InvalidValue's message names the key, raw, and pydantic cannot carry
    it) instead of MalformedEvent."""
    if STRICT or not isinstance(body, dict) or not isinstance(body.get("event"), dict):
        return False
    return _has_surrogate(list(_keys(body["event"].get("data"))))


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def c1_control_in_id(why: str) -> bool:
    """test_regressions.py::test_an_id_with_a_c1_control_character_is_refused: ids may not hold control
    characters, but only C0 and DEL are refused; the C1 controls U+0080-U+009F (Unicode category Cc,
    ``str.isprintable()`` False; U+0085 is a line break to ``str.splitlines`` and many log viewers)
    pass."""
    return not STRICT and why.startswith("bad-id") and any(f"control U+{c:04X}" in why for c in range(0x80, 0xA0))


@dataclass(frozen=True)
class Signature:
    """How a known bug shows in a property's failure: the regression test that pins it, and texts that
    must all appear in the failure (its message and its causes')."""

    regression: str
    texts: tuple[str, ...]
    backends: tuple[str, ...] = ()
    """Only on these backends (empty: on every one)."""
    pattern: str = ""
    """A regular expression the failure must match too."""
    cause: Callable[[list[Any]], bool] | None = None
    """A predicate the example's steps must satisfy too (the bug's cause is in the input)."""


SIGNATURES = [
    # what the recording store flags (``harness.storable_problem``) at the commit itself:
    Signature("test_an_assign_inside_a_list_or_a_send_that_overflows_to_infinity_is_refused",
              ("committed a value no store can keep", "is non-finite")),
    Signature("test_an_assign_that_makes_an_integer_too_long_for_json_is_refused",
              ("committed a value no store can keep", "digits (JSON readers stop at 4300)")),
    Signature("test_an_event_a_definition_sends_deeper_than_64_levels_is_not_a_poison_outbox_entry",
              ("committed a value no store can keep", "emitted to", "nests deeper than 64")),
    Signature("test_a_lone_surrogate_in_event_data_is_refused_at_the_wire",
              ("committed a value no store can keep", "lone surrogate")),
    # ``assign`` results are not checked against the entry rules: an overflow to infinity is kept in the
    # context (the durable stores write null, so what loads differs from what was committed) ...
    Signature("test_an_assign_inside_a_list_or_a_send_that_overflows_to_infinity_is_refused",
              ("['context']", "float inf",)),
    Signature("test_an_assign_inside_a_list_or_a_send_that_overflows_to_infinity_is_refused",
              ("['context']", "float -inf",)),
    # ... and an integer past 4300 digits is committed, and then the execution never loads again.
    Signature("test_an_assign_that_makes_an_integer_too_long_for_json_is_refused", ("number out of range",)),
    # a ``send`` whose data nests deeper than the limit commits an outbox entry the durable stores cannot
    # read back: ``pending_outbox`` raises, and the relay stalls for every execution.
    Signature("test_an_event_a_definition_sends_deeper_than_64_levels_is_not_a_poison_outbox_entry",
              ("a runtime round", "ValidationError", "nests deeper than 64")),
    # a lone surrogate in a mapping body's data passes the wire and then cannot be serialised: DictStore
    # keeps an execution that does not round-trip, the durable stores' commit raises untyped.
    Signature("test_a_lone_surrogate_in_event_data_is_refused_at_the_wire", ("surrogates not allowed",)),
    # ... or, as a key, is silently rewritten by the SQLite store (it loads as other characters).
    Signature("test_a_lone_surrogate_in_event_data_is_refused_at_the_wire", ("differ",),
              pattern=r"\\ud[89a-f][0-9a-f]{2}"),
]


def _claims(kinds: tuple[str, ...]) -> Callable[[list[Any]], bool]:
    """Whether some message of the steps takes, as its own event id, an id the runtime derives for one of
    its events of ``kinds`` (a ``strategies.DerivedId``)."""

    def cause(steps: list[Any]) -> bool:
        for step in steps:
            body = getattr(step, "body", None)
            if isinstance(body, dict) and isinstance(body.get("event"), dict):
                eid = body["event"].get("id")
                if getattr(eid, "kind", None) in kinds:
                    return True
        return False

    return cause


SIGNATURES += [
    # a producer's event that takes the id the sweeper will give a timer's timeout marks it processed
    # first: the real timeout is then dropped as a duplicate (and its timer deleted), and the execution
    # waits in its state forever ...
    Signature("test_an_event_id_a_producer_chose_cannot_suppress_a_timeout",
              ("counts on timers", "but the store has"), cause=_claims(("timeout",))),
    # ... and one that takes the id of a child's finished notice to the parent makes the parent drop the
    # real notice: it waits for a child that has ended, forever.
    Signature("test_an_event_id_a_producer_chose_cannot_suppress_a_finished_notice",
              ("still waits for its child",), cause=_claims(("finished",))),
]


def known_failure(exc: BaseException, backend: str, steps: list[Any] | None = None) -> str | None:
    """The regression test of the known bug ``exc`` is (its failure matches a signature), or None."""
    if STRICT:
        return None
    texts = []
    e: BaseException | None = exc
    while e is not None and len(texts) < 5:
        texts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    text = "\n".join(texts)
    for sig in SIGNATURES:
        if ((not sig.backends or backend in sig.backends) and all(t in text for t in sig.texts)
                and (not sig.pattern or re.search(sig.pattern, text))
                and (sig.cause is None or (steps is not None and sig.cause(steps)))):
            return sig.regression
    return None


