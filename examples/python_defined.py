"""A statechart built in Python instead of YAML: a support ticket.

The same pydantic classes that YAML documents validate into (``Definition``, ``State``, ``Transition``,
``After``) build it here, and Python functions serve as guard and action. Executions of it record
``definition_fqn = "examples.python_defined:definition"`` so a worker can import it by name.

Run it (from the repository root): ``python examples/python_defined.py``
"""

from __future__ import annotations

from typing import Any

from durastate.engine import After, Definition, Event, Execution, State, Transition, step


def is_urgent(context: dict[str, Any], event: Event) -> bool:
    """Guard: a ticket is urgent when the customer is on the premium plan or says it is."""
    return bool(context.get("plan") == "premium" or event.data.get("urgent"))


def stamp_escalation(context: dict[str, Any], event: Event) -> dict[str, Any]:
    """Action: count escalations (the returned dict is merged into the context)."""
    return {"escalations": context.get("escalations", 0) + 1}


definition = Definition(
    id="ticket",
    description="A support ticket: triaged, worked on (with an escalation timer), then closed.",
    initial="new",
    context={"plan": "basic", "escalations": 0},
    states={
        "new": State(
            on={
                "triage": [
                    Transition(target="open.urgent", guard=is_urgent),
                    Transition(target="open.normal"),
                ],
            }
        ),
        "open": State(
            initial="normal",
            on={
                "resolve": [Transition(target="closed", actions=[{"assign": {"resolution": "$event.note"}}])]
            },
            states={
                "normal": State(after=After(seconds=3 * 86400, target="urgent")),
                "urgent": State(
                    entry=[stamp_escalation, {"log": "escalated"}],
                    after=After(seconds=4 * 3600, target="urgent"),  # re-escalate every 4 hours
                ),
            },
        ),
        "closed": State(type="final", outcome="resolved"),
    },
)


def main() -> None:
    exe = Execution(
        id="ticket-1",
        definition_id=definition.id,
        definition_fqn="examples.python_defined:definition",
        context=definition.initial_context({"plan": "premium"}),
    )
    now = 0.0
    for event in (Event(name="durastate.start"), Event(name="triage")):
        res = step(definition, exe, event, now)
        print(f"{event.name:<14} -> {exe.active_path}  timers={exe.timers}  log={res.logs}")
    now = exe.timers["open.urgent"]  # four hours later the escalation timer fires
    res = step(
        definition, exe, Event(name="durastate.timeout", data={"path": "open.urgent", "fire_at": now}), now
    )
    print(
        f"{'durastate.timeout':<14} -> {exe.active_path}  escalations={exe.context['escalations']}"
        f"  log={res.logs}"
    )
    step(definition, exe, Event(name="resolve", data={"note": "reset the router"}), now + 60)
    print(f"{'resolve':<14} -> {exe.active_path}  {exe.status} ({exe.outcome}): {exe.context['resolution']}")


if __name__ == "__main__":
    main()
