"""How an event id is kept in an execution item's ``rids`` list: a uuid as its 16 bytes, anything else as text.

Why a module of its own: ``rids`` (the recently applied event ids, the dedupe marks kept inside the item)
is part of the stored format, read by every process. Why packed: an id in ``rids`` is only free while the
item stays inside the kilobyte it needs anyway; once ``rids`` no longer fits, its ids spill to a chunk item
of ``processed`` (a write unit of its own). A uuid written as text costs 37 bytes of the item (36 and the
list entry), as its 16 bytes 17: twice as many ids fit in the same kilobyte, so a small execution spills
half as often. The packing is lossless — only an id that is exactly the canonical text of a uuid (lower
case, hyphenated: ``str(uuid.UUID(x)) == x``, or its 32-digit ``hex``) is packed, and unpacking gives that
text back — so the dedupe check stays exact. Spilled ids keep their text in the chunk items.
"""

from __future__ import annotations

import uuid
from typing import Any

_HEX_TAG = b"h"
"""First byte of a packed 32-digit hex id (17 bytes); a packed hyphenated uuid is 16 bytes, untagged."""


def pack(event_id: str) -> dict[str, Any]:
    """The ``rids`` entry of ``event_id``: ``{"B": 16 or 17 bytes}`` for a canonical uuid, else ``{"S": id}``."""
    if len(event_id) in (32, 36):
        try:
            parsed = uuid.UUID(event_id)
        except ValueError:
            return {"S": event_id}
        if str(parsed) == event_id:
            return {"B": parsed.bytes}
        if parsed.hex == event_id:
            return {"B": _HEX_TAG + parsed.bytes}
    return {"S": event_id}


def unpack(entry: dict[str, Any]) -> str:
    """The event id an entry of ``rids`` holds (an item written before packing holds text only)."""
    if "S" in entry:
        return str(entry["S"])
    raw = bytes(entry["B"])
    if len(raw) == 17 and raw[:1] == _HEX_TAG:
        return uuid.UUID(bytes=raw[1:]).hex
    return str(uuid.UUID(bytes=raw))
