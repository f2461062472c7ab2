# ruff: noqa: RUF001  (the en dashes and multiplication signs are the report's typography)
"""Turns the sections' results into ``bench/results/README.md`` (tables, targets) and PNG plots."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._util import Series, fmt_rate, fmt_series, table
from bench.queue_path import report_md as queue_md
from bench.stores import (
    DURASTATE_BEFORE,
    DURASTATE_KEEP,
    DURASTATE_NOTRACE,
    DURASTATE_SERVE,
    PG_DURASTATE_BEFORE,
    PG_DURASTATE_KEEP,
    PG_DURASTATE_ROWS,
)


def jsonable(x: Any) -> Any:
    if isinstance(x, Series):
        return {"median": x.median, "min": x.lo, "max": x.hi, "rates": x.rates}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return jsonable(dataclasses.asdict(x))
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items() if k != "traceback"}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    return x


_SERIES_KEYS = {"median", "min", "max", "rates"}


def from_jsonable(x: Any, name: str = "") -> Any:
    """The inverse of :func:`jsonable` as far as the report needs: every series back to a :class:`Series`
    and integer keys back to integers (tuples stay lists, which the report indexes alike), so a fresh
    clone, which has ``results.json`` but not the pickle, can re-run one section and keep the others."""
    if isinstance(x, dict):
        if set(x) == _SERIES_KEYS and isinstance(x["rates"], list):
            return Series(name, [float(r) for r in x["rates"]])
        return {(int(k) if k.isdigit() else k): from_jsonable(v, k) for k, v in x.items()}  # ints were keys
    if isinstance(x, list):
        return [from_jsonable(v) for v in x]
    return x


def _ok(flag: bool | None) -> str:
    return "n/a" if flag is None else ("**met**" if flag else "**not met**")


def _ratio(r: tuple[float, float, float]) -> str:
    return f"{r[0]:.2f}× ({r[1]:.2f}–{r[2]:.2f})"


def _pct(r: tuple[float, float, float]) -> str:
    return f"{r[0] * 100:.0f} % ({r[1] * 100:.0f}–{r[2] * 100:.0f})"


def _failed(name: str, res: dict[str, Any] | None) -> str | None:
    if res is None:
        return f"_{name}: not run._"
    if "skipped" in res:
        return f"_{name}: skipped — {res['skipped']}._"
    if "error" in res:
        return f"_{name}: failed — `{res['error']}`._"
    return None


# -- sections ---------------------------------------------------------------------------------------------
def engine_md(res: dict[str, Any] | None, targets: list[list[str]]) -> str:
    bad = _failed("engine", res)
    if bad:
        targets.append(["Engine: durastate ≥ 5× the fastest peer (chart 1)", "n/a", bad])
        return bad
    assert res is not None
    out = []
    from bench.peers import PEER_NOTES

    titles = {"chart1": "Chart 1 — idle → active{a ⇄ b} → idle (events: go, toggle×3, stop)",
              "chart2": "Chart 2 — deep history + a parallel state that joins (events: go, toggle, pause, "
                        "resume, toggle, split, l, r)"}
    for chart in ("chart1", "chart2"):
        c = res[chart]
        s: dict[str, Series] = c["series"]
        head = c["durastate"]
        rows = []
        for name, ser in s.items():
            if name in c["peers"]:
                r = c["ratios"][name]
                note = PEER_NOTES.get((chart, name), "")
                rows.append([name, fmt_series(ser), _ratio(r), note])
            else:
                rows.append([f"**{name}**" if name == head else name, fmt_series(ser), "—", ""])
        out.append(f"#### {titles[chart]}\n\n{c['events']} events per run, {c['repeats']} interleaved "
                   f"repeats.\n\n" + table(["engine", "events/s median (min–max)",
                                            "durastate ÷ peer, per-repeat median (min–max)", "note"], rows))
        fastest = c["fastest_peer"]
        ratio = c["ratios"][fastest]
        targets.append([f"Engine {chart}: durastate ≥ 5× the fastest peer ({fastest})", _ok(ratio[0] >= 5),
                        _ratio(ratio)])
        if "inline_ratios" in c:
            inline = c["inline_ratios"][fastest]
            targets.append([f"Engine {chart}, `regions: inline`: durastate ≥ 5× the fastest peer ({fastest})",
                            _ok(inline[0] >= 5), _ratio(inline)])
    return "\n\n".join(out)


WAL_NAMES = {"durastate-keep": "durastate keep_committed", "raw-autocommit": "raw autocommit",
             "durastate": "durastate (default)", "durastate-exclusive": "durastate exclusive",
             "durastate-before": "durastate before", "durastate-default, trace off": "durastate default, trace off"}
"""The PostgreSQL runs' kinds as the WAL line names them."""
KEEP_LABEL = " — with keep_committed (`serve --exclusive`)"
SERVE_LABEL = " — `durastate serve` (a round per transaction)"


def sqlite_md(res: dict[str, Any] | None, targets: list[list[str]]) -> str:
    bad = _failed("SQLite", res)
    if bad:
        targets.append(["SQLite ≥ 20k events/s (NORMAL), ≥ 80 % of raw (FULL)", "n/a", bad])
        return bad
    assert res is not None
    rows = []
    for sync in ("NORMAL", "FULL"):
        c = res[sync]
        s = c["series"]
        keep, serve = s.get(DURASTATE_KEEP), s.get(DURASTATE_SERVE)
        rows.append([sync, fmt_series(s["durastate SqliteStore"]), _pct(c["ratio"]),
                     fmt_series(keep) if keep else "—", _pct(c["ratio_keep"]) if keep else "—",
                     fmt_series(serve) if serve else "—", _pct(c["ratio_serve"]) if serve else "—",
                     fmt_series(s["raw UPDATE loop"]), f"{c['events']} × {c['repeats']}"])
    pages = res["NORMAL"].get("wal_pages_per_event") or {}
    raw_normal = fmt_rate(res["NORMAL"]["series"]["raw UPDATE loop"].median)
    for label, key, ratio in (("", "durastate SqliteStore", "ratio"), (KEEP_LABEL, DURASTATE_KEEP, "ratio_keep"),
                              (SERVE_LABEL, DURASTATE_SERVE, "ratio_serve")):
        if key not in res["NORMAL"]["series"]:
            continue
        normal = res["NORMAL"]["series"][key].median
        targets.append([f"SQLite NORMAL: ≥ 20k events/s{label}", _ok(normal >= 20_000),
                        f"{fmt_rate(normal)} events/s (raw loop on the same file settings: {raw_normal})"])
        full = res["FULL"][ratio]
        targets.append([f"SQLite FULL: ≥ 80 % of raw{label}", _ok(full[0] >= 0.8), _pct(full)])
    _row_layout_targets_sqlite(res, targets)
    return (f"WAL journal, one file per contender in a temp folder; payload {res['payload_bytes']} bytes "
            "(durastate's stored execution JSON for chart 1). *keep_committed*: the worker commits each next "
            "event on the execution it kept from its last commit instead of reading it back (the commit "
            "itself checks the CAS and the event's dedupe mark; `durastate serve --exclusive`). *durastate serve*: "
            "the events queued in the durable inbox, then `LocalRuntime` rounds as `durastate serve` runs them "
            "— each round's claims, commits and acks (up to 32 events) in one transaction, so one fsync "
            "per round on FULL; the queuing is not timed.\n\n"
            + table(["synchronous", "durastate worker events/s", "÷ raw", "worker, keep_committed events/s",
                     "÷ raw", "durastate serve events/s", "÷ raw", "raw UPDATE loop events/s",
                     "events × repeats"], rows)
            + ("\n\nPages each event appends to the WAL (4 KB each): "
               + ", ".join(f"{k} **{v:.2f}**" for k, v in pages.items()) + "." if pages else "")
            + _before_after(res["NORMAL"], DURASTATE_BEFORE, "NORMAL")
            + "".join(f"\n\nSame run, {sync}, the default worker with the trace off (`durastate serve --no-trace`: "
                      f"a trace step only for a step that fails): {fmt_series(res[sync]['series'][DURASTATE_NOTRACE])} "
                      f"events/s = {_pct(res[sync]['ratio_notrace'])} of raw."
                      for sync in ("NORMAL", "FULL") if DURASTATE_NOTRACE in res[sync]["series"])
            + _breakdown(res.get("wal_breakdown"), "WAL pages per event by table (SQLite `dbstat`)", "{:.2f}"))


def postgres_md(res: dict[str, Any] | None, targets: list[list[str]]) -> str:
    bad = _failed("PostgreSQL", res)
    if bad:
        targets.append(["PostgreSQL ≥ 85 % of raw (1 conn), ≥ 80 % (8 conns)", "n/a", bad])
        return bad
    assert res is not None
    rows = []
    many = res.get("many", 8)
    for conns in (1, many):
        c = res[conns]
        s = c["series"]
        keep = s.get(PG_DURASTATE_KEEP)
        rows.append([conns, fmt_series(s["durastate PostgresStore"]), _pct(c["ratio"]),
                     fmt_series(keep) if keep else "—", _pct(c["ratio_keep"]) if keep else "—",
                     fmt_series(s["raw UPDATE+commit"]),
                     fmt_series(s["raw UPDATE, autocommit"]), _pct(c["ratio_autocommit"]),
                     f"{c['events_per_conn']} × {c['repeats']}"])
    for label, ratio in (("", "ratio"), (KEEP_LABEL, "ratio_keep")):
        if ratio not in res[1]:
            continue
        targets.append([f"PostgreSQL 1 connection: ≥ 85 % of raw{label}", _ok(res[1][ratio][0] >= 0.85),
                        _pct(res[1][ratio])])
        targets.append([f"PostgreSQL {many} connections: ≥ 80 % of raw{label}",
                        _ok(res[many][ratio][0] >= 0.8), _pct(res[many][ratio])])
    _row_layout_targets_pg(res, targets)
    server = res.get("server", {})
    wal = res.get("wal_bytes_per_event") or {}
    wal_line = ("\n\nWAL bytes written per event (one connection; the server's WAL position, which other "
                "sessions move too — on a shared server see the `pg_walinspect` breakdown below): "
                + ", ".join(f"{WAL_NAMES.get(k, k)} **{v:,.0f}**" for k, v in wal.items()) + "."
                ) if wal else ""
    return (f"Server: {server.get('version', '?')}, "
            f"synchronous_commit={server.get('synchronous_commit', '?')}, "
            f"fsync={server.get('fsync', '?')} (so every commit waits for a WAL flush, durastate's and raw's "
            "alike). 8 connections = 8 processes started behind a barrier.\n\n"
            + table(["connections", "durastate events/s", "durastate ÷ raw", "durastate, keep_committed events/s",
                     "keep_committed ÷ raw", "raw UPDATE+commit events/s",
                     "raw autocommit events/s", "durastate ÷ raw autocommit", "events/conn × repeats"], rows)
            + wal_line + "".join(_before_after(res[c], PG_DURASTATE_BEFORE, f"{c} connection(s)") for c in (1, many))
            + _breakdown({k: v["records"] for k, v in (res.get("wal_breakdown") or {}).items()},
                         "WAL bytes per event by relation and record (`pg_walinspect`; other sessions' records "
                         "left out, so this is the reliable WAL figure on a shared server)", "{:,.0f}"))


def _breakdown(by_mode: dict[str, dict[str, float]] | None, title: str, fmt: str) -> str:
    """A table: one row per (relation, record), one column per worker mode; the totals last."""
    if not by_mode:
        return ""
    modes = list(by_mode)
    keys = sorted({k for v in by_mode.values() for k in v}, key=lambda k: -max(v.get(k, 0.0) for v in by_mode.values()))
    keys = [k for k in keys if max(v.get(k, 0.0) for v in by_mode.values()) >= 0.01]
    rows = [[k, *(fmt.format(by_mode[m][k]) if k in by_mode[m] else "—" for m in modes)] for k in keys]
    rows.append(["**total**", *(f"**{fmt.format(sum(by_mode[m].values()))}**" for m in modes)])
    return f"\n\n{title}:\n\n" + table(["", *modes], rows)


def _before_after(c: dict[str, Any], before: str, label: str) -> str:
    """The worker before the row layout and kept-copy default, beside today's default, same run."""
    if before not in c["series"] or "ratio_before" not in c:
        return ""
    default = next(k for k in c["series"] if k in ("durastate SqliteStore", "durastate PostgresStore"))
    return (f"\n\nSame run, {label}: before (read first, a dedupe row per event) "
            f"{fmt_series(c['series'][before])} events/s = {_pct(c['ratio_before'])} of raw; now (the default "
            f"worker: kept copies, checked by a version read only where a definition calls Python — the "
            f"chart calls none) {fmt_series(c['series'][default])} = "
            f"{_pct(c['ratio'])}."
            + (f" A mark row per event instead of the recent ids in the row (`recent_events=0`, the PostgreSQL "
               f"default before): {fmt_series(c['series'][PG_DURASTATE_ROWS])} = {_pct(c['ratio_rows'])}."
               if PG_DURASTATE_ROWS in c["series"] and "ratio_rows" in c else ""))


def _row_layout_targets_sqlite(res: dict[str, Any], targets: list[list[str]]) -> None:
    """The row-layout targets on SQLite: the default worker ≥ 40 % of raw per event (NORMAL), WAL at most twice raw."""
    targets.append(["SQLite NORMAL: default worker ≥ 40 % of raw per event", _ok(res["NORMAL"]["ratio"][0] >= 0.4),
                    _pct(res["NORMAL"]["ratio"])])
    if "ratio_notrace" in res["NORMAL"]:
        notrace = res["NORMAL"]["ratio_notrace"]
        targets.append(["SQLite NORMAL: ≥ 40 % of raw per event — trace off (`serve --no-trace`)",
                        _ok(notrace[0] >= 0.4), _pct(notrace)])
    pages = res["NORMAL"].get("wal_pages_per_event") or {}
    raw = pages.get("raw UPDATE loop")
    pages = {k: sum(v.values()) for k, v in (res.get("wal_breakdown") or {}).items()} or {
        k.removeprefix("durastate SqliteStore, "): v for k, v in pages.items()}
    for mode in ("default", "default, trace off"):
        mine = pages.get(mode)
        if raw and mine is not None:
            targets.append([f"SQLite WAL per event ≤ 2× raw ({mode})", _ok(mine <= 2 * raw),
                            f"{mine:.2f} pages vs raw {raw:.2f} ({mine / raw:.1f}×)"])


def _row_layout_targets_pg(res: dict[str, Any], targets: list[list[str]]) -> None:
    """The row-layout targets on PostgreSQL: the default worker ≥ 100 % / ≥ 90 % of raw, WAL at most twice raw."""
    many = res.get("many", 8)
    targets.append(["PostgreSQL 1 connection: default worker ≥ 100 % of raw UPDATE+commit",
                    _ok(res[1]["ratio"][0] >= 1.0), _pct(res[1]["ratio"])])
    targets.append([f"PostgreSQL {many} connections: default worker ≥ 90 % of raw UPDATE+commit",
                    _ok(res[many]["ratio"][0] >= 0.9), _pct(res[many]["ratio"])])
    wal = {k: v["total"] for k, v in (res.get("wal_breakdown") or {}).items()}
    raw = wal.get("raw")
    for mode in ("default", "default, trace off"):
        if raw and mode in wal:
            targets.append([f"PostgreSQL WAL per event ≤ 2× raw ({mode}; pg_walinspect)", _ok(wal[mode] <= 2 * raw),
                            f"{wal[mode]:,.0f} B vs raw {raw:,.0f} B ({wal[mode] / raw:.1f}×)"])


def dynamo_md(res: dict[str, Any] | None, targets: list[list[str]]) -> str:
    bad = _failed("DynamoDB cost", res)
    if bad:
        targets.append(["DynamoDB state-only ≤ 1 WRU + 1 RRU; all-in ≤ $1.5/M", "n/a", bad])
        return bad
    assert res is not None
    rows = []
    for label, p in res["paths"].items():
        w, a, d = p["worker"], p["all"], p["dollars_per_million"]
        ops = ", ".join(f"{k} {v:.3g}" for k, v in a["ops"].items())
        rows.append([label, f"{w['requests']:.3g}", f"{w['wru']:.3g}", f"{w['rru']:.3g}", f"{a['requests']:.3g}",
                     f"{a['wru']:.3g}", f"{a['rru']:.3g}", f"{a['sqs']:.2f}", f"{p.get('compute_ms', 0):.1f}",
                     f"{p.get('lambda_ms', 0):.0f}", f"${d['dynamodb']:.2f}", f"${d['sqs']:.2f}",
                     f"${d['lambda']:.2f}", f"**${d['total']:.2f}**", ops])
    paths = res["paths"]
    first, steady = paths.get("state-only, first 8 events"), paths.get("state-only, steady state")
    for label, so in (("first 8 events", first), ("steady state", steady)):
        if so is None:
            continue
        a = so["all"]
        targets.append([f"DynamoDB state-only, {label}: ≤ 1 WRU + 1 RRU per transition (exactly-once kept)",
                        _ok(a["wru"] <= 1 and a["rru"] <= 1),
                        f"{a['requests']:.3g} requests, {a['wru']:.3g} WRU, {a['rru']:.3g} RRU"])
    if steady is not None:
        d = steady["dollars_per_million"]
        targets.append(["All-in ≤ $1.5 per million, state-only steady state, 10 records per worker call",
                        _ok(d["total"] <= 1.5),
                        f"${d['total']:.2f}/M with one SendMessage per external event; "
                        f"${d.get('total_batched_client', d['total']):.2f}/M when the sender batches 10"])
    for label in ("with timers (arm + fire)", "with timers, hopped (arm + fire)"):
        t = paths.get(label)
        if t is not None:
            targets.append([f"Timer arm + fire ≤ 3 WRU per transition ({label.split('(')[0].strip()})",
                            _ok(t["all"]["wru"] <= 3), f"{t['all']['wru']:.3g} WRU"])
    emit = paths.get("with emits (+ relay)")
    if emit is not None:
        targets.append(["Emit path ≤ 6 DynamoDB requests per emitted event (low traffic)",
                        _ok(emit["all"]["requests"] <= 6), f"{emit['all']['requests']:.3g} requests"])
    idle = res.get("idle")
    if idle:
        targets.append(["Idle floor (no traffic) ≤ 2 DynamoDB requests a minute", _ok(idle["requests_per_minute"] <= 2),
                        f"{idle['requests_per_minute']:.3g}/min (sweep {idle['sweep_requests']:.3g} a minute, "
                        f"relay backstop {idle['backstop_requests']:.3g} every 5 minutes)"])
    pr = res["prices"]
    a = res["assumptions"]
    sf = res["step_functions"]
    text = (
        f"Region {res['region']}, on-demand prices: DynamoDB ${pr['dynamodb_wru'] * 1e6:.3f}/M WRU, "
        f"${pr['dynamodb_rru'] * 1e6:.3f}/M RRU; SQS FIFO ${pr['sqs_fifo_request'] * 1e6:.2f}/M requests "
        f"(per 64 KB chunk); Lambda ${pr['lambda_request'] * 1e6:.2f}/M requests + "
        f"${pr['lambda_gb_s_arm']:.10f}/GB-s (arm64). "
        f"Lambda {a['lambda_memory_gb'] * 1024:.0f} MB, SQS batches of {a['lambda_batch']} to the worker. "
        "Lambda duration is measured: durastate's own compute per event (wall time less the time inside "
        f"its requests) plus an assumed {a['request_ms']:g} ms per AWS request; one relay (or sweeper) "
        "invocation per pass that had work, as at low traffic. The steady state is an execution after "
        f"{a.get('warmup', '?')} events, averaged over {a.get('steady', '?')} more (so the occasional write "
        f"of spilled event ids is in it). Each path driven {res['n']} times; numbers are per transition.\n\n"
        + table(["path", "worker requests", "worker WRU", "worker RRU", "all requests", "all WRU", "all RRU",
                 "SQS requests", "compute ms / event", "Lambda ms / transition", "DynamoDB $/M", "SQS $/M",
                 "Lambda $/M", "total $/M", "all operations"], rows)
    )
    before = res.get("before")
    if before:
        cmp_rows = _before_after_rows(paths, before["paths"], ("requests", "wru", "rru"),
                                      lambda p: f"{p.get('lambda_ms', 0):.0f}")
        if idle and before.get("idle"):
            bi = before["idle"]
            cmp_rows.append(["idle floor, DynamoDB requests a minute", f"{bi['requests_per_minute']:.3g} → "
                             f"**{idle['requests_per_minute']:.3g}**", "", "", "", ""])
        text += (f"\n\nBefore → after, measured in the same run by the same driver (the older package: "
                 f"`{res.get('baseline', '?')}`):\n\n"
                 + table(["path (per transition)", "DynamoDB requests", "WRU", "RRU", "$/M all-in",
                          "Lambda ms"], cmp_rows))
    return text + (
        f"\n\nFor comparison: **Step Functions Standard ${sf['standard']:.2f} per million state "
        f"transitions**; Express ${sf['express_min_execution']:.2f} per million *executions* at the minimum "
        "(64 MB, 100 ms) — but an Express workflow lives at most 5 minutes, so a statechart that waits for "
        "days (timers, human steps) has to be Standard.")


LOCAL_TIMER_PATHS = ("timer arm + fire, via the hop", "timer arm + fire, via the sweeper")


def _before_after_rows(paths: dict[str, Any], before: dict[str, Any], keys: tuple[str, ...],
                       lambda_ms: Callable[[dict[str, Any]], str]) -> list[list[str]]:
    """One row per path measured both times: each of ``keys`` (per transition, over all functions), the
    all-in cost and the Lambda time (as ``lambda_ms`` formats it), before → after. The two DynamoDB cost
    drivers (in process, local stack) share it; they differ in the columns they have."""
    rows = []
    for label, p in paths.items():
        b = before.get(label)
        if b is None:
            continue
        rows.append([label, *(f"{b['all'][k]:.3g} → **{p['all'][k]:.3g}**" for k in keys),
                     f"${b['dollars_per_million']['total']:.2f} → **${p['dollars_per_million']['total']:.2f}**",
                     f"{lambda_ms(b)} → {lambda_ms(p)}"])
    return rows


def dynamo_local_md(res: dict[str, Any] | None, targets: list[list[str]]) -> str:
    """The cost measured on the local stack (:mod:`bench.dynamo_cost_local`): the DynamoDB targets' rows."""
    bad = _failed("DynamoDB cost on the local stack", res)
    if bad:
        targets.append(["DynamoDB cost on the local stack", "n/a", bad])
        return bad
    assert res is not None
    paths = res["paths"]

    def rows_of(result: dict[str, Any]) -> list[list[str]]:
        rows = []
        for label, p in result["paths"].items():
            a, lam, d = p["all"], p["lambda"], p["dollars_per_million"]
            ops = ", ".join(f"{k} {v:.3g}" for k, v in a["ops"].items())
            rows.append([label, f"{p['records_per_worker_call']:.1f}", f"{a['requests']:.3g}",
                         f"{a['wru']:.3g} ({p.get('spill_wru', 0.0):.2g})",
                         f"{a['rru']:.3g}", f"{a['sqs']:.2f}", f"{lam['billed_ms']:.1f}",
                         f"{lam['in_requests_ms']:.1f}", f"{lam['compute_ms']:.1f}", f"${d['dynamodb']:.2f}",
                         f"${d['sqs']:.2f}", f"${d['lambda']:.2f}", f"**${d['total']:.2f}**", ops])
        idle = result.get("idle")
        if idle:
            rows.append(["idle floor, per minute", "", f"{idle['requests_per_minute']:.3g}", "", "", "",
                         f"{idle['sweep_ms'] + idle['backstop_ms'] / 5:.1f}", "", "", "", "", "",
                         f"${idle['dollars_per_month']:.3f} a month",
                         f"sweep {idle['sweep_requests']:.3g} request a minute, relay backstop "
                         f"{idle['backstop_requests']:.3g} every 5 minutes"])
        return rows

    headers = ["path", "records per worker call", "DynamoDB requests", "WRU (of which spilled ids)", "RRU",
               "SQS requests",
               "Lambda ms billed", "of which in requests", "compute", "DynamoDB $/M", "SQS $/M", "Lambda $/M",
               "total $/M", "all operations"]
    first, steady = paths.get("state-only, first 8 events"), paths.get("state-only, steady state")
    for label, so in (("first 8 events", first), ("steady state", steady)):
        if so is not None:
            a = so["all"]
            targets.append([f"DynamoDB state-only, {label}: ≤ 1 WRU + 1 RRU per transition (exactly-once kept; "
                            "local stack)", _ok(a["wru"] <= 1 and a["rru"] <= 1),
                            f"{a['requests']:.3g} requests, {a['wru']:.3g} WRU, {a['rru']:.3g} RRU"])
    if steady is not None:
        d = steady["dollars_per_million"]
        targets.append(["All-in ≤ $1.5 per million, state-only steady state, 10 records per worker call (local "
                        "stack, measured Lambda)", _ok(d["total"] <= 1.5),
                        f"${d['total']:.2f}/M (DynamoDB ${d['dynamodb']:.2f}, SQS ${d['sqs']:.2f}, Lambda "
                        f"${d['lambda']:.2f} for {steady['lambda']['billed_ms']:.1f} ms billed a transition)"])
    emit = paths.get("with emits (+ relay)")
    if emit is not None:  # one emitted event per transition on this path
        targets.append(["Emit path ≤ 6 DynamoDB requests per emitted event (low traffic; local stack)",
                        _ok(emit["all"]["requests"] <= 6), f"{emit['all']['requests']:.3g} requests"])
    for label in LOCAL_TIMER_PATHS:
        t = paths.get(label)
        if t is not None:  # the timer's own cost: the spills of recent ids that fell in its events are apart
            own = t["all"]["wru"] - t.get("spill_wru", 0.0)
            targets.append([f"Timer arm + fire ≤ 3 WRU per transition ({label.split(', ')[1]}; local stack)",
                            _ok(own <= 3 + 1e-9), f"{own:.3g} WRU (+ {t.get('spill_wru', 0.0):.3g} of spilled event "
                            "ids that fell in these events)"])
    text = (
        "Measured on the local stack (`python -m bench.dynamo_cost_local`): the synthesized CDK stack on moto's "
        "HTTP server, its packaged handlers called as Lambda calls them, driven only by a client's "
        f"`send_message`; {res['executions']} executions side by side, so the worker gets batches of 10 "
        "records. Every request the handlers make is billed (DynamoDB capacity from the item sizes, twice "
        "inside transactions; SQS per request, the event source's receive and delete per invocation "
        "included). Lambda duration is the measured wall time of each invocation on this machine, billed per "
        "invocation rounded up to the millisecond at 512 MB arm64 — requests to moto included, which answers "
        "from this same shared machine (the *in requests* column), not from DynamoDB. Steady state: after "
        f"{res.get('warmup', '?')} events, over {res.get('steady', '?')} more (the executions staggered so "
        "their spills fall on different rounds). Numbers are per transition.\n\n" + table(headers, rows_of(res)))
    before = res.get("before")
    if before:
        cmp_rows = _before_after_rows(paths, before["paths"], ("requests", "wru", "rru", "sqs"),
                                      lambda p: f"{p['lambda']['billed_ms']:.1f}")
        text += (f"\n\nBefore → after on the local stack, in the same run by the same driver (the older package: "
                 f"`{res.get('baseline', '?')}`):\n\n"
                 + table(["path (per transition)", "DynamoDB requests", "WRU", "RRU", "SQS requests", "$/M all-in",
                          "Lambda ms billed"], cmp_rows))
    return text


GROWTH_OPS = ("sweep", "relay pass", "listing page", "purge batch")
"""The reads the growth section costs at each table size (a result without one just lacks its rows)."""
MAX_AMPLIFICATION = 3
"""A read "grows with what it returns" when, at the largest table, it reads at most 3 rows/items per row
it needs (a listing page legitimately reads 2 on DynamoDB: the index entries, then the page's items)."""


def growth_md(dyn: dict[str, Any] | None, pg: dict[str, Any] | None, targets: list[list[str]]) -> str:
    parts = []
    verdict: dict[str, list[bool]] = {op: [] for op in GROWTH_OPS}
    measured: dict[str, list[str]] = {k: [] for k in verdict}
    bad = _failed("DynamoDB growth", dyn)
    if bad:
        parts.append(bad)
    else:
        assert dyn is not None
        rows = []
        sizes = sorted(dyn, key=int)
        for op in GROWTH_OPS:
            for size in sizes:
                r = dyn[size].get(op)
                if r is None:
                    rows.append([op, f"{int(size):,}", "—", "—", "—", "— (not measured at this size)"])
                    continue
                rows.append([op, f"{int(size):,}", r["returned"], r["needed"], r["items_read"],
                             f"{r['rru']:g}"])
            got = [dyn[s][op] for s in sizes if dyn[s].get(op) is not None]
            if got:  # read amplification at the largest size measured: items read per item needed
                last = got[-1]
                verdict[op].append(last["items_read"] <= MAX_AMPLIFICATION * max(last["needed"], 1))
                size = max(int(s) for s in sizes if dyn[s][op] is not None)
                measured[op].append(f"DynamoDB {last['items_read']:,} items read for {last['needed']:,} "
                                    f"needed at {size:,} rows")
        parts.append("**DynamoDB** (moto; items read and RRU billed from the requests and responses; a "
                     "relay pass Queries each of the outbox's 4 shards from its oldest entry):\n\n"
                     + table(["read", "table rows", "returned", "a pass needs", "items read", "RRU"], rows))
    bad = _failed("PostgreSQL growth", pg)
    if bad:
        parts.append(bad)
    else:
        assert pg is not None
        rows = []
        sizes = sorted(pg, key=int)
        for op in [op for op in GROWTH_OPS if all(op in pg[s] for s in sizes)]:
            for size in sizes:
                r = pg[size][op]
                rows.append([op, f"{int(size):,}", r["returned"], r.get("needed", r["returned"]),
                             r["rows_scanned"], r["buffers"], f"{r['ms']:.2f}", ", ".join(r["nodes"])])
            last = pg[sizes[-1]][op]
            need = max(last.get("needed", last["returned"]), 1)
            verdict[op].append(last["rows_scanned"] <= MAX_AMPLIFICATION * need)
            measured[op].append(f"PostgreSQL {last['rows_scanned']:,} rows for {need:,} needed at "
                                f"{int(sizes[-1]):,} rows")
        parts.append("**PostgreSQL** (`EXPLAIN (ANALYZE, BUFFERS)` of the store's own statements):\n\n"
                     + table(["read", "table rows", "returned", "a pass needs", "rows scanned",
                              "shared buffers", "ms", "plan"], rows))
    for op, flags in verdict.items():
        targets.append([f"Growth: {op} grows with what it returns, not the table",
                        _ok(all(flags)) if flags else "n/a", "; ".join(measured[op]) or "not measured"])
    return "\n\n".join(parts)


# -- plots ------------------------------------------------------------------------------------------------
def plots(out: Path, results: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    eng = results.get("engine")
    if eng and "error" not in eng:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
        for ax, chart in zip(axes, ("chart1", "chart2"), strict=True):
            s = eng[chart]["series"]
            names = list(s)
            med = [s[n].median for n in names]
            err = [[s[n].median - s[n].lo for n in names], [s[n].hi - s[n].median for n in names]]
            colors = ["#1f77b4" if n.startswith("durastate") else "#999999" for n in names]
            ax.barh(range(len(names)), med, xerr=err, color=colors)
            ax.set_yticks(range(len(names)), [n.replace(" (", "\n(") for n in names], fontsize=8)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.set_xlabel("events per second (median, min–max; log scale)")
            ax.set_title({"chart1": "chart 1: hierarchy", "chart2": "chart 2: history + parallel"}[chart])
        fig.suptitle("durastate (full commit on DictStore) vs peer statechart libraries")
        fig.tight_layout()
        fig.savefig(out / "engine.png", dpi=110)
        plt.close(fig)
        made.append("engine.png")
    sq, pg = results.get("sqlite"), results.get("postgres")
    bars: list[tuple[str, float, float]] = []
    if sq and "error" not in sq:
        for sync in ("NORMAL", "FULL"):
            s = sq[sync]["series"]
            bars.append((f"SQLite {sync}", s["durastate SqliteStore"].median, s["raw UPDATE loop"].median))
    if pg and "error" not in pg and "skipped" not in pg:
        for c in (1, pg.get("many", 8)):
            s = pg[c]["series"]
            bars.append((f"Postgres ×{c}", s["durastate PostgresStore"].median, s["raw UPDATE+commit"].median))
    if bars:
        fig, ax = plt.subplots(figsize=(8, 4))
        xs = range(len(bars))
        ax.bar([x - 0.2 for x in xs], [b[1] for b in bars], 0.4, label="durastate (worker + store)")
        ax.bar([x + 0.2 for x in xs], [b[2] for b in bars], 0.4, label="raw write loop", color="#999999")
        ax.set_xticks(list(xs), [b[0] for b in bars])
        ax.set_yscale("log")
        ax.set_ylabel("events per second (median, log scale)")
        ax.legend()
        ax.set_title("durable stores: durastate vs a raw one-UPDATE-per-transaction loop")
        fig.tight_layout()
        fig.savefig(out / "stores.png", dpi=110)
        plt.close(fig)
        made.append("stores.png")
    dyn = results.get("dynamo")
    if dyn and "error" not in dyn:
        fig, ax = plt.subplots(figsize=(8, 4))
        labels = list(dyn["paths"])
        bottom = [0.0] * len(labels)
        for part, color in (("dynamodb", "#1f77b4"), ("sqs", "#ff7f0e"), ("lambda", "#2ca02c")):
            vals = [dyn["paths"][lb]["dollars_per_million"][part] for lb in labels]
            ax.bar(labels, vals, bottom=bottom, label=part, color=color)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        top = max(bottom) * 1.35
        ax.axhline(1.5, color="black", linestyle=":", label="target $1.5/M")
        ax.set_ylim(0, top)
        ax.text(len(labels) - 0.5, top * 0.97, f"Step Functions Standard: "
                f"${dyn['step_functions']['standard']:.0f}/M (off the chart)", ha="right", va="top",
                color="red", fontsize=9)
        for x, total in enumerate(bottom):
            ax.text(x, total, f"${total:.2f}", ha="center", va="bottom", fontsize=8)
        ax.set_ylabel("$ per million transitions")
        ax.tick_params(axis="x", labelsize=8)
        ax.legend(fontsize=8)
        ax.set_title("durastate on AWS: cost per transition by path (us-east-1 on-demand)")
        fig.tight_layout()
        fig.savefig(out / "cost.png", dpi=110)
        plt.close(fig)
        made.append("cost.png")
    gd, gp = results.get("growth_dynamo"), results.get("growth_pg")
    panels = [(n, r) for n, r in (("DynamoDB items read", gd), ("PostgreSQL rows scanned", gp))
              if r and "error" not in r and "skipped" not in r]
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
        for ax, (title, r) in zip(axes[0], panels, strict=True):
            sizes = sorted(r, key=int)
            key = "items_read" if title.startswith("DynamoDB") else "rows_scanned"
            for op in GROWTH_OPS:
                pts = [(int(s), r[s][op][key]) for s in sizes if r[s].get(op) is not None]
                ax.plot([p[0] for p in pts], [max(p[1], 0.5) for p in pts], marker="o", label=op)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("rows in the table")
            ax.set_ylabel(key.replace("_", " "))
            ax.set_title(title)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "growth.png", dpi=110)
        plt.close(fig)
        made.append("growth.png")
    return made


# -- the page ---------------------------------------------------------------------------------------------
SUPERSEDED_BY_LOCAL = ("DynamoDB state-only", "All-in ≤ $1.5", "Timer arm + fire", "Emit path")
"""In-process DynamoDB targets that the local stack's measurement decides when it is in the results."""


def write(out: Path, results: dict[str, Any], info: dict[str, str], command: str) -> str:
    targets: list[list[str]] = []
    in_process: list[list[str]] = []
    body = [
        "## Engine: durastate vs peer statechart libraries",
        _ENGINE_INTRO,
        engine_md(results.get("engine"), targets),
        "## Durable stores: durastate vs a raw write loop",
        "### SQLite", sqlite_md(results.get("sqlite"), targets),
        "### PostgreSQL", postgres_md(results.get("postgres"), targets),
        "## DynamoDB + SQS + Lambda: cost per transition",
        "### On the local stack, driven by `send_message`", dynamo_local_md(results.get("dynamo_local"), targets),
        "### In process (the runtime's pieces called directly)", dynamo_md(results.get("dynamo"), in_process),
        "## Growth: read cost vs table size", _GROWTH_INTRO,
        growth_md(results.get("growth_dynamo"), results.get("growth_pg"), targets),
        "## The queue path, and the other durable engine (harel)",
        queue_md(results.get("queue"), targets),
        "## OpenTelemetry: the worker's cost per event, off and on",
        telemetry_md(results.get("telemetry"), targets),
    ]
    local = results.get("dynamo_local")
    targets += [t for t in in_process
                if not (local and "error" not in local and t[0].startswith(SUPERSEDED_BY_LOCAL))]
    made = plots(out, results)
    notes_path = Path(__file__).parent / "NOTES.md"
    notes = notes_path.read_text(encoding="utf-8") if notes_path.exists() else ""
    secs = results.get("_seconds", {})
    commands = sorted(set((results.get("_commands") or {}).values()))
    produced = (f"Produced by `{command}` (= `make bench`{' --quick' if '--quick' in command else ''})"
                if len(commands) <= 1 else
                "Produced by these runs (sections re-measured after a change keep their own): "
                + "; ".join(f"`{c}`" for c in commands))
    head = [
        "# durastate benchmarks",
        "",
        f"{produced}, last run {results.get('_total_seconds', 0):.0f} s"
        + (" (" + ", ".join(f"{k} {v:.0f}s" for k, v in secs.items()) + ")" if secs else "") + ".",
        "This machine is shared and noisy: every comparison runs its contenders interleaved in the same "
        "process run and reports medians, min–max and per-repeat ratios — never one absolute time.",
        "",
        "### Machine",
        "",
        table(["", ""], list(info.items())),
        "",
        "### Targets",
        "",
        table(["target", "status", "measured"], targets),
        "",
        " ".join(f"![{m}]({m})" for m in made),
    ]
    text = "\n".join(head) + "\n\n" + "\n\n".join(body) + ("\n\n" + notes if notes else "") + "\n"
    (out / "README.md").write_text(text, encoding="utf-8")
    return text


def telemetry_md(res: dict[str, Any] | None, targets: list[list[str]]) -> str:
    target = "Telemetry: tracing off ≥ 95 % of the extra absent (worker, chart 1)"
    bad = _failed("telemetry", res)
    if bad:
        targets.append([target, "n/a", bad])
        return bad
    assert res is not None
    from bench.telemetry import ABSENT, OFF

    s: dict[str, Series] = res["series"]
    rows = [[name, fmt_series(ser), "—" if name == ABSENT else _ratio(res["ratios"][name])]
            for name, ser in s.items()]
    off = res["ratios"][OFF]
    targets.append([target, _ok(off[0] >= 0.95), _ratio(off)])
    return (f"The engine section's headline worker (`Worker.handle` on `DictStore`, a full commit per event), "
            f"{res['events']} chart-1 events per run, {res['repeats']} interleaved repeats (`bench/telemetry.py` "
            "says what each row is).\n\n"
            + table(["worker", "events/s median (min–max)", "÷ extra absent, per-repeat median (min–max)"], rows))


_ENGINE_INTRO = (
    "durastate runs each event through its worker with a full commit on the in-memory `DictStore`: load with "
    "the dedupe check, step a detached copy, commit with the event's dedupe mark and its trace step "
    "(`copy_on_load` on, the default — a row without the copy is shown for reference). The peers run the "
    "same chart in memory with no persistence at all. For chart 2, durastate runs the local runtime (worker + "
    "relay + in-memory queue): its parallel regions are child executions, so the fork creates two "
    "children, `l`/`r` are forwarded to them and the join is two `durastate.finished` events — 15 commits and "
    "3 relay hops per 8 events, all inside the timing (the \"server's view\" row queues each cycle's 8 "
    "events before running, as a busy server would see them). Every run checks that each engine ends "
    "in `idle` "
    "(and that `resume` restored `b` through history), so a peer cannot win by dropping events.")
_GROWTH_INTRO = (
    "A sweep with 10 due timers among N armed ones, the read of one relay pass over a backlog of N "
    "undelivered outbox entries (a pass with a budget of 100 delivers 100), and one page of 100 "
    "executions by status (1 % of N run, so a plan that scans the table instead of an index shows). A "
    "target is met when, at the largest table, a read touches at most 3 rows or items per one it needs.")


# -- the README's section -----------------------------------------------------------------------------------
def summary_md(results: dict[str, Any], results_link: str = "bench/results/README.md",
               plot: str = "bench/results/engine.png") -> str:
    """``docs/benchmarks.md``: the headline numbers, a link to the full tables, one plot."""
    rows: list[list[str]] = []
    eng = results.get("engine")
    if eng and "error" not in eng:
        for chart, what in (("chart1", "hierarchy (chart 1)"), ("chart2", "history + parallel (chart 2)")):
            c = eng[chart]
            s = c["series"]
            fastest = c["fastest_peer"]
            rows.append([f"engine, {what}: durastate vs the fastest peer ({fastest.split(' (')[0]})",
                         f"{fmt_rate(s[c['durastate']].median)} vs {fmt_rate(s[fastest].median)} events/s",
                         f"{c['ratios'][fastest][0]:.1f}×"])
    sq = results.get("sqlite")
    if sq and "error" not in sq:
        for sync in ("NORMAL", "FULL"):
            s = sq[sync]["series"]
            for who, key, ratio in (("durastate's worker", "durastate SqliteStore", "ratio"),
                                    ("`durastate serve`", DURASTATE_SERVE, "ratio_serve")):
                if key in s:
                    rows.append([f"SQLite ({sync}): {who} vs a raw UPDATE loop",
                                 f"{fmt_rate(s[key].median)} vs "
                                 f"{fmt_rate(s['raw UPDATE loop'].median)} events/s",
                                 f"{sq[sync][ratio][0] * 100:.0f} %"])
    pg = results.get("postgres")
    if pg and "error" not in pg and "skipped" not in pg:
        for conns in (1, pg.get("many", 8)):
            s = pg[conns]["series"]
            plural = "s" if conns > 1 else ""
            for who, key, ratio in (("durastate", "durastate PostgresStore", "ratio"),
                                    ("durastate, keep_committed", PG_DURASTATE_KEEP, "ratio_keep")):
                if key in s:
                    rows.append([f"PostgreSQL, {conns} connection{plural}: {who} vs raw UPDATE+commit",
                                 f"{fmt_rate(s[key].median)} vs {fmt_rate(s['raw UPDATE+commit'].median)} "
                                 "events/s", f"{pg[conns][ratio][0] * 100:.0f} %"])
    local = results.get("dynamo_local")
    dyn = results.get("dynamo")
    if local and "error" not in local and dyn and "error" not in dyn:
        sf = dyn["step_functions"]["standard"]
        for label in ("state-only, first 8 events", "state-only, steady state"):
            p = local["paths"].get(label)
            if p:
                a = p["all"]
                rows.append([f"AWS (local stack), {label} transition: requests / WRU, all-in cost",
                             f"{a['requests']:.3g} / {a['wru']:.3g}, "
                             f"${p['dollars_per_million']['total']:.2f} per M",
                             f"Step Functions Standard: ${sf:.0f} per M"])
    elif dyn and "error" not in dyn:
        sf = dyn["step_functions"]["standard"]
        for label in ("state-only, first 8 events", "state-only, steady state"):
            p = dyn["paths"].get(label)
            if p:
                w = p["worker"]
                rows.append([f"AWS, {label} transition: requests / WRU, all-in cost",
                             f"{w['requests']:.3g} / {w['wru']:.3g}, "
                             f"${p['dollars_per_million']['total']:.2f} per M",
                             f"Step Functions Standard: ${sf:.0f} per M"])
    body = table(["benchmark", "measured (median)", "ratio / reference"], rows) if rows else "_no results_"
    return (
        "## Benchmarks\n\n"
        "`make bench` (`python -m bench`; `--quick` for a short run) compares durastate with peer statechart "
        "libraries (transitions, python-statemachine, sismic) on the same charts and event sequences, its "
        "durable stores with raw write loops on the same database settings, and prices a transition on AWS "
        "from the requests durastate actually sends. Everything runs side by side in one run, reported as "
        "medians and ratios.\n\n"
        + body
        + f"\n\nFull tables, the machine, the exact command and each target's status: [{results_link}]"
        f"({results_link}).\n\n![durastate vs peers]({plot})\n"
    )
