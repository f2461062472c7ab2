"""The small definitions the properties run: the runtime tests' COUNTER and FORK, an invoker of COUNTER,
and KEEPER, which moves event data into its context and into the events it sends (so whatever a message
carries reaches the stored execution, the outbox and the events other executions receive)."""

from __future__ import annotations

from tests.runtime.conftest import COUNTER, FORK

INVOKER = {
    "id": "invoker",
    "initial": "calling",
    "states": {
        "calling": {"invoke": {"definition": "counter", "context": {}}, "on_done": "ok", "on_error": "bad"},
        "ok": {"type": "final", "outcome": "ok"},
        "bad": {"type": "final", "outcome": "child-failed"},
    },
}

_KEEP = {
    "put": {"actions": [{"assign": {"last": "$event.data"}}]},
    "set": {"actions": [{"assign": {"bag.v": "$event.v", "bag.w.x": "$event.data"}}]},
    # accumulates: numbers add, strings and lists concatenate (bounded by what the events carry)
    "add": {"actions": [{"assign": {"n": {"add": ["$context.n", "$event.by"]}}}]},
    # one product of two values of the same event (not accumulated: a string times a count stays small),
    # kept at the top of the context, inside a list, or sent on in an event's data
    "mul": {"actions": [{"assign": {"m": {"mul": ["$event.a", "$event.b"]}}}]},
    "mul2": {"actions": [{"assign": {"pair": ["$event.a", {"mul": ["$event.a", "$event.b"]}]}}]},
    "mul3": {"actions": [{"send": {"event": "put", "to": "self", "data": {"p": {"mul": ["$event.a", "$event.b"]}}}}]},
    # event data travels on: to itself one level deeper, to any execution the event names, to the sink
    "wrap": {"actions": [{"send": {"event": "put", "to": "self", "data": {"w": "$event.data"}}}]},
    "tell": {"actions": [{"send": {"event": "put", "to": "$event.to", "data": "$event.data"}}]},
    "note": {"actions": [{"send": {"event": "noted", "data": {"ctx": "$context"}}}]},
}

KEEPER = {
    "id": "keeper",
    "initial": "open",
    "context": {"n": 0, "m": None, "pair": None, "last": None, "bag": {}},
    "states": {
        "open": {"on": {**_KEEP, "wait": "waiting", "close": "closed"}},
        "waiting": {"after": {"seconds": 5, "target": "open"}, "on": {**_KEEP, "close": "closed"}},
        "closed": {"type": "final", "outcome": "done"},
    },
}

DEFINITIONS = (COUNTER, FORK, INVOKER, KEEPER)

NATURAL = {"c": "counter", "f": "fork", "i": "invoker", "k": "keeper"}
"""An execution name's first letter -> the definition its natural start uses."""

USER_EVENTS = ("inc", "wait", "stop", "poke", "rearm", "go", "put", "set", "add", "mul", "mul2", "mul3", "wrap",
               "tell", "note", "close")
STATE_PATHS = ("idle", "waiting", "done", "both", "both.left", "both.left.l1", "both.right.r2", "joined",
               "calling", "ok", "bad", "open", "closed")
