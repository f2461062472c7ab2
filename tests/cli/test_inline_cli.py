"""``durastate start/send/serve/show`` on the inline-regions example (examples/upload.yaml), on SQLite and on
PostgreSQL: the regions' leaves are the execution's own, shown by ``show`` and kept by the store."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ._support import Outcome
from .test_postgres import pg_url  # noqa: F401  (the fixture: a fresh schema on the local PostgreSQL)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def store_args(request: pytest.FixtureRequest) -> tuple[str, ...]:
    if request.param == "sqlite":
        return ()  # the test's own SQLite file, from the environment
    return ("--store", request.getfixturevalue("pg_url"))


def test_upload_runs_its_regions_inline(cli: Callable[..., Outcome], store_args: tuple[str, ...]) -> None:
    def ok(*args: str) -> Outcome:
        out = cli(*store_args, *args)
        assert out.code == 0, (out.stdout, out.stderr)
        return out

    ok("start", "upload", "--id", "u1")
    ok("send", "u1", "scanned", "--data", '{"clean": true}')
    served = ok("serve", "--until-idle")
    assert "2 applied" in served.stderr and "0 child(ren) spawned" in served.stderr
    shown = ok("show", "u1").stdout
    assert "processing  { scan.clean | thumbnail.rendering }" in shown
    exe = json.loads(ok("show", "u1", "--json").stdout)
    assert exe["leaves"] == ["processing.scan.clean", "processing.thumbnail.rendering"]
    assert exe["active_path"] == "processing" and exe["children"] == {}
    drawn = ok("viz", "--execution", "u1").stdout  # every active leaf is marked
    assert "class processing__scan__clean active" in drawn
    assert "class processing__thumbnail__rendering active" in drawn
    explained = ok("send", "u1", "rendered", "--explain").stdout  # the in_state guard sees the other region
    assert "processing.thumbnail.rendering" in explained and "← taken" in explained
    assert "(active: processing  { scan.clean | thumbnail.rendering }, running)" in explained
    ok("send", "u1", "rendered")
    ok("serve", "--until-idle")
    exe = json.loads(ok("show", "u1", "--json").stdout)
    assert (exe["status"], exe["outcome"], exe["context"]["preview"]) == ("finished", "published", True)
    steps = json.loads(ok("trace", "u1", "--json").stdout)
    assert [(s["to"], s.get("leaves")) for s in steps] == [
        ("processing", ["processing.scan.scanning", "processing.thumbnail.rendering"]),
        ("processing", ["processing.scan.clean", "processing.thumbnail.rendering"]),
        ("published", None)]
    assert "leaves=" in ok("trace", "u1").stdout
    listed = json.loads(ok("list", "--definition", "upload", "--json").stdout)
    assert [i["active_path"] for i in listed["items"]] == ["published"]
