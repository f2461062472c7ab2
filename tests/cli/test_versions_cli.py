"""``durastate versions list``, ``durastate migrate`` and ``durastate validate --against`` as a user runs them,
on SQLite, PostgreSQL and DynamoDB (moto): an execution survives a definition edit and finishes on its old
version; ``migrate --dry-run`` lists what would change and changes nothing; ``migrate`` moves executions;
``validate --against`` fails a deploy that would strand running executions."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from durastate.cli.backends import open_cli_store
from durastate.engine import load_definition
from durastate.engine.versions import definition_version

from ._support import Env, Outcome, assert_one_line_error, moto_dynamodb_url, postgres_schema_url

Cli = Callable[..., Outcome]

SHIPPING = """\
id: shipping
initial: packing
states:
  packing:
    on: {packed: waiting}
  waiting:
    after: {seconds: 3600, target: late}
    on: {picked_up: delivered}
  late: {type: final, outcome: late}
  delivered: {type: final, outcome: delivered}
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow),
                        pytest.param("dynamodb", marks=pytest.mark.slow)])
def store_url(request: pytest.FixtureRequest, env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "sqlite":
        yield env.store_url
    elif request.param == "postgres":
        with postgres_schema_url("cli") as url:
            yield url
    else:
        yield moto_dynamodb_url(monkeypatch, "ver")


@pytest.fixture
def ds(cli: Cli, store_url: str) -> Callable[..., Outcome]:
    """``durastate --store URL ARGS…`` that must succeed."""

    def ok(*args: str) -> Outcome:
        out = cli("--store", store_url, *args)
        assert out.code == 0, (args, out.stdout, out.stderr)
        return out

    return ok


def deploy(env: Env, text: str) -> str:
    """Write the definition file (a deploy); returns its version."""
    path = env.definitions / "shipping.yaml"
    path.write_text(text)
    return definition_version(load_definition(path))


def show(ds: Callable[..., Outcome], execution_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ds("show", execution_id, "--json").stdout)
    return data


def test_an_execution_finishes_on_its_version_and_migrate_moves_the_others(
        cli: Cli, ds: Callable[..., Outcome], env: Env, store_url: str) -> None:
    v1 = deploy(env, SHIPPING)
    for eid in ("s-1", "s-2"):
        ds("start", "shipping", "--id", eid)
        ds("send", eid, "packed")
    ds("serve", "--until-idle")
    assert show(ds, "s-1")["definition_version"] == v1

    v2 = deploy(env, SHIPPING.replace("waiting", "ready"))  # the edit: `waiting` is now `ready`
    gate = ds("validate", "--against", store_url)
    assert "s-1  shipping: keeps running on version " + v1 in gate.stdout
    ds("send", "s-1", "picked_up")
    ds("serve", "--until-idle")
    s1 = show(ds, "s-1")
    assert (s1["status"], s1["outcome"], s1["definition_version"]) == ("finished", "delivered", v1)

    refused = cli("--store", store_url, "migrate", "--definition", "shipping", "--from", v1, "--dry-run")
    assert "s-2  running in waiting: would be stranded (no waiting in " + v2 + ")" in refused.stdout
    assert_one_line_error(refused, "nothing was migrated", "--map waiting=<new path>")

    dry = ds("migrate", "--definition", "shipping", "--from", v1, "--map", "waiting=ready", "--dry-run")
    assert "s-2  running in waiting" in dry.stdout and "active: waiting -> ready" in dry.stdout
    assert "timer waiting: waiting -> ready" in dry.stdout and "nothing changed" in dry.stdout
    assert show(ds, "s-2")["active_path"] == "waiting"

    done = ds("migrate", "--definition", "shipping", "--from", v1, "--map", "waiting=ready")
    assert f"migrated 1 execution(s) of shipping from {v1} to {v2}" in done.stdout
    s2 = show(ds, "s-2")
    assert (s2["active_path"], s2["definition_version"], list(s2["timers"])) == ("ready", v2, ["ready"])
    assert json.loads(ds("trace", "s-2", "--json").stdout)[-1]["migrated"] == {
        "from": v1, "to": v2, "map": {"waiting": "ready"}}

    versions = {r["version"]: r for r in json.loads(ds("versions", "list", "shipping", "--json").stdout)}
    assert (versions[v1]["running"], versions[v1]["newest"]) == (0, False)
    assert (versions[v2]["running"], versions[v2]["newest"]) == (1, True)
    assert "newest (definitions folder)" in ds("versions", "list", "shipping").stdout

    ds("serve", "--until-idle", "--advance", "2h")  # its moved timer fires under the new name
    s2 = show(ds, "s-2")
    assert (s2["status"], s2["outcome"]) == ("finished", "late")


def test_validate_against_fails_a_deploy_that_would_strand_running_executions(
        cli: Cli, ds: Callable[..., Outcome], env: Env, store_url: str) -> None:
    deploy(env, SHIPPING)
    for eid in ("s-1", "s-2"):
        ds("start", "shipping", "--id", eid)
        ds("send", eid, "packed")
    ds("serve", "--until-idle")
    store = open_cli_store(store_url, 1, create=False)
    try:  # s-2 started before versions were recorded: it runs on whatever the folder holds
        exe = store.load("s-2")
        assert exe is not None
        exe.definition_version = None
        store.save(exe)
    finally:
        store.close()

    v2 = deploy(env, SHIPPING.replace("waiting", "ready"))
    gate = cli("validate", "--against", store_url, str(env.definitions))
    assert "s-2  shipping unversioned -> " + v2 + ": would be stranded: in waiting" in gate.stdout
    assert "s-1  shipping: keeps running on version" in gate.stdout  # pinned, archived: informational
    assert_one_line_error(gate, "1 running execution(s) would be stranded",
                          f"durastate migrate --definition shipping --from unversioned --to {v2} --map waiting=")
    strict = cli("validate", "--against", store_url, "--strict")
    assert_one_line_error(strict, "1 running execution(s) would be stranded by this deploy and 1 pinned to an "
                          "older version could not move to this one without a --map (--strict)")

    ds("migrate", "--definition", "shipping", "--from", "unversioned", "--map", "waiting=ready")
    assert show(ds, "s-2")["active_path"] == "ready"
    assert "no running execution stranded" in ds("validate", "--against", store_url).stdout


def test_migrate_refuses_what_it_cannot_do(cli: Cli, env: Env) -> None:
    v1 = deploy(env, SHIPPING)
    assert cli("start", "shipping", "--id", "s-1").code == 0
    assert cli("serve", "--until-idle").code == 0
    assert_one_line_error(cli("migrate", "--definition", "shipping", "--from", v1),
                          "--from and --to are both")
    assert_one_line_error(cli("migrate", "--definition", "shipping", "--from", v1, "--to", "0" * 16),
                          "is neither the definitions folder's nor archived")
    deploy(env, SHIPPING.replace("waiting", "ready"))
    assert_one_line_error(cli("migrate", "--definition", "shipping", "--from", v1, "--map", "wating=ready"),
                          "'wating' is not a state of the old version")
    assert_one_line_error(cli("migrate", "--definition", "shipping", "--from", v1, "--map", "waiting"),
                          "is not old.path=new.path")
    assert_one_line_error(cli("versions", "list", "nothing"), "no versions of 'nothing'")
    # A --from version that is neither archived nor run by any execution: a typo, not "0 migrated"
    assert_one_line_error(cli("migrate", "--definition", "shipping", "--from", "f" * 16),
                          f"no execution of 'shipping' runs on version {'f' * 16} and the store has not archived it")
    assert show(cli, "s-1")["definition_version"] == v1  # nothing changed


def test_migrate_selects_by_id_and_status_and_refuses_a_bad_selection(
        cli: Cli, ds: Callable[..., Outcome], env: Env, store_url: str) -> None:
    v1 = deploy(env, SHIPPING)
    for eid in ("s-1", "s-2", "s-3"):
        ds("start", "shipping", "--id", eid)
        ds("send", eid, "packed")
    ds("serve", "--until-idle")
    ds("suspend", "s-3")
    ds("serve", "--until-idle")
    v2 = deploy(env, SHIPPING.replace("waiting", "ready"))
    base = ("--store", store_url, "migrate", "--definition", "shipping", "--from", v1, "--map", "waiting=ready")
    for args, fragment in [
        (("--id", "nope"), "no execution 'nope'; `durastate list` shows the executions"),
        (("--id", "s-3", "--status", "running"), "s-3 is suspended, not running; nothing was migrated"),
        (("--status", "failed"), "a failed execution cannot be migrated"),
        (("--status", "done"), "--status done: only running or suspended"),
    ]:
        assert_one_line_error(cli(*base, *args), fragment)
    assert {show(ds, e)["definition_version"] for e in ("s-1", "s-2", "s-3")} == {v1}  # nothing changed
    one = ds(*base[2:], "--id", "s-1")
    assert f"migrated 1 execution(s) of shipping from {v1} to {v2}" in one.stdout
    assert "s-2" not in one.stdout
    suspended = ds(*base[2:], "--status", "suspended")
    assert "s-3  suspended in waiting" in suspended.stdout and "migrated 1 execution(s)" in suspended.stdout
    assert [show(ds, e)["definition_version"] for e in ("s-1", "s-2", "s-3")] == [v2, v1, v2]
