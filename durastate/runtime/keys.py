"""Per-execution secrets, as the runtime's worker and relay use them.

They are drawn where a store's record is written (:mod:`durastate.store.keys`), so a store-level
operation that starts an execution (a schedule's backfill through the client) gives the same secret the
runtime would; this module keeps the runtime's name for them.
"""

from __future__ import annotations

from durastate.store.keys import SECRET_BYTES, give_secret, new_secret

__all__ = ["SECRET_BYTES", "give_secret", "new_secret"]
