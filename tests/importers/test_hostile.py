"""Hostile input: entities are never expanded, external resources never fetched, code never run.

Each construct is refused or reported with its location; none of them has any effect on the machine
running the import (an expression is parsed by a small parser, never evaluated).
"""

from __future__ import annotations

import json

import pytest

from durastate.errors import DefinitionError
from durastate.importers import scxml, xstate

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"><state id="&lol9;"/></scxml>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE scxml [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"><state id="a"><onentry>
<log expr="'&secret;'"/></onentry></state></scxml>
"""


def _chart(body: str, data: str = "<data id='x' expr='1'/>") -> str:
    return (f"<scxml xmlns='http://www.w3.org/2005/07/scxml' version='1.0' datamodel='ecmascript' initial='s'>"
            f"<datamodel>{data}</datamodel><state id='s'>{body}</state><final id='done'/></scxml>")


@pytest.mark.parametrize("text", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["billion-laughs", "external-entity"])
def test_a_doctype_is_refused_before_anything_is_expanded(text: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        scxml.convert(text, "evil.scxml")
    assert caught.value.issues == [
        "(document) line 2: refused: a DOCTYPE declaration: SCXML needs none, and its entities (internal or "
        "external) are never expanded here; remove it"]


def test_not_xml_or_not_scxml_is_a_clear_error() -> None:
    with pytest.raises(DefinitionError, match=r"line 1 column \d+: not well-formed XML"):
        scxml.convert("<scxml", "x.scxml")
    with pytest.raises(DefinitionError, match="the root element is 'html', not <scxml>"):
        scxml.convert("<html/>", "x.scxml")


@pytest.mark.parametrize(("body", "expected"), [
    ("<onentry><script>require('child_process').exec('rm -rf /')</script></onentry>",
     "<script> is not supported: durastate never runs code"),
    ("<transition cond='Math.random() &gt; 0.5' target='done'/>",
     "the call Math.random() is outside the supported subset (no code is run)"),
    ("<onentry><assign location='x' expr='x.map(function (v) { return v })'/></onentry>",
     "outside the supported expression subset"),
    ("<transition cond=\"_event.data.constructor.constructor('return process')()\" target='done'/>",
     "is outside the supported subset (no code is run)"),
    ("<onentry><assign location='x' expr='x = 2'/></onentry>", "an assignment inside an expression"),
    ("<transition cond='undeclared == 1' target='done'/>", "'undeclared' is not a variable of the datamodel"),
])
def test_code_in_an_expression_is_reported_with_its_location(body: str, expected: str) -> None:
    result = scxml.convert(_chart(body))
    assert len(result.issues) == 1, [str(i) for i in result.issues]
    issue = result.issues[0]
    assert expected in issue.message
    assert issue.location.startswith("scxml/state[@id='s']/") and issue.line == 1


def test_an_expression_nesting_without_end_is_refused_not_a_crash() -> None:
    result = scxml.convert(_chart("<transition cond='" + "(" * 5000 + "1" + ")" * 5000 + " == 1' target='done'/>"))
    assert "longer than" in result.issues[0].message or "nests deeper" in result.issues[0].message


def test_a_data_src_is_never_fetched() -> None:
    result = scxml.convert(_chart("", data="<data id='x' src='http://169.254.169.254/latest/meta-data/'/>"))
    assert "nothing is fetched" in result.issues[0].message


def test_xstate_functions_cannot_be_smuggled_in_as_strings() -> None:
    config = {"id": "m", "initial": "a", "states": {"a": {
        "entry": ["() => process.exit(1)"],
        "on": {"GO": {"target": "a", "guard": "ctx => ctx.ok"}}}}}
    result = xstate.convert(json.dumps(config))
    assert [i.location for i in result.issues] == ["states.a.entry[0]", "states.a.on.GO.guard"]
    assert result.document["states"]["a"] == {}


def test_deep_nesting_is_refused_not_a_crash() -> None:
    deep = "<state>" * 5000 + "</state>" * 5000
    with pytest.raises(DefinitionError, match="refused: elements nested more than 100 deep"):
        scxml.convert(f"<scxml xmlns='http://www.w3.org/2005/07/scxml'>{deep}</scxml>")
    node: dict[str, object] = {}
    for _ in range(300):
        node = {"initial": "s", "states": {"s": node}}
    result = xstate.convert(json.dumps({"id": "m", **node}))
    assert any("states nest more than 100 deep" in issue.message for issue in result.issues)


def test_an_if_with_too_many_branches_is_reported_not_expanded() -> None:
    """Each path through a transition's <if>s becomes a guarded transition: thousands of <elseif>s, or
    nested <if>s that multiply, are refused with a message instead of growing quadratically."""
    ns = "xmlns='http://www.w3.org/2005/07/scxml' version='1.0' datamodel='ecmascript'"
    wide = "".join(f"<elseif cond='{i} == 1'/><raise event='e{i}'/>" for i in range(20_000))
    nested = "<if cond='true'><raise event='a'/></if>" * 7  # 2**7 paths
    for content, expected in ((f"<if cond='false'>{wide}</if>", "more than 64 branches in one <if>"),
                              (nested, "more than 64 paths through the <if>s of one transition")):
        result = scxml.convert(f"<scxml {ns}><state id='s'><transition event='go'>{content}</transition></state>"
                               "</scxml>")
        assert [i.message.split(";")[0] for i in result.issues] == [expected]
