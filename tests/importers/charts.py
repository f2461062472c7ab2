"""Small charts the folder-loading and local-stack tests share: an SCXML turnstile, an XState light, an
SCXML upload whose ``<parallel>`` runs inline (``In()`` across its regions), an SCXML order that invokes
a payment chart from a file beside it and a courier chart written inline, and an SCXML chart with a
construct that does not map."""

from __future__ import annotations

UPLOAD_SCXML = """\
<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="upload" datamodel="ecmascript" initial="work">
  <datamodel><data id="exits" expr="0"/></datamodel>
  <parallel id="work">
    <transition event="publish" cond="In('clean')" target="published"/>
    <state id="scan" initial="scanning">
      <onexit><assign location="exits" expr="exits + 1"/></onexit>
      <state id="scanning"><transition event="scanned" target="clean"/></state>
      <state id="clean"/>
    </state>
    <state id="thumbnail">
      <onexit><assign location="exits" expr="exits + 1"/></onexit>
    </state>
  </parallel>
  <final id="published"/>
</scxml>
"""

TURNSTILE_SCXML = """\
<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="turnstile" datamodel="ecmascript"
       initial="locked">
  <datamodel>
    <data id="paid" expr="0"/>
    <data id="passes" expr="0"/>
  </datamodel>
  <state id="locked">
    <transition event="coin" cond="paid + _event.data.amount &gt;= 100" target="unlocked">
      <assign location="paid" expr="0"/>
    </transition>
    <transition event="coin">
      <assign location="paid" expr="paid + _event.data.amount"/>
    </transition>
  </state>
  <state id="unlocked">
    <transition event="push" target="locked">
      <assign location="passes" expr="passes + 1"/>
    </transition>
    <transition event="service" target="out_of_order"/>
  </state>
  <final id="out_of_order"/>
</scxml>
"""

LIGHT_XSTATE = """\
{
  "id": "light",
  "initial": "green",
  "context": {"cycles": 0},
  "states": {
    "green": {"on": {"TIMER": "yellow"}},
    "yellow": {"after": {"1500": "red"}},
    "red": {
      "initial": "walk",
      "states": {
        "walk": {"on": {"PED_COUNTDOWN": "wait"}},
        "wait": {"on": {"PED_COUNTDOWN": "stop"}},
        "stop": {"type": "final"}
      },
      "onDone": {"target": "off", "actions": [{"type": "xstate.assign", "assignment": {"cycles": 1}}]}
    },
    "off": {"type": "final"}
  }
}
"""

SCRIPTED_SCXML = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="scripted" datamodel="ecmascript">
  <state id="s">
    <onentry><script>counter++</script></onentry>
    <transition event="go" target="done"/>
  </state>
  <final id="done"/>
</scxml>
"""

ORDER_SCXML = """\
<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="order" datamodel="ecmascript" initial="paying">
  <datamodel><data id="amount" expr="30"/><data id="receipt"/></datamodel>
  <state id="paying">
    <invoke id="payment" src="payment.scxml" namelist="amount">
      <finalize><assign location="receipt" expr="_event.data.receipt"/></finalize>
    </invoke>
    <transition event="paid" target="shipping"/>
  </state>
  <state id="shipping">
    <invoke id="courier">
      <content>
        <scxml version="1.0" datamodel="ecmascript" initial="delivering">
          <state id="delivering"><transition target="delivered"/></state>
          <final id="delivered"/>
        </scxml>
      </content>
    </invoke>
    <transition event="done.invoke.courier" target="delivered"/>
  </state>
  <final id="delivered"/>
</scxml>
"""

PAYMENT_SCXML = """\
<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="payment" datamodel="ecmascript"
       initial="charging">
  <datamodel><data id="amount" expr="0"/></datamodel>
  <state id="charging">
    <transition event="approve" target="charged">
      <send target="#_parent" event="paid"><param name="receipt" expr="amount"/></send>
    </transition>
  </state>
  <final id="charged"/>
</scxml>
"""
