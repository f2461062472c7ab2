"""Contexts past 5 MB on the local stack: the claim check's S3 bucket, end to end, under the roles' IAM.

The stack is the app synthesized with ``-c durastate:largeContexts=true`` (the context bucket, its grants)
and retention, run on the no-Docker local stack, which creates the template's bucket and decides each
request against the function's (or the operator's) policy. An execution grows past 5 MB through events on
the queue, naps on a timer, has parts of it edited, is read whole by ``durastate show`` and the client,
and its S3 objects go with retention's purge (another's with ``durastate purge``). Nothing is denied, and
each S3 grant of the worker, the timers function, the sweeper and the operator is needed by a request
that was made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.cli import run
from durastate.client import DurastateClient
from durastate.devstack import LocalStack
from durastate.devstack.iam import needed_grants
from durastate.store.dynamodb.claim_check import DATA_REF, context_prefix
from durastate.store.dynamodb.sync import DynamoDBStore
from durastate.transport.sqs import SqsTransport

from .conftest import synth_app
from .helpers import QUIET, FakeClock, executions, send, settle, start

pytestmark = pytest.mark.slow

DAY = 86400.0
PARTS = 27
PART_CHARS = 200_000  # one event's part: an SQS message holds 256 KB
GROW = "id: grow\ninitial: growing\nstates:\n  growing:\n    on:\n" + "".join(
    f"      p{i}: {{actions: [{{assign: {{p{i}: $event.text}}}}]}}\n" for i in range(PARTS)) + (
    "      nap: napping\n  napping:\n    after: {seconds: 30, target: growing, actions: [{assign: {naps: 1}}]}\n")
"""An execution that keeps each ``p<i>`` event's text as a context key: 27 of them make it 5.4 MB; a nap
is a timer the timers function fires (its hop), so it loads and commits the large execution too. It has
no final state: a top-level execution that finishes sends its whole context in its ``durastate.finished``
notice, an outbox entry the claim check does not cover (over 400 KB it cannot be committed), so the
operator terminates it instead."""


@pytest.fixture(scope="module")
def large_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_app(tmp_path_factory, "large", {"grow.yaml": GROW},
                     ["durastate:largeContexts=true", "durastate:retentionDays=30"])


@pytest.fixture()
def stack(large_template: Path) -> Iterator[LocalStack]:
    with LocalStack(large_template, port=0, clock=FakeClock(), retry_delay=0, environment=QUIET) as st:
        yield st


def text(i: int, mark: str = "") -> str:
    return (mark + chr(ord("a") + i % 26) * PART_CHARS)[:PART_CHARS]


def objects(stack: LocalStack, bucket: str) -> list[str]:
    got = stack.client("s3").list_objects_v2(Bucket=bucket, Prefix="contexts/")
    return [o["Key"] for o in got.get("Contents", [])]


def cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = run(argv)
    return code, capsys.readouterr().out


def test_a_context_past_5_mb_lives_in_s3_is_edited_read_whole_and_purged(
        stack: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert stack.iam is not None
    (bucket,) = [b.name for b in stack.resources.buckets.values()]
    assert "ContextBucketName" in stack.template["Outputs"]  # the stack says where large contexts are
    s3 = stack.client("s3")
    assert s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0][
        "ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]["BlockPublicAcls"]
    policy = stack.bucket_policies[bucket]  # resolved, not enforced: the local endpoint is plain HTTP
    assert [st["Condition"] for st in policy["Statement"]] == [{"Bool": {"aws:SecureTransport": "false"}}]
    assert {r for st in policy["Statement"] for r in st["Resource"]} == {
        f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"}

    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "big", "grow")
    for i in range(PARTS):
        send(sqs, q, "big", f"p{i}", {"text": text(i)})
    settle(stack)
    item = stack.client("dynamodb").get_item(TableName="durastate_executions", Key={"id": {"S": "big"}},
                                             ConsistentRead=True)["Item"]
    keys = objects(stack, bucket)
    assert "data" not in item and item[DATA_REF]["S"] == keys[0]  # the item holds the claim, not the JSON
    assert len(keys) == 1 and keys[0].startswith(context_prefix("big"))  # superseded objects were deleted
    assert s3.head_object(Bucket=bucket, Key=keys[0])["ContentLength"] > 5_000_000

    send(sqs, q, "big", "nap")
    settle(stack)
    assert isinstance(stack.clock, FakeClock)
    stack.clock.advance(31)  # the nap's timer is due: its hop reaches the timers function
    settle(stack)
    send(sqs, q, "big", "p3", {"text": "edited"})
    send(sqs, q, "big", "p5", {"text": text(5, "edited-")})
    settle(stack)
    assert len(objects(stack, bucket)) == 1 and objects(stack, bucket) != keys

    # The operator reads it whole: `durastate show` and the client, under the operator policy.
    (policy_id,) = [lid for lid in stack.iam.managed if lid.startswith("EngineOperatorPolicy")]
    operator = stack.iam.managed[policy_id]
    stack.iam.policies["operator"] = operator
    before = len(stack.iam.decisions)
    monkeypatch.delenv("DURASTATE_QUEUE_URL", raising=False)
    store_url = f"dynamodb://durastate?context_bucket={bucket}"
    with stack.iam.new_clients(), stack.iam.acting_as("operator"):
        code, out = cli(capsys, ["--store", store_url, "show", "big", "--json"])
    assert code == 0, capsys.readouterr().err
    shown: dict[str, Any] = json.loads(out)["context"]
    expected = {f"p{i}": text(i) for i in range(PARTS)} | {"p3": "edited", "p5": text(5, "edited-"), "naps": 1}
    assert shown == expected
    with stack.iam.acting_as("operator"):
        client = DurastateClient(SqsTransport(sqs, q), DynamoDBStore(
            stack.client("dynamodb"), prefix="durastate", context_bucket=bucket, s3=s3))
        got = client.get("big")
    assert got is not None and got.context == expected

    with stack.iam.new_clients(), stack.iam.acting_as("operator"):
        code, out = cli(capsys, ["--store", store_url, "terminate", "big"])
    assert code == 0, capsys.readouterr().err
    assert len(objects(stack, bucket)) == 1  # the terminated version's object replaced the last one
    stack.clock.advance(31 * DAY)  # retention purges what ended more than 30 days ago
    stack.run_function("sweeper")
    settle(stack)
    assert executions(stack.client("dynamodb"))["big"]["status"] == "purged"
    assert objects(stack, bucket) == []

    # `durastate purge` removes them too: a second execution past the threshold, terminated and purged.
    start(sqs, q, "big2", "grow")
    send(sqs, q, "big2", "p0", {"text": text(0)})
    send(sqs, q, "big2", "p1", {"text": text(1)})
    settle(stack)
    assert len(objects(stack, bucket)) == 1
    for argv in (["--store", store_url, "terminate", "big2"], ["--store", store_url, "purge", "--older-than", "0s"]):
        with stack.iam.new_clients(), stack.iam.acting_as("operator"):
            code, out = cli(capsys, argv)
        assert code == 0, (argv, out, capsys.readouterr().err)
    assert executions(stack.client("dynamodb"))["big2"]["status"] == "purged"
    assert objects(stack, bucket) == []

    decisions = stack.iam.decisions
    assert [d for d in decisions if not d.allowed and d.function != "operator"] == []
    # the operator's only denied request is the CreateTable the store tries first (the stack owns the tables)
    assert {d.action for d in decisions if not d.allowed} == {"dynamodb:CreateTable"}
    functions = {name: doc for name, doc in stack.iam.policies.items() if name != "operator"}
    needed = needed_grants(functions, [d for d in decisions if d.function != "operator"])
    s3_grants = {(g.function, g.action): bool(why) for g, why in needed.items() if g.action.startswith("s3:")}
    # Each S3 grant of the worker, the timers function and the sweeper is needed; the relay's are not used
    # here (it only creates executions, and the one created here is small).
    assert {k for k, used in s3_grants.items() if used} == {
        (fn, f"s3:{a}") for fn in ("worker", "timers") for a in ("GetObject", "PutObject", "DeleteObject")} | {
        ("sweeper", "s3:GetObject"), ("sweeper", "s3:DeleteObject"), ("sweeper", "s3:ListBucket")}
    assert {k for k, used in s3_grants.items() if not used} == {("relay", "s3:GetObject"), ("relay", "s3:PutObject")}
    made = [d for d in decisions[before:] if d.function == "operator"]
    operator_needed = {g.action for g, why in needed_grants({"operator": operator}, made).items() if why}
    assert {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"} <= operator_needed
