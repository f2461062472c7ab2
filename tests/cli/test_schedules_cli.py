"""``durastate schedules …``, ``serve`` storing the folder's schedules, and ``validate`` of schedules files."""

from __future__ import annotations

import json
from collections.abc import Callable

from durastate.store import SqliteStore

from ._support import Env, Outcome, assert_one_line_error

Cli = Callable[..., Outcome]
PULSE = "schedules:\n  pulse: {definition: counter, rate: 15m, context: {count: 100}}\n"


def executions(env: Env, definition_id: str = "counter") -> list[str]:
    store = SqliteStore(env.db)
    try:
        return sorted(s.id for s in store.list_executions(definition_id=definition_id, limit=1000).items)
    finally:
        store.close()


def test_serve_stores_the_folders_schedules_and_starts_their_ticks(env: Env, cli: Cli) -> None:
    (env.definitions / "schedules.yaml").write_text(PULSE)
    served = cli("serve", "--until-idle", "--quiet")
    assert served.code == 0 and "schedules: added pulse" in served.stderr
    listed = cli("schedules", "list")
    assert listed.code == 0
    assert "pulse" in listed.stdout and "every 15m" in listed.stdout and "active" in listed.stdout
    assert "UTC (in " in listed.stdout
    assert executions(env) == []
    assert cli("serve", "--until-idle", "--quiet", "--advance", "16m").code == 0
    (started,) = executions(env)
    assert started.startswith("pulse~") and started.endswith("Z")
    assert cli("serve", "--until-idle", "--quiet").code == 0  # the same tick, served again: once
    assert executions(env) == [started]
    (row,) = json.loads(cli("schedules", "list", "--json").stdout)
    assert row["name"] == "pulse" and row["last_execution_id"] == started and row["paused"] is False
    assert row["spec"] == {"definition": "counter", "rate": "15m", "context": {"count": 100}}


def test_pause_resume_trigger_and_unknown_names(env: Env, cli: Cli) -> None:
    (env.definitions / "schedules.yaml").write_text(PULSE)
    cli("serve", "--until-idle", "--quiet")
    paused = cli("schedules", "pause", "pulse")
    assert paused.code == 0 and "paused pulse" in paused.stdout
    assert "paused" in cli("schedules", "list").stdout
    cli("serve", "--until-idle", "--quiet", "--advance", "1h")
    assert executions(env) == []
    triggered = cli("schedules", "trigger", "pulse")
    assert triggered.code == 0 and "started pulse~manual-" in triggered.stdout
    cli("serve", "--until-idle", "--quiet")
    (manual,) = executions(env)
    assert manual.startswith("pulse~manual-")
    resumed = cli("schedules", "resume", "pulse")
    assert resumed.code == 0 and "resumed pulse: next " in resumed.stdout
    assert_one_line_error(cli("schedules", "pause", "nope"), "unknown schedule 'nope' (known: pulse)")
    assert_one_line_error(cli("schedules", "trigger", "nope"), "unknown schedule 'nope'")


def test_a_schedule_removed_from_the_folder_is_kept_as_removed(env: Env, cli: Cli) -> None:
    path = env.definitions / "schedules.yaml"
    path.write_text(PULSE)
    cli("serve", "--until-idle", "--quiet")
    path.unlink()
    assert "schedules: removed pulse" in cli("serve", "--until-idle", "--quiet").stderr
    assert "no schedules stored" in cli("schedules", "list").stderr
    assert "removed" in cli("schedules", "list", "--all").stdout
    assert_one_line_error(cli("schedules", "trigger", "pulse"), "unknown schedule 'pulse'")


def test_validate_checks_schedules_files_with_their_definitions(env: Env, cli: Cli) -> None:
    (env.definitions / "schedules.yaml").write_text(PULSE)
    ok = cli("validate")
    assert ok.code == 0 and "schedules.yaml  1 schedule (pulse)" in ok.stdout
    (env.definitions / "schedules.yaml").write_text(
        "schedules:\n  pulse: {definition: nope, cron: '0 25 * * *', timezone: Nowhere/Land}\n")
    bad = cli("validate")
    assert bad.code == 1
    assert "schedules.pulse.cron: cron hour field: 25 is out of range 0-23" in bad.stdout
    assert "schedules.pulse.timezone: unknown time zone 'Nowhere/Land'" in bad.stdout
    rows = json.loads(cli("validate", "--json").stdout)
    (row,) = [r for r in rows if r["file"].endswith("schedules.yaml")]
    assert row["valid"] is False and len(row["issues"]) == 2
    served = cli("serve", "--until-idle", "--quiet")
    assert_one_line_error(served, "invalid schedules", "schedules.pulse.cron")


def test_send_refuses_what_only_durastate_sends(env: Env, cli: Cli) -> None:
    """``durastate send`` to a schedule's record, or with an id in durastate's namespace, is refused with
    the reason, and the schedule keeps ticking."""
    (env.definitions / "schedules.yaml").write_text(PULSE)
    cli("serve", "--until-idle", "--quiet")
    assert_one_line_error(cli("send", "~schedule~pulse", "durastate.cancel"), "system record")
    cli("start", "counter", "--id", "c-1")
    assert_one_line_error(cli("send", "c-1", "inc", "--id", "~redrive:x:1"), "namespace")
    assert_one_line_error(cli("start", "order", "--id", "pulse~20991231T000000Z"), "reserves")
    assert cli("serve", "--until-idle", "--quiet", "--advance", "16m").code == 0
    assert [e for e in executions(env) if e.startswith("pulse~")] and "active" in cli("schedules", "list").stdout


def test_backfill_starts_the_missed_ticks_once_and_delete_stops_the_schedule(env: Env, cli: Cli) -> None:
    (env.definitions / "schedules.yaml").write_text(PULSE)
    cli("serve", "--until-idle", "--quiet")
    filled = cli("schedules", "backfill", "pulse", "--from", "2026-01-05T09:30", "--to", "2026-01-05T10:00")
    assert filled.code == 0, filled.stderr
    assert "backfilled pulse: started 3 tick(s)" in filled.stdout
    ticks = ["pulse~20260105T093000Z", "pulse~20260105T094500Z", "pulse~20260105T100000Z"]
    assert all(t in filled.stdout for t in ticks)
    cli("serve", "--until-idle", "--quiet")
    assert executions(env) == ticks
    again = cli("schedules", "backfill", "pulse", "--from", "2026-01-05T09:00+00:00", "--to", "2026-01-05T10:00")
    assert again.code == 0 and "started 2 tick(s); 3 already ran" in again.stdout  # 09:00 and 09:15 only
    cli("serve", "--until-idle", "--quiet")
    assert len(executions(env)) == 5
    deleted = cli("schedules", "delete", "pulse")
    assert deleted.code == 0 and "deleted pulse: its timer is cancelled" in deleted.stdout
    assert "still in the definitions folder" in deleted.stdout
    assert "deleted" in cli("schedules", "list", "--all").stdout
    (env.definitions / "schedules.yaml").write_text("schedules: {}\n")
    assert cli("serve", "--until-idle", "--quiet", "--advance", "1h").code == 0
    assert len(executions(env)) == 5  # no tick fired after the delete


def test_bad_backfill_and_delete_input_is_one_line_and_changes_nothing(env: Env, cli: Cli) -> None:
    (env.definitions / "schedules.yaml").write_text(PULSE)
    cli("serve", "--until-idle", "--quiet")
    before = cli("schedules", "list", "--json").stdout
    window = ("--from", "2026-01-05T09:00", "--to", "2026-01-05T10:00")
    assert_one_line_error(cli("schedules", "backfill", "nope", *window), "unknown schedule 'nope' (known: pulse)")
    assert_one_line_error(cli("schedules", "backfill", "pulse", "--from", "2026-01-05T10:00", "--to",
                              "2026-01-05T09:00"), "is after --to")
    assert_one_line_error(cli("schedules", "backfill", "pulse", "--from", "2026-01-05T09:00", "--to",
                              "2026-01-06T09:00"), "is in the future")
    assert_one_line_error(cli("schedules", "backfill", "pulse", "--from", "yesterday", "--to",
                              "2026-01-05T09:00"), "--from 'yesterday' is not an ISO 8601 time")
    assert_one_line_error(cli("schedules", "delete", "nope"), "unknown schedule 'nope' (known: pulse)")
    assert cli("schedules", "list", "--json").stdout == before and executions(env) == []
