"""``validate --replay FILE`` and ``validate --from-store``: recorded histories stepped through the
definitions being validated (:mod:`durastate.engine.replay`), failing on the first step that would differ.

A history file is what ``durastate history ID --json`` prints: one step a line (a JSON array of steps,
``trace --json``'s form, is read too). It is replayed through the validated definition its start names
(``data.definition_id``), or the only one validated. ``--from-store`` replays the histories of executions
of each validated definition in the store (``--against STORE``, else the configured one): at most
``--replay-limit`` of them per definition, the first of its listing, so the gate's cost is bounded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.text import Text

from durastate.cli import output
from durastate.cli.session import UsageError
from durastate.engine.definition import Definition
from durastate.engine.replay import ReplayReport, replay
from durastate.store.base import ExecutionStore, keeps_history

__all__ = ["read_history_file", "replay_files", "replay_store", "report_replays"]


def read_history_file(path: Path) -> list[dict[str, Any]]:
    """The steps of a ``history --json`` file (JSON Lines, or one JSON array), oldest first.

    Each step is checked for what the replay reads (an event or a control record, its time a number, its
    index a whole number), so a file cut or edited by hand is refused with the line at fault rather than
    replayed as "no difference" (an empty file would pass the deploy gate) or failing half-way."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"--replay {path}: cannot read it ({exc.strerror or exc})") from None
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            numbered = list(enumerate(json.loads(stripped), 1))
            unit = "item"
        else:
            numbered = [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
            unit = "line"
    except ValueError as exc:
        raise UsageError(f"--replay {path}: not the JSON lines of `durastate history ID --json` ({exc})") from None
    if not isinstance(numbered, list) or not all(isinstance(s, dict) for _, s in numbered):
        raise UsageError(f"--replay {path}: expected one JSON object (a step) a line")
    if not numbered:
        raise UsageError(f"--replay {path}: has no step; write it with `durastate history ID --json`")
    for n, step in numbered:
        why = _not_a_step(step)
        if why:
            raise UsageError(f"--replay {path}: {unit} {n}{why}; write the file with `durastate history ID --json`")
    return [step for _, step in numbered]


def _not_a_step(step: dict[str, Any]) -> str:
    """Why ``step`` is not a recorded step the replay can read ("" when it is), said after its line number."""
    if not isinstance(step.get("event"), str) and not isinstance(step.get("control"), str):
        return " is not a step (no event or control)"
    if "at" in step and (isinstance(step["at"], bool) or not isinstance(step["at"], int | float)):
        return ": at is not a number"
    if "index" in step and (isinstance(step["index"], bool) or not isinstance(step["index"], int)):
        return ": index is not a whole number"
    inner = step.get("steps")
    if inner is not None and (not isinstance(inner, list) or any(
            not isinstance(s, dict) or _not_a_step(s) for s in inner)):
        return ": steps is not a list of steps"
    return ""


def _definition_for(path: Path, steps: Sequence[dict[str, Any]], definitions: Sequence[Definition]) -> Definition:
    data = steps[0].get("data") if steps else None
    named = data.get("definition_id") if isinstance(data, dict) else None
    by_id = {d.id: d for d in definitions}
    if isinstance(named, str) and named in by_id:
        return by_id[named]
    if len(definitions) == 1 and (named is None or not by_id):
        return definitions[0]
    what = f"definition {named!r}" if named else "a definition it does not name"
    raise UsageError(f"--replay {path}: its history is of {what}; validate that definition's file with it "
                     f"(validated: {', '.join(sorted(by_id)) or 'none'})")


def replay_files(paths: Sequence[Path], definitions: Sequence[Definition]) -> list[ReplayReport]:
    if not definitions:
        raise UsageError("--replay needs a valid definition to replay through")
    reports = []
    for path in paths:
        steps = read_history_file(path)
        report = replay(_definition_for(path, steps, definitions), steps, None)
        report.execution_id = str(path)
        reports.append(report)
    return reports


def replay_store(store: ExecutionStore, definitions: Sequence[Definition], limit: int) -> list[ReplayReport]:
    """Replay the histories of up to ``limit`` executions of each definition (the store's listing order)."""
    if not keeps_history(store):
        output.warn("the store keeps only the newest trace steps of an execution, so most histories cannot be "
                    "replayed from their start: open it with ?history=1 in its URL to keep whole histories")
    reports = []
    for defn in definitions:
        page = store.list_executions(definition_id=defn.id, limit=limit)
        for summary in page.items:
            reports.append(replay(defn, store.read_history(summary.id), summary.id))
    return reports


def report_replays(reports: Sequence[ReplayReport], as_json: bool) -> int:
    """Print the replays (one line each, the difference in full); the number that differ."""
    differ = [r for r in reports if not r.ok]
    if as_json:
        output.print_json([r.as_json() for r in reports])
    else:
        for r in reports:
            if r.ok:
                text = f"{r.execution_id}  {r.checked} steps replayed, no difference"
                output.say(Text.assemble(("✓ ", "green"), text))
                if r.stopped:
                    output.say(Text(f"    stopped early: {r.stopped}", style="yellow"))
            else:
                assert r.difference is not None
                output.say(Text.assemble(("✗ ", "red"), f"{r.execution_id}  "))
                for line in r.difference.describe().splitlines():
                    output.say(Text(f"    {line}", style="red"))
        if not reports:
            output.note("no history to replay")
    if differ:
        output.error(f"{len(differ)} of {len(reports)} recorded histor{'ies' if len(reports) != 1 else 'y'} would "
                     "run differently on the new definition: check the step(s) above, or keep the old behaviour")
    return len(differ)
