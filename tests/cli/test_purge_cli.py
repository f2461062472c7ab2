"""Retention through the ``durastate`` command on SQLite: ``purge`` (dry run, filters, limit), ``show`` of a
purged execution, a late event for it, and ``serve --retention``."""

from __future__ import annotations

from collections.abc import Callable

from durastate.store.sqlite.sync import SqliteStore

from ._support import Env, Outcome

Cli = Callable[..., Outcome]


def finished(cli: Cli, *ids: str) -> None:
    for eid in ids:
        assert cli("start", "counter", "--id", eid, "-q").code == 0
        assert cli("send", eid, "finish", "-q").code == 0


def test_purge_dry_run_then_purge(cli: Cli, env: Env) -> None:
    finished(cli, "c1", "c2")
    assert cli("start", "counter", "--id", "busy", "-q").code == 0
    assert cli("serve", "--until-idle", "-q").code == 0

    dry = cli("purge", "--older-than", "0s", "--dry-run")
    assert dry.code == 0 and "would purge 2 execution(s)" in dry.stdout and "c1" in dry.stdout
    assert "finished (counted)" in cli("show", "c1").stdout  # nothing changed

    done = cli("purge", "--older-than", "0s")
    assert done.code == 0 and "purged 2 execution(s)" in done.stdout and "tombstone" in done.stdout
    shown = cli("show", "c1").stdout
    assert "purged (counted)" in shown and "expires" in shown
    assert "running" in cli("show", "busy").stdout
    again = cli("purge", "--older-than", "0s")
    assert "purged 0 execution(s)" in again.stdout


def test_a_late_event_for_a_purged_execution_is_ignored(cli: Cli, env: Env) -> None:
    finished(cli, "c1")
    cli("serve", "--until-idle", "-q")
    cli("purge", "--older-than", "0s")
    assert cli("send", "c1", "inc", "--force", "-q").code == 0
    served = cli("serve", "--until-idle", "-q")
    assert "0 applied, 1 ignored" in served.stderr + served.stdout
    with SqliteStore(env.db, read_only=True) as store:
        tomb = store.load("c1")
        assert tomb is not None and tomb.status == "purged" and tomb.context == {}


def test_filters_limit_and_bad_input(cli: Cli, env: Env) -> None:
    finished(cli, "c1", "c2", "c3")
    cli("serve", "--until-idle", "-q")
    assert "purged 0 execution(s)" in cli("purge", "--older-than", "0s", "--status", "cancelled").stdout
    assert "purged 0 execution(s)" in cli("purge", "--older-than", "0s", "--definition", "order").stdout
    assert "purged 0 execution(s)" in cli("purge", "--older-than", "30d").stdout
    limited = cli("purge", "--older-than", "0s", "--limit", "2")
    assert "purged 2 execution(s)" in limited.stdout and "more executions qualify" in limited.stderr
    bad = cli("purge", "--older-than", "0s", "--status", "running")
    assert bad.code != 0 and "only ended executions are purged" in bad.stderr
    assert cli("purge", "--older-than", "soon").code == 2


def test_serve_with_retention_purges_between_rounds(cli: Cli, env: Env) -> None:
    finished(cli, "c1", "c2")
    served = cli("serve", "--until-idle", "-q", "--retention", "0s")
    assert "2 purged" in served.stderr + served.stdout
    assert "purged (counted)" in cli("show", "c2").stdout
