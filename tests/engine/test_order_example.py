"""The example order workflow (examples/order.yaml + payment.yaml) driven end to end through the engine."""

from __future__ import annotations

from pathlib import Path

from durastate.engine import DefinitionRegistry

from .harness import Harness

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def harness() -> Harness:
    reg = DefinitionRegistry.from_dir(EXAMPLES)
    return Harness(reg.get("order"), reg.get("payment"))


def fill_cart(h: Harness, oid: str = "o1") -> None:
    h.start("order", oid)
    h.send(oid, "submit")  # guard: an empty cart cannot be submitted
    assert h[oid].active_path == "cart"
    h.send(oid, "add_item", {"price": 30})
    h.send(oid, "add_item", {"price": 12})
    h.send(oid, "submit")


def test_happy_path_pays_then_packs_and_ships_in_parallel() -> None:
    h = harness()
    fill_cart(h)
    order = h["o1"]
    assert order.context["total"] == 42 and order.active_path == "processing.payment"
    assert h["o1~1"].context == {"amount": 42} and h["o1~1"].timers == {"pending": 1900.0}
    h.send("o1~1", "authorize", {"receipt": "rcpt-7"})
    assert order.active_path == "processing.fulfilment" and order.context["receipt"] == "rcpt-7"
    assert {c.path for c in order.children.values() if c.status == "running"} == {
        "processing.fulfilment.packing",
        "processing.fulfilment.shipping",
    }
    h.send("o1", "label_printed", {"tracking": "TRK1"})
    assert order.context["tracking"] == "TRK1"
    h.send("o1", "picked")
    assert (order.status, order.outcome) == ("finished", "fulfilled")
    assert [n.name for n in h.notifications] == ["durastate.finished"]
    assert h.timers == {}


def test_declined_payment_ends_the_order() -> None:
    h = harness()
    fill_cart(h)
    h.send("o1~1", "decline", {"reason": "insufficient funds"})
    assert h["o1"].outcome == "payment_failed"


def test_hold_and_resume_restore_the_deep_history() -> None:
    h = harness()
    fill_cart(h)
    h.send("o1~1", "authorize", {"receipt": "r"})
    h.send("o1", "picked")  # packing done, shipping still running
    h.send("o1", "hold")
    order = h["o1"]
    assert order.active_path == "on_hold" and order.history == {"processing": "processing.fulfilment"}
    assert all(h[c].status in ("finished", "cancelled") for c in ("o1~2", "o1~3"))
    h.send("o1", "resume")
    assert order.active_path == "processing.fulfilment"
    assert {c.status for c in order.children.values()} == {"running"}  # regions start over
    h.send("o1", "picked")
    h.send("o1", "label_printed", {"tracking": "T"})
    assert order.outcome == "fulfilled"


def test_timeouts_expire_the_payment_and_cancel_an_order_on_hold() -> None:
    h = harness()
    fill_cart(h)
    h.advance(900)
    assert h["o1~1"].outcome == "expired" and h["o1"].outcome == "payment_failed"
    h2 = harness()
    fill_cart(h2)
    h2.send("o1", "hold")
    assert h2["o1~1"].status == "cancelled"
    h2.advance(86400)
    assert h2["o1"].outcome == "cancelled"
    assert h2.logs("o1") == ["order submitted", "order on hold"]


def test_an_abandoned_cart_times_out() -> None:
    h = harness()
    h.start("order", "o1")
    h.advance(3600)
    assert h["o1"].outcome == "abandoned"
