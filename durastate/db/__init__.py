"""Connection plumbing a store shares with its queue: the SQLite database and the PostgreSQL link.

Kept apart from ``durastate.store`` so that a transport (the SQLite inbox, the PostgreSQL queue) can use
the same connection as its store without importing the store.
"""
