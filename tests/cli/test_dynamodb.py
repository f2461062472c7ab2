"""The CLI on ``dynamodb://`` (moto's HTTP server): without a queue, commands apply events in process."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ._support import Outcome

pytestmark = pytest.mark.slow


def test_start_send_serve_show_on_dynamodb(cli: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    pytest.importorskip("boto3")
    from tests._aws import shared_moto_server, unique_prefix

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    server = shared_moto_server()
    monkeypatch.setenv("DURASTATE_STORE",
                       f"dynamodb://{unique_prefix('cli')}?endpoint_url={server.url}&region=us-east-1")

    def ok(*args: str) -> Outcome:
        out = cli(*args)
        assert out.code == 0, (out.stdout, out.stderr)
        return out

    started = ok("start", "order", "--id", "d1")
    assert "started d1 (order)" in started.stdout and "cart" in started.stdout  # applied here and now
    ok("send", "d1", "add_item", "--data", '{"price": 7}')
    ok("send", "d1", "submit")
    assert json.loads(ok("show", "d1~1", "--json").stdout)["active_path"] == "pending"
    ok("serve", "--until-idle", "--advance", "1000")  # the payment's 15-minute timeout fires
    exe = json.loads(ok("show", "d1", "--json").stdout)
    assert (exe["status"], exe["outcome"]) == ("finished", "payment_failed")
    unknown = cli("send", "d1", "add_item")
    assert unknown.code == 1 and "has finished" in unknown.stderr


def test_a_claim_checked_execution_through_the_store_url(cli: Callable[..., Outcome],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``?context_bucket=…&claim_check_bytes=0`` keeps every execution in S3; ``show`` reads it whole."""
    pytest.importorskip("boto3")
    from tests._aws import boto3_client, shared_moto_server, unique_prefix

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    server = shared_moto_server()
    bucket = unique_prefix("ctx")
    s3 = boto3_client("s3", server.url)
    s3.create_bucket(Bucket=bucket)
    monkeypatch.setenv("DURASTATE_STORE", f"dynamodb://{unique_prefix('cli')}?endpoint_url={server.url}"
                       f"&region=us-east-1&context_bucket={bucket}&claim_check_bytes=0")
    assert cli("start", "order", "--id", "c1").code == 0
    assert cli("send", "c1", "add_item", "--data", '{"price": 7}').code == 0
    shown = cli("show", "c1", "--json")
    assert shown.code == 0, shown.stderr
    assert json.loads(shown.stdout)["context"]["items"]  # the whole context, read from the object
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="contexts/c1/").get("Contents", [])]
    assert len(keys) == 1  # the superseded objects are gone
    bad = cli("--store", f"dynamodb://x?endpoint_url={server.url}&claim_check_bytes=lots", "list")
    assert bad.code == 1 and "claim_check_bytes must be a whole number" in bad.stderr
