"""Property-based tests (hypothesis) over the wire, the worker and every registered store."""
