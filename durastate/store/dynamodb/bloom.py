"""The Bloom filter of spilled event ids that an execution item carries (its ``spill`` attribute).

Why a module of its own: it lets the dedupe check rule out a redelivered event from the execution item
alone (one read) instead of also reading its ``processed`` mark; its size and hash count are part of
the stored format (every process must hash an id to the same bits), and its arithmetic is independent of
DynamoDB. How the store keeps it exact enough: see :mod:`durastate.store.dynamodb.layout`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

BLOOM_BITS = 1024
"""Bits of the execution item's filter of spilled event ids (``spill``, 128 bytes once anything spilled)."""
BLOOM_HASHES = 3
"""Bit positions per id. With 1,024 bits the false-positive rate after n spilled ids is about
``(1 - e^(-3n/1024))^3``: 0.07 % at 32, 0.5 % at 64, 1.6 % at 100, 8.7 % at 200, 33 % at 400, 85 % at
1,000 — a false positive only costs the second read."""


def positions(event_id: str) -> list[int]:
    """The filter's bit positions of ``event_id`` (double hashing of one BLAKE2b digest)."""
    digest = hashlib.blake2b(event_id.encode("utf-8"), digest_size=16).digest()
    h1, h2 = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1
    return [(h1 + i * h2) % BLOOM_BITS for i in range(BLOOM_HASHES)]


def bloom_add(bloom: bytes, event_ids: Iterable[str]) -> bytes:
    """``bloom`` with ``event_ids`` added (``b""`` is the empty filter; a non-empty one is 128 bytes)."""
    ids = list(event_ids)
    if not ids:
        return bloom
    bits = bytearray(bloom or bytes(BLOOM_BITS // 8))
    for event_id in ids:
        for pos in positions(event_id):
            bits[pos >> 3] |= 1 << (pos & 7)
    return bytes(bits)


def bloom_may_contain(bloom: bytes, event_id: str) -> bool:
    """False proves ``event_id`` was never added; True means it may have been."""
    if not bloom:
        return False
    return all(bloom[pos >> 3] & (1 << (pos & 7)) for pos in positions(event_id))


def bloom_false_positive_rate(bloom: bytes) -> float:
    """The chance that an id never added still tests positive, from the filter's fill."""
    if not bloom:
        return 0.0
    ones = sum(bin(b).count("1") for b in bloom)
    return float((ones / BLOOM_BITS) ** BLOOM_HASHES)
