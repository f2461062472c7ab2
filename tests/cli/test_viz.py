"""``durastate.viz``: Mermaid stateDiagram-v2 that GitHub renders, coloured by an execution's status; and
``durastate viz``'s formats (Mermaid, SVG, PNG, chosen by ``--format`` or the output's suffix).

Beyond spot checks, :func:`check_structure` parses the output the way Mermaid scopes it and enforces the
rules GitHub's renderer needs: balanced composite blocks, every state declared once with a unique id,
``--`` only directly inside a parallel state, every transition drawn inside the innermost composite
that holds both its ends (Mermaid cannot draw one between states of two different composites), no
self-loop on a composite (mermaid-js/mermaid#4866) and no edge end on a composite inside a parallel
region (mermaid-js/mermaid#4052).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

from PIL import Image

from durastate.engine import load_definition
from durastate.viz import STATUS_COLOURS, guard_text, mermaid_style, state_id, to_markdown, to_mermaid

from ._support import DEFS, EXAMPLES, Env, Outcome

DECL = re.compile(r'^state "(?P<label>[^"]*)" as (?P<id>\w+)(?P<open> \{)?$')
EDGE = re.compile(r"^(?P<src>\[\*\]|\w+) --> (?P<dst>\[\*\]|\w+)(?: : (?P<label>.+))?$")
BARE = re.compile(r"^(?P<id>\w+)$")
NOTE = re.compile(r"^(?P<id>\w+) : (?P<text>.+)$")


def check_structure(text: str) -> dict[str, str]:
    """Validate the scoping rules; return state id -> the id of its enclosing block ("" at the top)."""
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2"
    scope_of: dict[str, str] = {}
    composites: set[str] = set()
    parallels: set[str] = set()
    stack = [""]
    edges: list[tuple[str, str, str]] = []
    for raw in lines[1:]:
        line = raw.strip()
        if not line or line.startswith("%%") or line.startswith("classDef ") or line.startswith("class "):
            continue
        if line == "}":
            stack.pop()
            assert stack, "unbalanced }"
            continue
        if line == "--":
            assert stack[-1], "a region separator outside any composite"
            parallels.add(stack[-1])
            continue
        if m := DECL.match(line):
            sid = m["id"]
            assert sid not in scope_of, f"state id {sid} declared twice"
            assert '"' not in m["label"]
            scope_of[sid] = stack[-1]
            if m["open"]:
                composites.add(sid)
                stack.append(sid)
            continue
        if m := EDGE.match(line):
            edges.append((m["src"], m["dst"], stack[-1]))
            continue
        if m := BARE.match(line):
            assert m["id"] not in scope_of, f"state id {m['id']} declared twice"
            scope_of[m["id"]] = stack[-1]
            continue
        if m := NOTE.match(line):
            assert m["id"] in scope_of
            continue
        raise AssertionError(f"unexpected line: {raw!r}")
    assert stack == [""], "unclosed composite"

    def ancestors(sid: str) -> list[str]:
        chain = []
        while sid:
            sid = scope_of[sid]
            chain.append(sid)
        return chain

    for src, dst, block in edges:
        assert not (src == dst and src in composites), f"self-loop on composite {src}"
        for end in (src, dst):
            if end == "[*]":
                continue
            assert block in ancestors(end), f"{src} --> {dst} drawn outside {end}'s composites"
            if end in composites:
                assert not parallels & set(ancestors(end)), f"edge end {end}: a composite in a region"
        direct = [scope_of[e] == block for e in (src, dst) if e != "[*]"]
        inside_region = bool(parallels & set([block, *ancestors(block)])) if block else False
        assert all(direct) or inside_region, f"{src} --> {dst} not between children of {block or 'top'}"
    return scope_of


def test_order_diagram_structure() -> None:
    text = to_mermaid(load_definition(EXAMPLES / "order.yaml"))
    scope_of = check_structure(text)
    assert "[*] --> cart" in text
    assert scope_of["processing__fulfilment__packing__picking"] == "processing__fulfilment__packing"
    assert 'state "fulfilment · shipped_with / internal" as processing__fulfilment {' in text
    # the two regions of the parallel state, separated by --
    body = text.split('as processing__fulfilment {', 1)[1]
    assert body.index("as processing__fulfilment__packing {") < body.index("--") < \
        body.index("as processing__fulfilment__shipping {")
    assert "completed --> [*]" in text
    assert 'state "H*" as processing__resume_point' in text
    assert 'state "payment (invokes payment)" as processing__payment' in text
    assert "processing__payment --> processing__fulfilment : done [event.outcome == 'paid']" in text
    # lifted across composites, with the real end named
    assert "on_hold --> processing : resume (→ processing.resume_point)" in text
    assert "processing --> payment_failed : done [else] (from payment)" in text
    assert "cart --> abandoned : after 1h" in text


def test_active_states_are_marked_with_a_class() -> None:
    defn = load_definition(EXAMPLES / "order.yaml")
    text = to_mermaid(defn, ["processing.fulfilment.packing.picking", "processing.fulfilment.shipping.ready"])
    check_structure(text)
    assert f"classDef active {mermaid_style('active')}" in text
    # one `class` line per state (GitHub styles a nested state only when it is named on its own line),
    # the composites holding the active states marked as their parents
    assert text.rstrip().splitlines()[-6:] == [
        "    class processing__fulfilment__packing__picking active",
        "    class processing__fulfilment__shipping__ready active",
        "    class processing active_parent",
        "    class processing__fulfilment active_parent",
        "    class processing__fulfilment__packing active_parent",
        "    class processing__fulfilment__shipping active_parent",
    ]
    composite = to_mermaid(defn, ["processing.fulfilment"])
    assert "    class processing__fulfilment active\n" in composite
    assert "    class processing active_parent\n" in composite
    assert "classDef" not in to_mermaid(defn)


def test_the_status_colours_the_active_states() -> None:
    defn = load_definition(EXAMPLES / "order.yaml")
    for status, colours in STATUS_COLOURS.items():
        text = to_mermaid(defn, ["completed"], status)
        check_structure(text)
        cls = "active" if status == "running" else status
        assert f"    classDef {cls} fill:{colours[0]},stroke:{colours[1]}" in text
        assert text.rstrip().endswith(f"class completed {cls}")
    assert len({to_mermaid(defn, ["completed"], s) for s in ("finished", "failed", "cancelled")}) == 3


def test_every_example_and_test_definition_is_well_formed() -> None:
    for path in [*EXAMPLES.glob("*.yaml"), *DEFS.glob("*.yaml")]:
        check_structure(to_mermaid(load_definition(path)))


def test_awkward_names_get_safe_unique_ids(tmp_path: Path) -> None:
    doc = tmp_path / "odd.yaml"
    doc.write_text(
        "id: odd\ninitial: end\nstates:\n"
        "  end: {on: {'go:now': a-b}}\n"
        "  a-b: {initial: end, states: {end: {on: {x: '#done'}}, '#done': {type: final}}}\n"
    )
    text = to_mermaid(load_definition(doc))
    scope_of = check_structure(text)
    assert state_id("end") == "s_end" and "s_end" in scope_of
    assert state_id("a-b.end") in scope_of and state_id("a-b.end") != state_id("end")
    assert "go\u2236now" in text  # a colon inside a label would end it early (RATIO instead)


def test_guard_text() -> None:
    assert guard_text({"gt": ["$event.amount", 100]}) == "event.amount > 100"
    assert guard_text({"and": [{"eq": ["$context.a", "x"]}, {"not": {"exists": "$event.b"}}]}) == \
        "(context.a == 'x') and (not (exists event.b))"
    assert guard_text("shop.rules:in_stock") == "in_stock()"
    assert guard_text({"lt": ["$context.n", {"add": ["$context.m", 1]}]}) == "context.n < context.m + 1"


def test_markdown_fence() -> None:
    md = to_markdown(load_definition(DEFS / "counter.yaml"), ["counting"])
    assert md.startswith("```mermaid\nstateDiagram-v2\n") and md.endswith("```\n")
    assert "class counting active" in md


def test_composites_in_regions_and_composite_self_loops_are_rendered_safely(tmp_path: Path) -> None:
    doc = tmp_path / "nested.yaml"
    doc.write_text("""
id: nested
initial: p
states:
  p:
    type: parallel
    on: {again: p}
    states:
      r1:
        initial: a
        states:
          a: {on: {go: inner}}
          inner:
            initial: c
            on: {back: a, loop: inner}
            states:
              c: {on: {next: d}}
              d: {type: final}
      r2: {initial: x, states: {x: {on: {done2: y}}, y: {type: final}}}
    on_done: end
  end: {type: final}
""")
    text = to_mermaid(load_definition(doc))
    check_structure(text)
    assert 'state "p · again ↺" as p {' in text
    assert 'state "inner · loop ↺" as p__r1__inner {' in text
    assert "p__r1__a --> p__r1__inner__c : go" in text
    assert "p__r1__inner__c --> p__r1__a : back (from inner)" in text


# -- the command: formats ---------------------------------------------------------------------------------


def _finished_counter(cli: Callable[..., Outcome]) -> None:
    for args in (("start", "counter", "--id", "c1"), ("send", "c1", "finish"), ("serve", "--until-idle")):
        out = cli(*args)
        assert out.code == 0, out.stderr


def test_viz_writes_svg_and_png_chosen_by_the_suffix(cli: Callable[..., Outcome], env: Env) -> None:
    _finished_counter(cli)
    svg_file, png_file = env.tmp / "c1.svg", env.tmp / "c1.png"
    assert cli("viz", "-e", "c1", "-o", str(svg_file)).code == 0
    root = ElementTree.fromstring(svg_file.read_text())
    assert "status-finished" in (root.get("class") or "").split()
    done = next(g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("data-path") == "done")
    assert "active" in (done.get("class") or "").split() and done.get("id") == "state-done"
    assert STATUS_COLOURS["finished"][0] in svg_file.read_text()
    assert cli("viz", "counter", "-e", "c1", "-o", str(png_file)).code == 0
    with Image.open(png_file) as img:
        assert img.format == "PNG" and img.width > 100
    # SVG to stdout is fine; a format given wins over the suffix
    out = cli("viz", "counter", "--format", "svg")
    assert out.code == 0 and out.stdout.startswith("<svg ")
    other = env.tmp / "c1.txt"
    assert cli("viz", "counter", "-f", "svg", "-o", str(other)).code == 0 and other.read_text().startswith("<svg ")
    mermaid = cli("viz", "-e", "c1")
    assert mermaid.code == 0 and "classDef finished " in mermaid.stdout and "class done finished" in mermaid.stdout


def test_viz_refuses_png_to_stdout_and_unknown_formats(cli: Callable[..., Outcome]) -> None:
    png = cli("viz", "counter", "--format", "png")
    assert png.code == 1 and "--output FILE.png" in png.stderr
    bad = cli("viz", "counter", "--format", "gif")
    assert bad.code == 1 and "unknown --format 'gif'; use one of mermaid, svg, png" in bad.stderr
    md = cli("viz", "counter", "--format", "svg", "--markdown")
    assert md.code == 1 and "--markdown" in md.stderr


def test_guard_text_reads_every_guard_as_written_never_as_a_python_dict() -> None:
    assert guard_text({"in_state": "processing.payment"}) == "in_state(processing.payment)"
    assert guard_text({"gt": [{"len": "$context.items"}, 3]}) == "len(context.items) > 3"
    assert guard_text({"le": [{"mul": ["$event.qty", "$event.price"]}, {"max": ["$context.limit", 10]}]}) == \
        "event.qty * event.price <= max(context.limit, 10)"
    assert guard_text({"in": ["$event.tier", ["gold", "silver"]]}) == "event.tier in ['gold', 'silver']"
    assert guard_text({"eq": ["$event.ok", True]}) == "event.ok == true"
    assert guard_text({"ne": ["$context.note", None]}) == "context.note != null"

    def in_stock(context: object, event: object) -> bool:
        return True

    assert guard_text(in_stock) == "in_stock()"
