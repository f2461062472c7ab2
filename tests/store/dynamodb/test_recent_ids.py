"""The packing of an event id in an execution item's ``rids``: lossless for every text, smaller for uuids."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from durastate.store.dynamodb import recent_ids
from durastate.store.dynamodb.limits import value_size

ids = st.one_of(
    st.text(min_size=1, max_size=64),
    st.uuids().map(str),
    st.uuids().map(lambda u: u.hex),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: u.hex.upper()),
    st.uuids().map(lambda u: "{" + str(u) + "}"),
    st.uuids().map(lambda u: "urn:uuid:" + str(u)),
)


@given(ids)
def test_unpack_gives_back_the_very_id(event_id: str) -> None:
    assert recent_ids.unpack(recent_ids.pack(event_id)) == event_id


@given(ids, ids)
def test_distinct_ids_stay_distinct(a: str, b: str) -> None:
    if a != b:
        assert recent_ids.pack(a) != recent_ids.pack(b)


def test_a_canonical_uuid_costs_16_or_17_bytes_instead_of_32_or_36() -> None:
    u = uuid.uuid4()
    assert value_size(recent_ids.pack(str(u))) == 16
    assert value_size(recent_ids.pack(u.hex)) == 17
    assert recent_ids.pack("order-42") == {"S": "order-42"}
