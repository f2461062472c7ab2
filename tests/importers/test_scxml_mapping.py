"""How SCXML constructs become durastate's: each mapping is checked on the definition it gives and on
what that definition does when it runs."""

from __future__ import annotations

from typing import Any

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.importers import scxml
from durastate.runtime import LocalRuntime
from durastate.store.memory import DictStore

from .conftest import run_to_end

NS = "xmlns='http://www.w3.org/2005/07/scxml' version='1.0' datamodel='ecmascript'"


def _doc(body: str, **attrs: str) -> dict[str, Any]:
    extra = " ".join(f"{k}='{v}'" for k, v in attrs.items())
    result = scxml.convert(f"<scxml {NS} {extra}>{body}</scxml>", "chart.scxml")
    assert result.issues == [], [str(i) for i in result.issues]
    return result.document


def test_structure_ids_targets_and_the_context() -> None:
    doc = _doc("""
      <datamodel><data id="n" expr="1"/><data id="tags" expr="['a', '$b']"/></datamodel>
      <state id="outer"><initial><transition target="inner2"/></initial>
        <state id="inner1"/>
        <state id="inner2"><transition event="go" target="deep_h" type="internal"/></state>
        <history id="deep_h" type="deep"><transition target="inner1"/></history>
        <transition event="stop" target="end"/>
      </state>
      <final id="end"/>""", name="chart")
    assert doc == {
        "id": "chart", "action_errors": "raise", "done_events": "scxml", "initial": "outer",
        "context": {"n": 1, "tags": ["a", "$b"]},
        "states": {
            "outer": {"initial": "inner2", "on": {"stop": [{"target": "end"}]}, "states": {
                "inner1": {},
                "inner2": {"on": {"go": [{"target": "outer.deep_h", "internal": True}]}},
                "deep_h": {"type": "history", "history": "deep", "target": "outer.inner1"}}},
            "end": {"type": "final"}}}


def test_event_lists_and_document_order_across_descriptors() -> None:
    doc = _doc("""
      <state id="s">
        <transition event="a b" target="one"/>
        <transition event="*" cond="false" target="two"/>
        <transition event="a" target="three"/>
      </state>
      <final id="one"/><final id="two"/><final id="three"/>""")
    on = doc["states"]["s"]["on"]
    # `a` again after the overlapping `*` gets the equivalent key `a.*`, so the order stays SCXML's
    assert list(on) == ["a", "b", "*", "a.*"]
    assert on["a"] == on["b"] == [{"target": "one"}]


def test_executable_content_maps_onto_actions() -> None:
    doc = _doc("""
      <datamodel><data id="count" expr="0"/></datamodel>
      <state id="s">
        <onentry>
          <assign location="count" expr="count + 2 * 3"/>
          <raise event="next"/>
          <send event="note" target="#_parent"><param name="n" expr="count"/></send>
          <log label="count" expr="count"/>
        </onentry>
        <transition event="next" cond="count &gt;= 6 &amp;&amp; !(_event.data.skip == true)" target="done"/>
      </state>
      <final id="done"/>""")
    state = doc["states"]["s"]
    assert state["entry"] == [
        {"assign": {"count": {"add": ["$context.count", {"mul": [2, 3]}]}}},
        {"raise": {"event": "next"}},
        {"send": {"event": "note", "data": {"n": "$context.count"}, "to": "parent"}},
        {"log": {"count": "$context.count"}},
    ]
    assert state["on"]["next"][0]["guard"] == {
        "and": [{"ge": ["$context.count", 6]}, {"not": {"eq": ["$event.skip", True]}}]}
    exe = run_to_end(doc, max_seconds=0)
    assert (exe.status, exe.context) == ("finished", {"count": 6})


def test_own_completion_is_on_done() -> None:
    doc = _doc("""
      <state id="job" initial="work">
        <state id="work"><transition event="finish" target="ok"/></state>
        <final id="ok"/>
        <transition event="done.state.job" target="done"/>
      </state>
      <final id="done"/>""")
    assert doc["states"]["job"]["on_done"] == [{"target": "done"}]
    assert run_to_end(doc, ("finish",), max_seconds=0).outcome == "done"


def test_a_delayed_send_is_a_durable_send_that_outlives_its_state_and_cancel_drops_it() -> None:
    """SCXML delivers a delayed event whatever state the session is in by then, with the data evaluated
    when it was sent; ``<cancel sendid>`` drops it while it is pending."""
    doc = _doc("""
      <datamodel><data id="n" expr="1"/><data id="which" expr="'b'"/></datamodel>
      <state id="s">
        <onentry>
          <send event="late" delay="1500ms"><param name="p" expr="n"/></send>
          <send id="a" event="cancelled" delay="1s"/>
          <send id="b" event="kept" delay="2s"/>
          <assign location="n" expr="2"/>
          <cancel sendid="a"/>
        </onentry>
        <transition target="t"/>
      </state>
      <state id="t">
        <transition event="late" cond="_event.data.p == 1" target="u"/>
        <transition event="*" target="fail"/>
      </state>
      <state id="u"><transition event="kept" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert doc["states"]["s"]["entry"][:2] == [
        {"send": {"event": "late", "data": {"p": "$context.n"}, "to": "self", "delay": 1.5}},
        {"send": {"event": "cancelled", "to": "self", "delay": 1, "id": "a"}}]
    assert doc["states"]["s"]["entry"][4] == {"cancel": "a"}
    assert run_to_end(doc, max_seconds=3).outcome == "pass"
    # <cancel sendidexpr> reads the id when it runs
    by_expr = _doc("""<datamodel><data id="which" expr="'b'"/></datamodel>
      <state id="s"><onentry><send id="b" event="boom" delay="1s"/><cancel sendidexpr="which"/></onentry>
        <transition event="boom" target="fail"/><transition event="go" target="pass"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert by_expr["states"]["s"]["entry"][1] == {"cancel": "$context.which"}
    assert run_to_end(by_expr, ("go",), max_seconds=3).outcome == "pass"


def test_a_delayexpr_of_a_variable_that_only_holds_constants_is_a_choose_of_delayed_sends() -> None:
    doc = _doc("""<datamodel><data id="d" expr="'0s'"/></datamodel>
      <state id="s"><onentry><assign location="d" expr="'2s'"/><send delayexpr="d" event="late"/>
        <send delay="1s" event="early"/></onentry>
        <transition event="early" target="t"/><transition event="*" target="fail"/></state>
      <state id="t"><transition event="late" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert doc["states"]["s"]["entry"][1]["choose"][1] == {
        "guard": {"eq": ["$context.d", "2s"]}, "actions": [{"send": {"event": "late", "to": "self", "delay": 2}}]}
    assert run_to_end(doc, max_seconds=3).outcome == "pass"  # the delay read when it is sent: 2s, not 0s


def test_a_delayed_send_elsewhere_than_to_the_session_itself_is_reported() -> None:
    result = scxml.convert(f"""<scxml {NS}><state id="s"><onentry>
      <send event="x" target="#_parent" delay="1s"/></onentry></state></scxml>""")
    assert [i.message.split(":")[0] for i in result.issues] == ["<send target='#_parent' delay='1s'>"]


def test_ids_durastate_cannot_hold_are_renamed_and_reported() -> None:
    result = scxml.convert(f"<scxml {NS}><state id='a.b'><transition event='x' target='a.b'/></state></scxml>")
    assert [str(i) for i in result.issues] == [
        "scxml/state[@id='a.b'] (line 1): the id 'a.b' cannot be a durastate state name (no '.', '$', '~' or "
        "spaces); renamed 'a_b'"]
    assert result.document["states"] == {"a_b": {"on": {"x": [{"target": "a_b"}]}}}


def test_what_does_not_map_is_reported_once_each_with_its_place() -> None:
    result = scxml.convert(f"""<scxml {NS} initial="a b">
      <parallel id="p"><state id="a"/><state id="b"/></parallel>
      <state id="s"><invoke src="other.scxml"/>
        <transition event="error.platform" target="p"/>
        <transition event="go" target="a b"/></state>
    </scxml>""")
    assert [(i.location, i.line) for i in result.issues if i.location != "(definition)"] == [
        ("scxml/state[@id='s']/invoke[1]", 3),
        ("scxml/state[@id='s']/transition[1]", 4),
        ("scxml/state[@id='s']/transition[2]", 5),
        ("scxml", 1),
    ]
    # the rest maps and loads: the atomic regions a and b are given a leaf (a durastate region is compound)
    assert not [i for i in result.issues if i.location == "(definition)"]
    assert result.document["states"]["p"]["states"]["a"] == {"initial": "_leaf", "states": {"_leaf": {}}}


def test_a_parallel_runs_its_regions_inline_and_in_reads_the_other_region() -> None:
    doc = _doc("""
      <datamodel><data id="order" expr="''"/></datamodel>
      <parallel id="p">
        <transition event="stop" cond="In('b2')" target="done"/>
        <state id="a"><onexit><assign location="order" expr="order + 'a'"/></onexit>
          <transition event="go" cond="In('b1')" target="b2"/></state>
        <state id="b" initial="b1">
          <onexit><assign location="order" expr="order + 'b'"/></onexit>
          <state id="b1"/>
          <state id="b2"><onentry><raise event="stop"/></onentry></state>
        </state>
      </parallel>
      <final id="done"/>""")
    assert doc["states"]["p"]["regions"] == "inline"
    assert doc["states"]["p"]["on"]["stop"] == [{"target": "done", "guard": {"in_state": "p.b.b2"}}]
    assert doc["states"]["p"]["states"]["a"]["on"]["go"][0]["guard"] == {"in_state": "p.b.b1"}
    # one execution (no child for a region): go, from region a to b2 in region b, leaves and re-enters p
    # (SCXML: a parallel state is no transition's domain), exiting the last region first; b2 raises stop,
    # which p takes in the same step, In('b2') being true, and both regions are exited again
    exe = run_to_end(doc, ("go",), max_seconds=0)
    assert (exe.status, exe.outcome, exe.children, exe.context) == ("finished", "done", {}, {"order": "baba"})


def test_what_a_parallel_cannot_hold_is_reported_with_its_place() -> None:
    result = scxml.convert(f"""<scxml {NS}>
      <parallel id="p">
        <invoke src="other.scxml"/><state id="a"/>
        <parallel id="q"><state id="b"/><state id="c"/></parallel>
      </parallel></scxml>""")
    assert [(i.location, i.line) for i in result.issues if i.location != "(definition)"] == [
        ("scxml/parallel[@id='p']/invoke[1]", 3)]  # (a <parallel> region is one)
    assert "<invoke> of a <parallel> is not supported" in result.issues[0].message


def test_an_if_in_a_transition_becomes_one_guarded_transition_per_branch() -> None:
    doc = _doc("""
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="s">
        <transition event="pay" cond="_event.data.amount &gt; 0" target="s">
          <log label="paying" expr="_event.data.amount"/>
          <if cond="_event.data.amount &gt;= 100"><assign location="n" expr="n + 10"/>
          <elseif cond="_event.data.amount &gt;= 10"/><assign location="n" expr="n + 1"/>
          </if>
        </transition>
        <transition event="stop" target="done"/>
      </state>
      <final id="done"/>""")
    big, mid = {"ge": ["$event.amount", 100]}, {"ge": ["$event.amount", 10]}
    positive, logged = {"gt": ["$event.amount", 0]}, {"log": {"paying": "$event.amount"}}
    assert doc["states"]["s"]["on"]["pay"] == [
        {"target": "s", "guard": {"and": [positive, big]},
         "actions": [logged, {"assign": {"n": {"add": ["$context.n", 10]}}}]},
        {"target": "s", "guard": {"and": [positive, {"not": big}, mid]},
         "actions": [logged, {"assign": {"n": {"add": ["$context.n", 1]}}}]},
        {"target": "s", "guard": {"and": [positive, {"not": big}, {"not": mid}]}, "actions": [logged]},
    ]
    rt = LocalRuntime(DictStore(), DefinitionRegistry([load_definition(doc)]))
    eid = rt.start(doc["id"], execution_id="x")
    for amount in (150, 50, 5, 0, 100):
        rt.send(eid, Event(name="pay", data={"amount": amount}))
    rt.run_until_idle()
    assert rt.get(eid).context == {"n": 21}  # type: ignore[union-attr]


def test_if_and_foreach_are_choose_and_foreach_actions_tested_when_they_run() -> None:
    doc = _doc("""
      <datamodel><data id="n" expr="0"/><data id="items" expr="[1, 2, 3]"/><data id="sum" expr="0"/></datamodel>
      <state id="s">
        <onentry>
          <foreach array="items" item="x" index="i"><assign location="sum" expr="sum + x"/></foreach>
          <if cond="sum == 6"><raise event="six"/><elseif cond="sum &gt; 6"/><raise event="more"/>
          <else/><raise event="less"/></if>
        </onentry>
        <transition event="six" target="t">
          <assign location="n" expr="1"/>
          <if cond="n == 1"><assign location="n" expr="10"/><else/><assign location="n" expr="20"/></if>
        </transition>
      </state>
      <final id="t"/>""")
    assert doc["states"]["s"]["entry"][0] == {"foreach": {
        "array": "$context.items", "item": "x", "index": "i",
        "actions": [{"assign": {"sum": {"add": ["$context.sum", "$context.x"]}}}]}}
    assert [b.get("guard") for b in doc["states"]["s"]["entry"][1]["choose"]] == [
        {"eq": ["$context.sum", 6]}, {"gt": ["$context.sum", 6]}, None]
    exe = run_to_end(doc, max_seconds=0)
    # the <if> after the <assign> sees n == 1; the loop's item and index stay in the datamodel, as in SCXML
    assert (exe.status, exe.context) == ("finished", {"n": 10, "items": [1, 2, 3], "sum": 6, "x": 3, "i": 2})


def test_what_an_if_holds_that_does_not_map_is_reported() -> None:
    result = scxml.convert(f"""<scxml {NS}>
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="s">
        <transition event="other">
          <if cond="Math.random() &lt; 0.5"><script>n++</script><else/><foreach array="n" item="i.j"/></if>
        </transition>
      </state></scxml>""")
    assert [(i.location, i.message.split(":")[0]) for i in result.issues] == [
        ("scxml/state[@id='s']/transition[1]/if[1]", "cond='Math.random() < 0.5'"),  # every branch is read
        ("scxml/state[@id='s']/transition[1]/if[1]/script[1]", "<script> is not supported"),
    ]  # the <foreach item='i.j'> is SCXML's error.execution: it maps


def test_initial_content_runs_first_in_the_target_entry_when_nothing_else_enters_it() -> None:
    doc = _doc("""
      <datamodel><data id="log" expr="0"/></datamodel>
      <state id="s"><onentry><assign location="log" expr="log * 10 + 1"/></onentry>
        <initial><transition target="a"><assign location="log" expr="log * 10 + 2"/></transition></initial>
        <state id="a"><onentry><assign location="log" expr="log * 10 + 3"/></onentry>
          <transition event="go" target="b"/></state>
        <state id="b"/>
      </state>""")
    assert doc["states"]["s"]["states"]["a"]["entry"][0] == {"block": [{"assign": {"log": {"add": [
        {"mul": ["$context.log", 10]}, 2]}}}]}  # a block of its own: an error in it ends it, not the onentry
    assert run_to_end(doc, max_seconds=0).context == {"log": 123}  # onentry of s, <initial>, onentry of a
    for elsewhere in ('<state id="b"><transition event="back" target="a"/></state>',
                      '<history id="h"><transition target="b"/></history><state id="b"/>'):
        result = scxml.convert(f"""<scxml {NS}>
          <state id="s">
            <initial><transition target="a"><raise event="init"/></transition></initial>
            <state id="a"/>{elsewhere}
          </state></scxml>""")
        assert [i.message.split(":")[0] for i in result.issues] == [
            "executable content in an <initial> transition maps only when nothing else enters its target "
            "(no other transition targets it or a state inside it, no history restores it)"], elsewhere


def test_name_is_the_documents_name_and_assigning_it_is_an_error_execution() -> None:
    doc = _doc("""
      <datamodel><data id="me" expr="_name"/></datamodel>
      <state id="s"><transition cond="_name === 'chart' &amp;&amp; me == 'chart'" target="done"/></state>
      <final id="done"/>""", name="chart")
    assert doc["context"] == {"me": "chart"}
    assert run_to_end(doc, max_seconds=0).outcome == "done"
    result = scxml.convert(f"""<scxml {NS} name="chart"><datamodel><data id="x"/></datamodel>
      <state id="s"><onentry><assign location="_name" expr="'other'"/><raise event="skipped"/></onentry>
      <transition event="error.execution" cond="_name == 'chart'" target="done"/></state><final id="done"/></scxml>""")
    assert result.issues == []
    assert result.document["states"]["s"]["entry"] == [
        {"fail": "<assign location='_name'>: the system variable _name is read-only"}]
    assert run_to_end(result.document, max_seconds=0).outcome == "done"
    unnamed = scxml.convert(f"<scxml {NS}><datamodel><data id='me' expr='_name'/></datamodel><state id='s'/></scxml>")
    assert [i.message for i in unnamed.issues] == [
        "expr='_name': the system variable _name has no durastate equivalent"]


def test_content_scxml_fails_on_raises_error_execution_and_skips_the_rest_of_its_block() -> None:
    doc = _doc("""
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="s">
        <onentry>
          <assign location="n" expr="1"/>
          <send target="nowhere" event="never"/>
          <assign location="n" expr="2"/>
        </onentry>
        <transition event="go" target="t">
          <assign location="undeclared" expr="1"/><assign location="n" expr="3"/>
        </transition>
        <transition event="error.execution" cond="n == 1" target="t"/>
      </state>
      <final id="t"/>""")
    assert doc["states"]["s"]["entry"][1] == {"fail": "<send target='nowhere'>: not a valid target"}
    assert len(doc["states"]["s"]["entry"]) == 2  # the assign after it never runs in SCXML
    assert doc["states"]["s"]["on"]["go"][0]["actions"] == [
        {"fail": "<assign location='undeclared'>: 'undeclared' is not declared"}]
    exe = run_to_end(doc, max_seconds=0)
    assert (exe.status, exe.context) == ("finished", {"n": 1})


def test_an_error_inside_a_loop_or_a_branch_ends_the_content_around_it() -> None:
    """SCXML raises error.execution and ends the loop, the branch and the block around them: the fail action
    does that when it runs (the definition says ``action_errors: raise``); the state's other blocks still run."""
    doc = _doc("""
      <datamodel><data id="xs" expr="[1, 2, 3]"/><data id="n" expr="0"/><data id="m" expr="0"/></datamodel>
      <state id="s">
        <onentry>
          <foreach array="xs" item="x"><assign location="n" expr="n + 1"/><assign location="nope" expr="1"/></foreach>
          <assign location="n" expr="100"/>
        </onentry>
        <onentry><if cond="true"><send target="nowhere" event="e"/></if><assign location="m" expr="100"/></onentry>
        <onentry><assign location="m" expr="m + 1"/></onentry>
        <transition event="error.execution" cond="n == 1 &amp;&amp; m == 1" target="pass"/>
        <transition event="*" target="fail"/>
      </state>
      <final id="pass"/><final id="fail"/>""")
    assert doc["action_errors"] == "raise"
    assert [list(block) for block in doc["states"]["s"]["entry"]] == [["block"]] * 3  # one block per <onentry>
    foreach = doc["states"]["s"]["entry"][0]["block"][0]["foreach"]
    assert foreach["actions"][1] == {"fail": "<assign location='nope'>: 'nope' is not declared"}
    assert run_to_end(doc, max_seconds=0).outcome == "pass"


def test_a_parallel_state_can_be_a_region_of_another() -> None:
    doc = _doc("""
      <datamodel><data id="seen" expr="0"/></datamodel>
      <parallel id="outer">
        <parallel id="inner">
          <state id="a"><transition event="go" target="a2"/><state id="a1"/><state id="a2"/></state>
          <state id="b"/>
        </parallel>
        <state id="c"><transition event="finish" cond="In('a2')" target="done">
          <assign location="seen" expr="1"/></transition></state>
      </parallel>
      <final id="done"/>""", initial="outer")
    assert doc["states"]["outer"]["states"]["inner"]["type"] == "parallel"
    exe = run_to_end(doc, ("go",), max_seconds=0)
    assert exe.leaves == ["outer.inner.a.a2", "outer.inner.b._leaf", "outer.c._leaf"]
    exe = run_to_end(doc, ("go", "finish"), max_seconds=0)
    assert (exe.status, exe.outcome, exe.context) == ("finished", "done", {"seen": 1})


def test_donedata_is_what_the_done_transitions_read_as_event_data() -> None:
    """A constant <donedata> (a <content> of any value, or <param>s) is bound where the parent's
    ``done.state`` transitions read ``_event.data``; a <param> location SCXML cannot read raises
    error.execution when the final state is entered; finals giving different data are reported."""
    doc = _doc("""
      <state id="s" initial="s1">
        <transition event="done.state.s" cond="_event.data == 21" target="t"/>
        <transition event="done.state.s" target="fail"/>
        <state id="s1"><transition target="s2"/></state>
        <final id="s2"><donedata><content>21</content></donedata></final></state>
      <state id="t" initial="t1">
        <transition event="done.state.t" cond="_event.data['n'] == 1 &amp;&amp; _event.data.w == 'x'" target="ok"/>
        <transition event="done.state.t" target="fail"/>
        <final id="t1"><donedata><param name="n" expr="1"/><param name="w" expr="'x'"/></donedata></final></state>
      <final id="ok"/><final id="fail"/>""")
    assert doc["states"]["s"]["on_done"][0]["guard"] == {"eq": [21, 21]}
    assert run_to_end(doc, max_seconds=0).outcome == "ok"
    failing = _doc("""<datamodel><data id="v"/></datamodel>
      <state id="s" initial="f"><transition event="error.execution" target="ok"/>
        <final id="f"><donedata><param name="p" location="nowhere.x"/></donedata></final></state>
      <final id="ok"/>""")
    assert failing["states"]["s"]["states"]["f"]["entry"] == [
        {"fail": "<param location='nowhere.x'>: 'nowhere' is not declared"}]
    assert run_to_end(failing, max_seconds=0).outcome == "ok"
    differ = scxml.convert(f"""<scxml {NS}><state id="s" initial="a">
      <transition event="done.state.s" cond="_event.data == 1" target="end"/>
      <final id="a"><donedata><content expr="1"/></donedata></final>
      <final id="b"><donedata><content expr="2"/></donedata></final></state><final id="end"/></scxml>""")
    assert [i.message for i in differ.issues] == [
        "the final states of the state give different <donedata>: durastate's on_done does not know which one "
        "was reached"]


def test_ioprocessors_is_the_scxml_processor_without_a_location() -> None:
    doc = _doc("""
      <datamodel><data id="io" expr="_ioprocessors"/></datamodel>
      <state id="s"><transition cond="io &amp;&amp; io == _ioprocessors" target="done"/></state>
      <final id="done"/>""")
    assert set(doc["context"]["io"]) == {"scxml", "http://www.w3.org/TR/scxml/#SCXMLEventProcessor"}
    assert run_to_end(doc, max_seconds=0).outcome == "done"
    assert "_sessionid" not in doc["context"]  # no location read: nothing to compute


def test_a_processors_location_is_the_sessions_address_and_a_send_to_it_reaches_the_session() -> None:
    """``location`` is ``#_scxml_`` and ``_sessionid``, computed when the execution starts; a computed
    ``targetexpr`` is a choice on its value when the send runs: that address, ``#_internal``, ``#_parent``,
    or an execution id (what ``_event.origin`` is); none is SCXML's error.execution."""
    doc = _doc("""
      <datamodel><data id="at" expr="_ioprocessors.scxml.location"/><data id="nobody"/></datamodel>
      <state id="s"><onentry><send targetexpr="at" event="hello"/></onentry>
        <transition event="hello" cond="at == '#_scxml_' + _sessionid" target="t"/>
        <transition event="*" target="fail"/></state>
      <state id="t"><onentry><send targetexpr="nobody" event="lost"/></onentry>
        <transition event="error.execution" target="u"/><transition event="*" target="fail"/></state>
      <state id="u"><onentry><send event="ping"/></onentry>
        <transition event="ping" target="v"><send targetexpr="_event.origin" event="pong"/></transition></state>
      <state id="v"><transition event="pong" target="done"/><transition event="*" target="fail"/></state>
      <final id="done"/><final id="fail"/>""")
    assert doc["context"] == {"_sessionid": None, "at": None, "nobody": None}
    assert doc["states"]["s"]["entry"][0]["choose"][0]["actions"][1] == {
        "assign": {"at": {"add": ["#_scxml_", "$context._sessionid"]}}}
    sends = doc["states"]["s"]["entry"][1]["choose"]
    assert [branch.get("guard") for branch in sends] == [
        {"in": ["$context.at", [None, ""]]}, {"eq": ["$context.at", {"add": ["#_scxml_", "$context._sessionid"]}]},
        {"eq": ["$context.at", "#_internal"]}, {"eq": ["$context.at", "#_parent"]}, None]
    assert sends[-1]["actions"] == [{"send": {"event": "hello", "to": "$context.at"}}]
    exe = run_to_end(doc, max_seconds=0)
    assert (exe.outcome, exe.context["at"]) == ("done", "#_scxml_x-1:start")


def test_a_computed_typeexpr_sends_only_with_the_scxml_processor() -> None:
    doc = _doc("""<datamodel><data id="kind"/></datamodel>
      <state id="s"><onentry><send event="e1" typeexpr="_event.origintype"/></onentry>
        <transition event="error.execution" target="t"/><transition event="*" target="fail"/></state>
      <state id="t"><onentry><send event="e2"/></onentry>
        <transition event="e2" target="u"><send event="e3" typeexpr="_event.origintype"/></transition></state>
      <state id="u"><transition event="e3" target="done"/><transition event="*" target="fail"/></state>
      <final id="done"/><final id="fail"/>""")
    assert doc["states"]["s"]["entry"][0]["choose"][0]["guard"] == {
        "in": ["$meta.origin_type", ["http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "scxml"]]}
    assert run_to_end(doc, max_seconds=0).outcome == "done"  # the start has no origin type: error.execution


def test_sessionid_is_bound_once_when_the_execution_starts() -> None:
    """``_sessionid`` (and a ``<data>`` initialised from it) is the start event's id, assigned first thing;
    entering the initial state again keeps it; assigning it is SCXML's error.execution."""
    doc = _doc("""
      <datamodel><data id="me" expr="_sessionid"/><data id="n" expr="0"/></datamodel>
      <state id="s"><onentry><assign location="_sessionid" expr="'other'"/></onentry>
        <transition event="error.execution" cond="n == 0" target="s"><assign location="n" expr="1"/></transition>
        <transition event="error.execution" cond="me == _sessionid &amp;&amp; me" target="done"/></state>
      <final id="done"/>""")
    assert doc["context"] == {"_sessionid": None, "me": None, "n": 0}
    exe = run_to_end(doc, max_seconds=0)
    assert exe.outcome == "done"
    assert exe.context["_sessionid"] == exe.context["me"] == "x-1:start"


def test_eventexpr_of_a_variable_of_constants_is_a_choice_of_sends() -> None:
    doc = _doc("""
      <datamodel><data id="e" expr="'first'"/><data id="n" expr="0"/></datamodel>
      <state id="s"><onentry><assign location="e" expr="'second'"/><send eventexpr="e"/>
        <send eventexpr="'third'"><param name="k" expr="1"/></send></onentry>
        <transition event="second" target="t"/><transition event="*" target="fail"/></state>
      <state id="t"><transition event="third" cond="_event.data.k == 1" target="done"/>
        <transition event="*" target="fail"/></state>
      <final id="done"/><final id="fail"/>""")
    entry = doc["states"]["s"]["entry"]
    assert entry[1] == {"choose": [
        {"guard": {"eq": ["$context.e", "first"]}, "actions": [{"send": {"event": "first", "to": "self"}}]},
        {"guard": {"eq": ["$context.e", "second"]}, "actions": [{"send": {"event": "second", "to": "self"}}]},
        {"actions": [{"fail": "<send eventexpr='e'>: no value to send with"}]}]}
    assert entry[2] == {"send": {"event": "third", "data": {"k": 1}, "to": "self"}}
    assert run_to_end(doc, max_seconds=0).outcome == "done"
    computed = scxml.convert(f"""<scxml {NS}><datamodel><data id="e" expr="'a'"/></datamodel>
      <state id="s"><onentry><assign location="e" expr="e + 'b'"/><send eventexpr="e"/></onentry></state></scxml>""")
    assert [i.message for i in computed.issues] == [
        "<send eventexpr='e'> is not supported: only a string constant or a datamodel variable that only ever "
        "holds constants"]


def test_an_assign_of_no_ecmascript_expression_raises_error_execution() -> None:
    doc = _doc("""<datamodel><data id="v"/></datamodel>
      <state id="s"><onentry><assign location="v" expr="return"/><raise event="skipped"/></onentry>
        <transition event="error.execution" target="done"/></state><final id="done"/>""")
    assert doc["states"]["s"]["entry"] == [
        {"fail": "<assign expr='return'>: 'return' is a reserved word: this is no ECMAScript expression"}]
    assert run_to_end(doc, max_seconds=0).outcome == "done"


def test_several_initial_states_in_regions_of_one_child_set_the_initials_on_the_way() -> None:
    doc = _doc("""
      <state id="p" initial="x y"><parallel id="q">
        <state id="r1" initial="a"><state id="a"/><state id="x"/></state>
        <state id="r2" initial="b"><state id="b"/><state id="y"/></state>
        <transition cond="In('x') &amp;&amp; In('y')" target="done"/></parallel></state>
      <final id="done"/>""", initial="x y")
    assert doc["initial"] == "p"
    assert [doc["states"]["p"]["states"]["q"]["states"][r]["initial"] for r in ("r1", "r2")] == ["x", "y"]
    assert run_to_end(doc, max_seconds=0).outcome == "done"
    entered = scxml.convert(f"""<scxml {NS} initial="x y"><parallel id="q">
        <state id="r1"><state id="a"/><state id="x"><transition event="e" target="r1"/></state></state>
        <state id="r2"><state id="y"/></state></parallel></scxml>""")
    assert [i.message for i in entered.issues] == [
        "initial='x y' names several states; durastate starts a state in one child (it maps only for states "
        "inside one child that nothing else enters)"]


def test_a_send_namelist_of_no_ecmascript_expression_raises_error_execution() -> None:
    doc = _doc("""<state id="s"><onentry><send event="e" namelist='"foo'/></onentry>
        <transition event="error.execution" target="done"/></state><final id="done"/>""")
    assert doc["states"]["s"]["entry"] == [{"fail": (
        "<send namelist='\"foo'>: the string '\"foo' is not terminated: this is no ECMAScript expression")}]
    assert run_to_end(doc, max_seconds=0).outcome == "done"


def test_targetexpr_and_typeexpr_of_a_variable_of_constants_send_or_raise_error_execution() -> None:
    doc = _doc("""<datamodel><data id="to" expr="27"/><data id="kind" expr="'scxml'"/></datamodel>
      <state id="s"><onentry><send targetexpr="to" event="bad"/><assign location="to" expr="'#_internal'"/></onentry>
        <onentry><assign location="to" expr="'#_internal'"/>
          <send targetexpr="to" typeexpr="kind" event="good"/></onentry>
        <transition event="error.execution" target="t"/><transition event="*" target="fail"/></state>
      <state id="t"><transition event="good" target="done"/><transition event="*" target="fail"/></state>
      <final id="done"/><final id="fail"/>""")
    (first, _), (_, second) = (block["block"] for block in doc["states"]["s"]["entry"])
    assert first["choose"][0] == {"guard": {"eq": ["$context.to", 27]},
                                  "actions": [{"fail": "<send targetexpr='to'>: 27 is not a string"}]}
    assert second["choose"][1]["actions"][0]["choose"][0] == {  # both variables: a choice inside a choice
        "guard": {"eq": ["$context.kind", "scxml"]}, "actions": [{"raise": {"event": "good"}}]}
    assert run_to_end(doc, max_seconds=0).outcome == "done"


def test_an_eventless_cond_that_is_no_expression_raises_error_execution_where_it_is_evaluated_once() -> None:
    """SCXML takes such a cond as false and raises error.execution each time it evaluates it: once per entry
    of an atomic state left at once by a later eventless transition without a cond."""
    doc = _doc("""<state id="s0"><onentry><raise event="first"/></onentry>
        <transition cond="return" target="fail"/><transition target="s1"/></state>
      <state id="s1"><onentry><raise event="foo"/></onentry>
        <transition event="first" target="s2"/><transition event="*" target="fail"/></state>
      <state id="s2"><transition event="error.execution" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert "fail" in doc["states"]["s0"]["entry"][1]
    assert doc["states"]["s0"]["always"] == [{"target": "s1"}]
    assert run_to_end(doc, max_seconds=0).outcome == "pass"  # first, then error.execution, then foo
    # evaluated again on every event while the state stays: reported
    result = scxml.convert(f"""<scxml {NS}><state id="s0"><transition cond="return" target="fail"/>
      <transition event="go" target="pass"/></state><final id="pass"/><final id="fail"/></scxml>""")
    assert [i.message for i in result.issues] == [
        "cond='return': 'return' is a reserved word: this is no ECMAScript expression"]


def test_a_data_scxml_fails_to_evaluate_raises_error_execution_at_the_start_and_stays_undefined() -> None:
    doc = _doc("""<datamodel><data id="v" expr="return"/></datamodel>
      <state id="s"><onentry><raise event="foo"/></onentry>
        <transition event="error.execution" cond="typeof v === 'undefined'" target="t"/>
        <transition event="*" target="fail"/></state>
      <state id="t"><transition event="foo" target="done"/><transition event="*" target="fail"/></state>
      <final id="done"/><final id="fail"/>""")
    assert doc["context"] == {"_sessionid": None, "v": None}
    assert doc["states"]["s"]["entry"][0]["choose"][0]["actions"][1] == {"block": [
        {"fail": "<data id='v' expr='return'>: 'return' is a reserved word: this is no ECMAScript expression"}]}
    assert run_to_end(doc, max_seconds=0).outcome == "done"  # error.execution first, then foo


def test_what_scxml_keeps_with_an_event_is_read_from_meta() -> None:
    doc = _doc("""<datamodel><data id="seen" expr="[]"/><data id="v"/></datamodel>
      <state id="s"><onentry><raise event="a"/><send event="b" id="mine"/><send event="c" idlocation="v"/>
          <assign location="nope" expr="1"/></onentry>
        <transition event="*" cond="'sendid' in _event &amp;&amp; 'origintype' in _event">
          <assign location="seen" expr="seen.concat([[_event.name, _event.type, _event.sendid]])"/></transition>
      </state>""")
    assert doc["states"]["s"]["entry"][1:3] == [{"send": {"event": "b", "id": "mine", "to": "self"}},
                                               {"send": {"event": "c", "id_location": "v", "to": "self"}}]
    exe = run_to_end(doc, max_seconds=0)
    assert sorted(map(tuple, exe.context["seen"])) == sorted([
        ("a", "internal", None), ("error.execution", "platform", None), ("b", "external", "mine"),
        ("c", "external", exe.context["v"])])


def test_a_send_to_another_sessions_address_is_error_communication() -> None:
    doc = _doc("""<state id="s"><onentry><send target="#_scxml_other" event="e"/><send event="later"/></onentry>
        <transition event="error.communication" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert doc["states"]["s"]["entry"][0] == {"raise": {"event": "error.communication", "data": {
        "error": "<send target='#_scxml_other'>: no such session"}}}
    assert run_to_end(doc, max_seconds=0).outcome == "pass"


def test_a_dot_star_descriptor_is_the_wildcard() -> None:
    doc = _doc("""<state id="s"><onentry><raise event="x.y"/></onentry><transition event=".*" target="pass"/></state>
      <final id="pass"/>""")
    assert doc["states"]["s"]["on"] == {"*": [{"target": "pass"}]}
    assert run_to_end(doc, max_seconds=0).outcome == "pass"


def test_a_send_of_a_type_durastate_has_no_processor_for_raises_error_execution() -> None:
    """SCXML raises error.execution for a <send type> its processor does not support; durastate has only the
    SCXML event processor, so that is what a send of any other type does."""
    doc = _doc("""<state id="s"><onentry><send type="http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"
        event="e"/><send event="later"/></onentry>
        <transition event="error.execution" target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert "fail" in doc["states"]["s"]["entry"][0]
    assert run_to_end(doc, max_seconds=0).outcome == "pass"


def test_an_initial_element_with_several_targets_in_regions_of_one_child_sets_the_initials_on_the_way() -> None:
    doc = _doc("""<state id="top"><initial><transition target="a2 b2"/></initial>
        <parallel id="p">
          <state id="a"><state id="a1"/><state id="a2"><onentry><raise event="in_a2"/></onentry></state></state>
          <state id="b"><state id="b1"/><state id="b2"><transition event="in_a2" target="pass"/></state></state>
        </parallel></state>
      <final id="pass"/>""")
    region = doc["states"]["top"]["states"]["p"]["states"]
    assert (doc["states"]["top"]["initial"], region["a"]["initial"], region["b"]["initial"]) == ("p", "a2", "b2")
    assert run_to_end(doc, max_seconds=0).outcome == "pass"


def test_a_foreach_over_a_value_that_is_never_an_array_raises_error_execution() -> None:
    doc = _doc("""<datamodel><data id="n" expr="0"/><data id="seven" expr="7"/><data id="item"/></datamodel>
      <state id="s"><onentry><foreach array="seven" item="item"><assign location="n" expr="n + 1"/></foreach>
        <raise event="after"/></onentry>
        <transition event="error.execution" cond="n == 0" target="pass"/><transition event="*" target="fail"/>
      </state><final id="pass"/><final id="fail"/>""")
    assert doc["states"]["s"]["entry"] == [{"fail": "<foreach array='seven'>: not an array"}]
    assert run_to_end(doc, max_seconds=0).outcome == "pass"



def test_done_state_events_are_taken_outside_the_state_that_completes() -> None:
    """``done_events: scxml``: a region's ``done.state`` on its parallel state, a state's after it was left;
    a ``<donedata>`` SCXML fails to evaluate raises error.execution and the done event has no data."""
    doc = _doc("""<datamodel><data id="n" expr="0"/></datamodel>
      <parallel id="p">
        <transition event="done.state.r1"><assign location="n" expr="1"/></transition>
        <transition event="done.state.r2" target="s"/>
        <state id="r1"><final id="f"/></state>
        <state id="r2"><state id="a"><transition event="e" target="g"/></state>
          <final id="g"><donedata><param name="x" expr="return"/></donedata></final></state></parallel>
      <state id="s"><transition event="done.state.p" cond="n == 1 &amp;&amp; typeof _event.data === 'undefined'"
        target="pass"/><transition event="*" target="fail"/></state>
      <final id="pass"/><final id="fail"/>""")
    assert doc["done_events"] == "scxml"
    assert "done.state.r1" in doc["states"]["p"]["on"]
    assert doc["states"]["p"]["states"]["r2"]["states"]["g"]["entry"] == [
        {"fail": "expr='return': 'return' is a reserved word: this is no ECMAScript expression"}]
    assert run_to_end(doc, ("e",), max_seconds=0).outcome == "pass"  # done.state.p is taken in s


def test_a_script_of_assignments_is_translated_and_anything_else_reported() -> None:
    """A ``<script>`` is never run: its assignments are translated like expressions (a top-level one's
    constants are the initial values of its variables); any other statement is reported."""
    doc = _doc("""<script>var limit = 3; var name = 'a;b'</script>
      <state id="s"><onentry><script>
          var n = limit + 1
          name = name + '!'
        </script></onentry>
        <transition cond="n == 4 &amp;&amp; name == 'a;b!'" target="done"/></state><final id="done"/>""")
    assert doc["context"] == {"limit": 3, "name": "a;b"}
    assert doc["states"]["s"]["entry"] == [{"choose": [{"actions": [
        {"assign": {"n": {"add": ["$context.limit", 1]}}}, {"assign": {"name": {"add": ["$context.name", "!"]}}}]}]}]
    assert run_to_end(doc, max_seconds=0).outcome == "done"
    result = scxml.convert(f"""<scxml {NS}><state id="s"><onentry><script>for (;;) {{}}</script></onentry>
      </state></scxml>""")
    assert [i.message for i in result.issues] == [
        "<script> is not supported: durastate never runs code from a definition, and translates only assignments "
        "(x = expr, var x = expr), not 'for ('"]


def test_late_binding_binds_a_states_data_when_it_is_first_entered() -> None:
    doc = _doc("""<datamodel><data id="n" expr="1"/></datamodel>
      <state id="s"><transition cond="typeof v === 'undefined' &amp;&amp; n == 1" target="t"/></state>
      <state id="t"><datamodel><data id="v" expr="n + 1"/></datamodel><onentry><assign location="n" expr="v"/></onentry>
        <transition cond="n == 2" target="done"/></state><final id="done"/>""", binding="late")
    assert doc["context"] == {"n": 1, "v": None}
    assert doc["states"]["t"]["entry"] == [
        {"block": [{"choose": [{"guard": {"eq": ["$context.v", None]},
                                "actions": [{"assign": {"v": {"add": ["$context.n", 1]}}}]}]}]},
        {"block": [{"assign": {"n": "$context.v"}}]}]
    assert run_to_end(doc, max_seconds=0).outcome == "done"


def test_a_sends_content_is_what_the_transitions_on_its_event_read_as_event_data() -> None:
    doc = _doc("""<state id="s"><onentry><send event="n"><content>123</content></send>
        <send event="o"><content>{"k": "$v", "w": [1]}</content></send></onentry>
        <transition event="n" cond="_event.data == 123" target="t"/><transition event="*" target="fail"/></state>
      <state id="t"><transition event="o" cond="_event.data.k == '$v' &amp;&amp; _event.data.w[0] == 1" target="done"/>
        <transition event="*" target="fail"/></state><final id="done"/><final id="fail"/>""")
    assert doc["states"]["s"]["entry"] == [{"send": {"event": "n", "data": {"content": 123}, "to": "self"}}, {
        "send": {"event": "o", "data": {"content": {"k": "$$v", "w": [1]}}, "to": "self"}}]
    assert doc["states"]["s"]["on"]["n"][0]["guard"] == {"eq": ["$event.content", 123]}
    assert run_to_end(doc, max_seconds=0).outcome == "done"
