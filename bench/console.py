"""The web console's executions page at 100, 10,000 and 100,000 executions (SQLite): keyset paging and
capped counts mean the big store answers within a small multiple of the small one — no count scan, no offset.

    python -m bench.console            # 100, 10,000 and 100,000 executions; writes bench/results/console.md
    python -m bench.console --quick    # 100, 1,000 and 10,000

Each request goes over HTTP to the console served as ``durastate ui`` serves it (uvicorn, here in a thread):
routing, the store's queries, the template; interleaved between the two stores, median of many; the ratio
is computed per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from durastate.engine import DefinitionRegistry
from durastate.engine.model import Execution
from durastate.store import open_store
from durastate.ui.app import Console, create_app
from durastate.ui.server import address, bind

ROOT = Path(__file__).resolve().parents[1]
PAGES = {
    "executions (no filter)": "/",
    "status=failed": "/?status=failed",
    "definition=order, status=running, 10 a page, page 2": None,  # filled in with the cursor of page 1
    "counts per status (/api/counts, fetched by the page)": "/api/counts",
}


def fill(url: str, n: int) -> None:
    """``n`` executions of two definitions in three statuses, saved through the store API."""
    store = open_store(url)
    statuses = ("running", "finished", "failed")
    try:
        for i in range(n):
            store.save(Execution(id=f"e-{i:07d}", definition_id="order" if i % 2 else "payment",
                                 status=statuses[i % 3], active_path="cart",  # type: ignore[arg-type]
                                 created_at=1_700_000_000.0 + i, updated_at=1_700_000_000.0 + i))
    finally:
        store.close()


@contextmanager
def served(url: str) -> Iterator[str]:
    """The console over ``url`` on a free port, in a thread; yields its address."""
    console = Console(store=open_store(url), registry=DefinitionRegistry.from_dir(ROOT / "examples"),
                      store_label=url)
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(console), log_level="warning", access_log=False,
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield address(sock)
    finally:
        server.should_exit = True
        thread.join()
        console.store.close()


def get(url: str) -> str:
    with urllib.request.urlopen(url) as answer:
        assert answer.status == 200, (url, answer.status)
        return str(answer.read().decode())


def second_page(base: str) -> str:
    text = get(base + "/?definition=order&status=running&limit=10")
    marker = 'id="next-page" href="'
    start = text.index(marker) + len(marker)
    return text[start:text.index('"', start)].replace("&amp;", "&")


def timed(url: str) -> float:
    t0 = time.perf_counter()
    get(url)
    return time.perf_counter() - t0


def run(sizes: tuple[int, ...] = (100, 10_000, 100_000), rounds: int = 30) -> dict[str, Any]:
    """Median latency of each page at each size; the ratio largest/smallest is taken per round."""
    small, big = min(sizes), max(sizes)
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        urls = {n: f"sqlite:///{tmp}/{n}.db" for n in sizes}
        t0 = time.perf_counter()
        for n, url in urls.items():
            fill(url, n)
        results: dict[str, Any] = {"sizes": list(sizes), "rounds": rounds,
                                   "fill_seconds": time.perf_counter() - t0, "pages": {}}
        bases = {n: stack.enter_context(served(url)) for n, url in urls.items()}
        for name, path in PAGES.items():
            urls_of = {n: base + (path or second_page(base)) for n, base in bases.items()}
            for u in urls_of.values():  # warm up: the first request compiles the templates
                timed(u)
            times: dict[int, list[float]] = {n: [] for n in sizes}
            ratios = []
            for r in range(rounds):
                order = list(sizes[r % len(sizes):] + sizes[:r % len(sizes)])  # rotate who goes first
                got = {n: timed(urls_of[n]) for n in order}
                for n in order:
                    times[n].append(got[n])
                ratios.append(got[big] / got[small])
            results["pages"][name] = {"ms": {str(n): statistics.median(t) * 1000 for n, t in times.items()},
                                      "ratio": statistics.median(ratios)}
    return results


def markdown(res: dict[str, Any], command: str) -> str:
    sizes = res["sizes"]
    small, big = min(sizes), max(sizes)
    lines = [
        "# Web console: the executions page as the store grows",
        "",
        f"`{command}` — SQLite stores of {', '.join(f'{n:,}' for n in sizes)} executions (two definitions, three "
        f"statuses; filled in {res['fill_seconds']:.0f}s), each served over HTTP as `durastate ui` serves it; "
        f"{res['rounds']} interleaved requests per page and size. Median latency, and the median of the "
        f"per-round ratio {big:,} / {small:,}.",
        "",
        "| page | " + " | ".join(f"{n:,} executions" for n in sizes) + f" | {big:,} / {small:,} |",
        "|---|" + "---:|" * (len(sizes) + 1),
    ]
    for name, page in res["pages"].items():
        cells = " | ".join(f"{page['ms'][str(n)]:.1f} ms" for n in sizes)
        lines.append(f"| {name} | {cells} | {page['ratio']:.1f}x |")
    lines += [
        "",
        "A page is one keyset page of the listing (`id > cursor ORDER BY id LIMIT n`, on an index). The counts "
        "per status, which the page fetches once loaded, are one listing per status of at most 1,001 rows "
        "(\"1,000+\"): past the cap their work no longer grows with the store — compare the two larger sizes.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100, 1,000 and 10,000 executions")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"), help="output folder")
    args = ap.parse_args(argv)
    command = "python -m bench.console" + (" --quick" if args.quick else "")
    res = run((100, 1_000, 10_000) if args.quick else (100, 10_000, 100_000), rounds=15 if args.quick else 30)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(res, command)
    (out / "console.md").write_text(text, encoding="utf-8")
    (out / "console.json").write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
