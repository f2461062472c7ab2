"""SCXML ``<invoke>``: each mapping checked on the definitions it gives and on what they do when they run
(the parent and its invoked children on one local runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from durastate.engine import load_definition
from durastate.importers import ImportResult, scxml, to_yaml
from durastate.importers.files import beside
from durastate.importers.scxml_invoke import MAX_INVOKED

from .conftest import run_to_end

NS = "xmlns='http://www.w3.org/2005/07/scxml' version='1.0' datamodel='ecmascript'"

CHILD = f"""<scxml {NS} initial="c"><datamodel><data id="n" expr="0"/></datamodel>
  <state id="c"><transition cond="n == 2" target="end"><send target="#_parent" event="two"/></transition>
    <transition target="end"><send target="#_parent" event="other"/></transition></state>
  <final id="end"/></scxml>"""


def _convert(body: str, **kw: object) -> ImportResult:
    return scxml.convert(f"<scxml {NS} name='p'>{body}</scxml>", "p.scxml", **kw)  # type: ignore[arg-type]


def _complete(body: str) -> ImportResult:
    result = _convert(body)
    assert result.issues == [], [str(i) for i in result.issues]
    return result


def _run(result: ImportResult) -> tuple[str, str | None]:
    exe = run_to_end(result.document, invoked=result.invoked, max_seconds=5)
    return exe.status, exe.outcome


def test_an_inline_document_is_a_definition_of_its_own_that_the_state_invokes() -> None:
    result = _complete(f"""<datamodel><data id="n" expr="2"/><data id="m" expr="1"/></datamodel>
      <state id="s"><invoke namelist="n m"><content>{CHILD}</content></invoke>
        <transition event="two" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert result.document["states"]["s"]["invoke"] == {"definition": "p~s.1", "context": {"n": "$context.n"}}
    assert [d["id"] for d in result.invoked] == ["p~s.1"]
    assert result.documents == [result.document, *result.invoked]
    assert result.document["context"] == {"n": 2, "m": 1}  # the child's <data> is its own, not the parent's
    assert result.invoked[0]["context"] == {"n": 0}  # m is no variable of the child: left out, as SCXML does
    assert load_definition(to_yaml(ImportResult(result.invoked[0]))).id == "p~s.1"
    assert _run(result) == ("finished", "pass")


def test_a_param_sets_the_childs_variable_over_its_data() -> None:
    result = _complete(f"""<state id="s"><invoke id="calc"><param name="n" expr="1 + 1"/><content>{CHILD}</content>
        </invoke><transition event="two" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert result.document["states"]["s"]["invoke"] == {"definition": "p~calc", "context": {"n": {"add": [1, 1]}}}
    assert _run(result) == ("finished", "pass")
    without = _complete(f"""<state id="s"><invoke><content>{CHILD}</content></invoke>
        <transition event="other" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert _run(without) == ("finished", "pass")


def test_done_invoke_is_sent_by_the_child_after_everything_else_it_sends() -> None:
    result = _complete(f"""<state id="s"><invoke id="k"><content>{CHILD}</content></invoke>
        <transition event="other" target="t"/><transition event="*" target="fail"/></state>
      <state id="t"><transition event="done.invoke.k" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert result.invoked[0]["states"]["end"]["exit"] == [{"choose": [
        {"guard": {"ne": ["$event.name", "durastate.cancel"]},
         "actions": [{"send": {"event": "done.invoke.k", "to": "parent"}}]}]}]
    # the parent has left the invoking state when done.invoke.k arrives: SCXML queued it already, so it counts
    assert _run(result) == ("finished", "pass")


def test_a_compound_state_invokes_while_any_of_its_states_is_active() -> None:
    result = _complete(f"""<state id="s" initial="a"><invoke><content>{CHILD.replace('n == 2', 'true')}</content>
        </invoke><state id="a"><transition event="two" target="b"/></state>
        <state id="b"><transition event="done.invoke" target="pass"/></state></state>
      <final id="pass"/>""")
    assert result.document["states"]["s"]["invoke"] == {"definition": "p~s.1"}
    assert _run(result) == ("finished", "pass")


def test_a_send_to_the_invoke_id_reaches_the_child() -> None:
    result = _complete(f"""<state id="s" initial="a"><invoke id="kid"><content><scxml {NS}>
          <state id="w"><onentry><send target="#_parent" event="ready"/></onentry>
            <transition event="ping" target="f"><send target="#_parent" event="pong"/></transition></state>
          <final id="f"/></scxml></content></invoke>
        <state id="a"><transition event="ready" target="b"><send target="#_kid" event="ping"/></transition></state>
        <state id="b"><transition event="pong" target="pass"/></state></state>
      <final id="pass"/>""")
    assert result.document["states"]["s"]["invoke"] == {"definition": "p~kid", "id_key": "_invoke_kid"}
    assert result.document["states"]["s"]["states"]["a"]["on"]["ready"][0]["actions"] == [
        {"send": {"event": "ping", "to": "$context._invoke_kid"}}]
    assert _run(result) == ("finished", "pass")


def test_each_further_invoke_of_an_atomic_state_is_a_state_inside_it() -> None:
    child = f"<scxml {NS}><final id='f'/></scxml>"
    result = _complete(f"""<state id="s"><onentry><send event="late" delay="1s"/></onentry>
        <invoke id="one"><content>{child}</content></invoke><invoke id="two"><content>{child}</content></invoke>
        <invoke id="three"><content>{child}</content></invoke>
        <transition event="done.invoke.one" target="t"/></state>
      <state id="t"><transition event="done.invoke.two" target="u"/></state>
      <state id="u"><transition event="done.invoke.three" target="pass"/></state>
      <final id="pass"/>""")
    s = result.document["states"]["s"]
    assert s["invoke"] == {"definition": "p~one"} and s["initial"] == "_invoke2"
    assert s["states"]["_invoke2"] == {"invoke": {"definition": "p~two"}, "initial": "_invoke3",
                                       "states": {"_invoke3": {"invoke": {"definition": "p~three"}}}}
    assert _run(result) == ("finished", "pass")  # the three children, in document order


def test_autoforward_sends_the_parents_events_to_the_child() -> None:
    result = _complete(f"""<state id="s"><onentry><send event="hello" delay="1s"/></onentry>
        <invoke autoforward="true"><content><scxml {NS}><state id="w">
          <transition event="hello" target="f"><send target="#_parent" event="heard"/></transition></state>
          <final id="f"/></scxml></content></invoke>
        <transition event="hello"/><transition event="heard" target="pass"/></state>
      <final id="pass"/>""")
    assert result.document["states"]["s"]["invoke"] == {"definition": "p~s.1", "forward": True}
    assert _run(result) == ("finished", "pass")  # the delayed send, from outside, is forwarded too


def test_a_srcexpr_or_typeexpr_the_state_fixes_on_entry_is_that_src_or_type(tmp_path: Path) -> None:
    (tmp_path / "c.scxml").write_text(f"<scxml {NS}><final id='f'/></scxml>")
    chart = tmp_path / "p.scxml"
    body = """<datamodel><data id="where" expr="'nowhere'"/><data id="kind" expr="'foo'"/></datamodel>
      <state id="s"><onentry><assign location="where" expr="'file:c.scxml'"/>
          <assign location="kind" expr="'scxml'"/></onentry>
        <invoke srcexpr="where" typeexpr="kind"/><transition event="done.invoke" target="pass"/></state>
      <state id="t"><onentry>{again}</onentry></state><final id="pass"/>"""
    result = _convert(body.format(again=""), resolve=beside(chart))
    assert result.issues == [] and result.invoked[0]["id"] == "p~s.1"
    assert _run(result) == ("finished", "pass")
    # assigned elsewhere too: its value when the invoke starts is not the document's to say
    again = _convert(body.format(again="<assign location='where' expr=\"'file:d.scxml'\"/>"), resolve=beside(chart))
    assert [i.message.split(" is ")[0] for i in again.issues] == ["<invoke srcexpr=...>"]


def test_a_state_of_a_parallel_invokes_in_its_inline_region() -> None:
    result = _complete(f"""<parallel id="p"><transition event="timeout" target="fail"/>
        <state id="a"><invoke id="k"><content>{CHILD}</content></invoke>
          <transition event="other" target="pass"/></state>
        <state id="b"><onentry><send event="timeout" delay="1s"/></onentry></state></parallel>
      <final id="pass"/><final id="fail"/>""")
    assert result.document["states"]["p"]["states"]["a"]["invoke"] == {"definition": "p~k"}
    assert _run(result) == ("finished", "pass")


def test_idlocation_holds_the_invoke_id() -> None:
    result = _complete(f"""<datamodel><data id="where"/></datamodel>
      <state id="s"><onentry><log expr="1"/></onentry><invoke idlocation="where"><content>{CHILD}</content></invoke>
        <transition event="done.invoke" cond="where == 's.1'" target="pass"/>
        <transition event="done.invoke" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert result.document["states"]["s"]["entry"] == [{"log": 1}, {"assign": {"where": "s.1"}}]
    assert _run(result) == ("finished", "pass")


def test_a_cancelled_child_sends_its_parent_nothing() -> None:
    """Leaving the invoking state cancels the child; its exit actions run (durastate's cancel) but SCXML stops
    the session, so what they would send the parent is not sent."""
    result = _complete(f"""<state id="s" initial="s1">
        <onentry><send event="timeout" delay="2s"/></onentry>
        <transition event="timeout" target="pass"/><transition event="bye" target="fail"/>
        <state id="s1"><onentry><send event="leave"/></onentry>
          <invoke><content><scxml {NS}><state id="w"><onexit><send target="#_parent" event="bye"/></onexit>
            </state></scxml></content></invoke>
          <transition event="leave" target="s2"/></state>
        <state id="s2"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert _run(result) == ("finished", "pass")


def test_finalize_runs_in_the_invoking_state_before_the_childs_event_is_taken() -> None:
    result = _complete(f"""<datamodel><data id="got" expr="0"/></datamodel>
      <state id="s"><invoke id="k"><content><scxml {NS}><final id="f"><onentry>
          <send target="#_parent" event="result"><param name="v" expr="7"/></send></onentry></final></scxml></content>
          <finalize><assign location="got" expr="_event.data.v"/></finalize></invoke>
        <transition event="result" cond="got == 7" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    on = result.document["states"]["s"]["on"]
    assert list(on)[:2] == ["invoke.k.result", "invoke.k.done.invoke.k"]  # tried before the state's own
    assert on["invoke.k.result"] == [{"actions": [{"assign": {"got": "$event.v"}},
                                                  {"raise": {"event": "result", "data": "$event.data"}}]}]
    assert result.invoked[0]["states"]["f"]["entry"][0]["choose"][0]["actions"] == [
        {"send": {"event": "invoke.k.result", "to": "parent", "data": {"v": 7}}}]
    assert _run(result) == ("finished", "pass")


def test_a_relayed_event_no_transition_takes_is_not_raised() -> None:
    result = _complete(f"""<datamodel><data id="got" expr="0"/></datamodel>
      <state id="s"><invoke id="k"><content><scxml {NS}><final id="f"/></scxml></content>
          <finalize><assign location="got" expr="1"/></finalize></invoke>
        <transition event="go" target="pass"/></state>
      <final id="pass"/>""")
    assert result.document["states"]["s"]["on"]["invoke.k.done.invoke.k"] == [{"actions": [{"assign": {"got": 1}}]}]


def test_arguments_that_are_no_expression_raise_error_execution_and_start_no_child() -> None:
    result = _complete(f"""<state id="s"><onentry><send event="late" delay="1s"/></onentry>
        <invoke><param name="n" expr="return"/><content>{CHILD}</content></invoke>
        <transition event="error.execution" target="t"/><transition event="*" target="fail"/></state>
      <state id="t"><transition event="late" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert "invoke" not in result.document["states"]["s"] and result.invoked == []
    # an error the import sees is a `fail` action: under action_errors: raise, it raises error.execution
    assert "is no ECMAScript expression" in result.document["states"]["s"]["entry"][-1]["fail"]
    assert _run(result) == ("finished", "pass")


def test_invokes_of_invoked_charts_are_definitions_too() -> None:
    inner = f"<scxml {NS}><final id='x'/></scxml>"
    result = _complete(f"""<state id="s"><invoke><content><scxml {NS} initial="a">
          <state id="a"><invoke id="deep"><content>{inner}</content></invoke>
            <transition event="done.invoke.deep" target="b"/></state><final id="b"/></scxml></content></invoke>
        <transition event="done.invoke" target="pass"/></state><final id="pass"/>""")
    assert [d["id"] for d in result.invoked] == ["p~s.1", "p~s.1~deep"]
    assert _run(result) == ("finished", "pass")


def test_an_issue_of_an_inline_document_is_located_in_the_chart() -> None:
    result = _convert(f"""<state id="s"><invoke><content><scxml {NS}><state id="c"><onentry><script>x</script>
        </onentry></state></scxml></content></invoke></state>""")
    assert [(i.location, i.line) for i in result.issues] == [
        ("scxml/state[@id='s']/invoke[1]/content[1]/scxml[1]/state[@id='c']/onentry[1]/script[1]", 1)]


@pytest.mark.parametrize(("body", "message", "mapped"), [
    ("<state id='s'><invoke><content><scxml {NS}/></content></invoke>"
     "<invoke><content><scxml {NS}/></content></invoke><state id='c'/></state>",
     "a second <invoke> in a state with child states is not supported", 1),  # the first is mapped
    ("<parallel id='p'><invoke><content><scxml {NS}/></content></invoke><state id='a'/></parallel>",
     "<invoke> of a <parallel> is not supported", 0),
    ("<parallel id='p'><state id='a'><invoke><content><scxml {NS}/></content></invoke>"
     "<invoke><content><scxml {NS}/></content></invoke></state></parallel>",
     "a second <invoke> in a state inside a <parallel> is not supported", 1),
    ("<state id='s'><invoke typeexpr='t'><content><scxml {NS}/></content></invoke></state>",
     "<invoke typeexpr=...> is not supported", 0),
    ("<state id='s'><invoke type='http://www.w3.org/TR/ccxml/'><content><scxml {NS}/></content></invoke></state>",
     "only an SCXML session can be invoked", 0),
    ("<state id='s'><invoke><content expr='doc'/></invoke></state>", "<invoke> of <content expr> is not supported", 0),
    ("<state id='s'><invoke src='c.scxml'/></state>", "with no folder to read the document from", 0),
    ("<state id='s'><invoke id='t.2'><content><scxml {NS}/></content></invoke></state>"
     "<state id='t'><invoke><content><scxml {NS}/></content></invoke></state>",
     "the invoke id 't.2' is used twice in the document", 1),  # t's is the document's second <invoke>
    ("<state id='s'><invoke idlocation='nowhere'><content><scxml {NS}/></content></invoke></state>",
     "idlocation='nowhere': not a variable of the datamodel", 0),
])
def test_what_does_not_map_is_reported(body: str, message: str, mapped: int) -> None:
    result = _convert(body.replace("{NS}", NS))
    assert any(message in i.message and i.location.startswith("scxml/") for i in result.issues), \
        [str(i) for i in result.issues]
    assert len(result.invoked) == mapped  # left out, never half mapped
    assert str(result.document).count("'invoke': ") == mapped


def test_src_is_read_beside_the_chart_and_nowhere_else(tmp_path: Path) -> None:
    (tmp_path / "c.scxml").write_text(CHILD)
    (tmp_path / "self.scxml").write_text(f"<scxml {NS}><state id='s'><invoke src='file:self.scxml'/></state></scxml>")
    (tmp_path / "bad.scxml").write_text(f"<scxml {NS}><datamodel><data id='v' src='v.json'/></datamodel>"
                                        "<state id='s'/></scxml>")
    chart = tmp_path / "p.scxml"
    result = _convert("""<state id="s"><invoke src="file:c.scxml"><param name="n" expr="2"/></invoke>
        <transition event="two" target="pass"/></state><final id="pass"/>""", resolve=beside(chart))
    assert result.issues == [] and result.invoked[0]["id"] == "p~s.1"
    assert _run(result) == ("finished", "pass")
    for src, message in [("../c.scxml", "only a file beside the chart"), ("/etc/passwd", "only a file beside"),
                         ("http://example.com/c.scxml", "only a file beside"), ("none.scxml", "cannot read"),
                         ("self.scxml", "the document invokes itself"),
                         ("bad.scxml", "in bad.scxml: scxml/datamodel[1]/data[@id='v'] (line 1): <data src>")]:
        issues = _convert(f"<state id='s'><invoke src='{src}'/></state>", resolve=beside(chart)).issues
        assert len(issues) == 1 and message in issues[0].message, (src, [str(i) for i in issues])
        assert issues[0].location == "scxml/state[@id='s']/invoke[1]" and issues[0].line == 1


def test_charts_that_invoke_each_other_many_times_are_bounded(tmp_path: Path) -> None:
    """Ten invokes of a document that has ten invokes of one that has ten...: refused past MAX_INVOKED
    charts, not converted a hundred million times."""
    for level in range(6):
        inner = f"file:l{level + 1}.scxml" if level < 5 else None
        states = "".join(f"<state id='s{i}'><invoke src='{inner}'/></state>" if inner else f"<final id='s{i}'/>"
                         for i in range(10))
        (tmp_path / f"l{level}.scxml").write_text(f"<scxml {NS}>{states}</scxml>")
    chart = tmp_path / "l0.scxml"
    result = scxml.convert(chart.read_text(), chart.name, resolve=beside(chart))
    assert len(result.invoked) <= MAX_INVOKED
    assert any(f"more than {MAX_INVOKED} invoked charts" in i.message for i in result.issues)
