"""Least privilege, checked: every request the deployed functions make is decided against their roles.

The stack here is synthesized by the real ``cdk synth`` with every optional path on — retention, a
``schedules:`` file, a Lambda task function, the trace — and run on the no-Docker local stack, which
decides each request of each function (and of its event source mappings) against that function's role
policy in the template (:mod:`durastate.devstack.iam`). One test drives every path the local-stack tests
drive: commits, the relay on its streams and its backstop, region children, an invoked child, a Lambda
task, a notification to EventBridge, timers by their SQS hop and by the sweep, a schedule, retention, a
poison message to the DLQ. It asserts that nothing was denied, and then, for **each grant** of each role
(each action on each resource), that the policy without it denies at least one request that was made: each
role allows what its code calls, and nothing it does not.

A few grants are used by AWS's services on the function's behalf, not by anything that runs here; they are
listed in :data:`SERVICE_GRANTS` with the reason, and the test checks that they are still in the template.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.cdk.construct import operator_policy
from durastate.cli import run
from durastate.devstack import LocalStack
from durastate.devstack.iam import grants_of, needed_grants
from durastate.engine.ids import TIMEOUT

from .conftest import BUSY, ROOT, charge_card
from .helpers import QUIET, FakeClock, drain_queue, executions, send, settle, start

pytestmark = pytest.mark.slow

DAY = 86400.0

#: (action, what the resource is) of grants that AWS's services use with the function's role, and that no
#: request made here needs. Each is checked to be in the template, so this list cannot go stale.
SERVICE_GRANTS: dict[str, str] = {
    "logs:CreateLogStream": "Lambda writes the function's output to its own log group",
    "logs:PutLogEvents": "Lambda writes the function's output to its own log group",
    "xray:PutTraceSegments": "the X-Ray daemon sends the active tracing's segments (off locally)",
    "xray:PutTelemetryRecords": "the X-Ray daemon reports its own telemetry",
    "sqs:GetQueueAttributes": "the SQS event source mapping reads its queue's attributes; the local one "
                              "receives by URL",
    "sqs:ChangeMessageVisibility": "granted by CDK's SQS event source with the consume grants (the local "
                                   "mapping calls it only when a test shortens a failed record's wait)",
    "sqs:GetQueueUrl": "granted by CDK's SQS event source with the consume grants; the mapping is given the "
                       "queue's ARN",
    "dynamodb:ListStreams": "the DynamoDB stream event source mapping lists streams; the local one reads the "
                            "stream ARN from the template",
}


@pytest.fixture()
def stack(full_template: Path) -> Iterator[LocalStack]:
    with LocalStack(full_template, port=0, clock=FakeClock(), retry_delay=0, environment=QUIET,
                    task_functions={"charge-card": charge_card}) as st:
        yield st


def rids(stack: LocalStack, execution_id: str) -> int:
    """How many recent event ids the execution item holds (past 24 they spill to ``processed``)."""
    item = stack.client("dynamodb").get_item(TableName="durastate_executions", Key={"id": {"S": execution_id}},
                                             ConsistentRead=True)["Item"]
    return len(item.get("rids", {}).get("L", []))


def incs(stack: LocalStack, execution_id: str, n: int) -> list[str]:
    return [send(stack.client("sqs"), stack.queue_url, execution_id, "inc") for _ in range(n)]


def fill(stack: LocalStack, execution_id: str) -> None:
    """Apply events until the item holds as many recent ids as it keeps (24 at most, fewer when they would
    cost the item another write unit): the next event it applies spills them."""
    most = n = rids(stack, execution_id)
    while n >= most:
        most = n
        incs(stack, execution_id, 1)
        settle(stack)
        n = rids(stack, execution_id)
    incs(stack, execution_id, most - n)
    settle(stack)
    assert rids(stack, execution_id) == most


def drive_dedupe_paths(stack: LocalStack, clock: FakeClock) -> None:
    """The dedupe marks and the trace ring, for the worker and the timers function: ids spilled to the
    ``processed`` table in chunks and a duplicate found there; an execution item as a durastate before
    spill filters wrote it (single marks, read and written beside the item); a ring past its 200 steps."""
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    start(sqs, q, "busy-1", "busy")
    first = incs(stack, "busy-1", 205)[0]  # spills, and drops the oldest trace steps
    start(sqs, q, "busy-2", "busy")
    incs(stack, "busy-2", 2)
    settle(stack)
    # a duplicate of a spilled id: the filter cannot rule it out, the chunks are read
    sqs.send_message(QueueUrl=q, MessageGroupId="busy-1", MessageDeduplicationId=f"{first}-again",
                     MessageBody=json.dumps({"target_id": "busy-1", "event": {"id": first, "name": "inc"}}))
    ddb.update_item(TableName="durastate_executions", Key={"id": {"S": "busy-2"}}, UpdateExpression="REMOVE spill")
    fill(stack, "busy-2")  # (it spills once on the way, as single marks)
    fill(stack, "busy-1")  # both full: each timeout spills them (a chunk; single marks)
    settle(stack)
    invoker = stack._timers_invoker  # the hops it holds until due
    (hop,) = [m["Body"] for m in invoker.held.values() if '"busy-1"' in m["Body"]]
    clock.advance(121)  # both timeouts, applied by the timers function
    settle(stack)
    incs(stack, "busy-1", 25)  # spills the timeout's id
    settle(stack)
    sqs.send_message(QueueUrl=stack.timers_queue_url, MessageBody=hop)  # the same hop again: a duplicate
    settle(stack)
    clock.advance(61)  # the second timeouts: the legacy item's marks are read with it
    settle(stack)
    exes = executions(ddb)
    assert exes["busy-1"]["context"]["n"] >= 230 and exes["busy-1"]["status"] == "finished"
    assert exes["busy-2"]["status"] == "finished"


def drive_every_path(stack: LocalStack, clock: FakeClock) -> None:
    """What the local-stack tests drive, on one stack: each path makes the requests it makes on AWS."""
    sqs, q = stack.client("sqs"), stack.queue_url
    assert executions(stack.client("dynamodb")) == {}  # a fresh deployment: nothing an earlier stack left
    drive_dedupe_paths(stack, clock)
    for oid in ("paid", "expires", "abandoned"):
        start(sqs, q, oid)
        send(sqs, q, oid, "add_item", {"price": 30})
    send(sqs, q, "paid", "submit")
    send(sqs, q, "expires", "submit")
    start(sqs, q, "task-1", "charge")  # the relay invokes the Lambda task
    start(sqs, q, "note-1", "notify")  # an untargeted send: the relay publishes it on the bus
    start(sqs, q, "fork-1", "fork")  # region children whose first commits emit, arm and spawn
    start(sqs, q, "tick-1", "tick")  # timeouts that emit, arm and spawn
    sqs.send_message(QueueUrl=q, MessageBody='{"target_id": "p1", "event": {"name": 42}}',
                     MessageGroupId="p1", MessageDeduplicationId="poison-1")  # to the DLQ
    assert stack.timers_queue_url is not None
    ghost = {"target_id": "ghost", "event": {"id": "ghost-timeout", "name": TIMEOUT,
                                             "data": {"path": "cart", "fire_at": clock.now}}}
    sqs.send_message(QueueUrl=stack.timers_queue_url, MessageBody=json.dumps(ghost))  # can never apply: DLQ
    settle(stack)
    send(sqs, q, "paid~1", "authorize", {"receipt": "R-1"})  # the invoked child ends; regions spawn
    settle(stack)
    send(sqs, q, "paid", "picked")
    send(sqs, q, "paid", "label_printed", {"tracking": "T-1"})
    settle(stack)
    paid = executions(stack.client("dynamodb"))["paid"]  # the worker cancelled its cart's timer on submit
    assert (paid["status"], paid["outcome"], paid["context"]["tracking"]) == ("finished", "fulfilled", "T-1")
    clock.advance(31)
    settle(stack)
    clock.advance(31)
    settle(stack)
    clock.advance(901)  # the payment of "expires" times out by its hop (the timers function)
    settle(stack)
    clock.advance(3600)  # the abandoned cart's hour, overdue at the sweep: the sweeper fires it
    settle(stack)
    outcomes = {e: x["outcome"] for e, x in executions(stack.client("dynamodb")).items()
                if e in ("paid", "expires", "abandoned")}
    assert outcomes == {"paid": "fulfilled", "expires": "payment_failed", "abandoned": "abandoned"}
    start(sqs, q, "later", "order")
    settle(stack)
    clock.advance(3000)  # its cart's hour comes within 15 minutes: the sweeper sends it the hop
    settle(stack)
    clock.advance(601)
    settle(stack)
    stack.run_function("relay")  # the backstop, on an empty outbox
    clock.advance(31 * DAY)  # retention purges what ended more than 30 days ago
    settle(stack)
    stack.run_function("sweeper")
    settle(stack)


def made(stack: LocalStack) -> str:
    """What each function asked for (action on resource: how many times), for a failure's message."""
    assert stack.iam is not None
    counts: dict[tuple[str, str, str, str], int] = {}
    for d in stack.iam.decisions:
        key = (d.function, d.operation, d.action, d.resource.rsplit(":", 1)[-1])
        counts[key] = counts.get(key, 0) + 1
    return "requests made:\n" + "\n".join(f"  {n:5d} {' '.join(k)}" for k, n in sorted(counts.items()))


def test_every_request_is_allowed_and_every_grant_is_needed(stack: LocalStack) -> None:
    assert stack.iam is not None
    clock = stack.clock
    assert isinstance(clock, FakeClock)
    drive_every_path(stack, clock)
    decisions = stack.iam.decisions
    assert [d for d in decisions if not d.allowed] == []

    exes = executions(stack.client("dynamodb"))
    assert {exes[e]["status"] for e in ("paid", "abandoned", "later", "fork-1", "tick-1")} == {"purged"}
    assert any(e.startswith("hourly~") for e in exes)  # the schedule started its execution
    assert [name for name, _ in stack.task_functions.calls] == ["charge-card"]
    assert len(drain_queue(stack.client("sqs"), stack.dlq_url)) == 2  # the poison message, the bad hop

    documents = stack.iam.policies
    needed = needed_grants(documents, decisions)
    unneeded = sorted((g.function, g.action, g.resource) for g, why in needed.items()
                      if not why and g.action not in SERVICE_GRANTS)
    assert unneeded == [], "grants no request needs:\n" + "\n".join(map(str, unneeded)) + "\n" + made(stack)
    service = {g.action for g in grants_of(documents) if g.action in SERVICE_GRANTS}
    assert service == set(SERVICE_GRANTS)  # the exemptions are real grants of the template
    assert {g.function for g in needed} == {"worker", "relay", "sweeper", "timers"}


# The denied sweep raises before it adds a metric, so Powertools warns that the failed invocation published
# none: expected here, as on AWS for any invocation that fails.
@pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
def test_a_missing_grant_is_denied_as_aws_denies_it(full_template: Path) -> None:
    """Without the sweeper's Scan of the timers table, its sweep fails with AWS's AccessDeniedException."""
    template: dict[str, Any] = json.loads(full_template.read_text())
    resources = template["Resources"]
    (sweeper,) = [r["Properties"]["Role"]["Fn::GetAtt"][0] for r in resources.values()
                  if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "sweeper.handler"]
    for res in resources.values():
        if res["Type"] == "AWS::IAM::Policy" and {"Ref": sweeper} in res["Properties"]["Roles"]:
            for st in res["Properties"]["PolicyDocument"]["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                st["Action"] = [a for a in actions if a != "dynamodb:Scan"] or ["dynamodb:DescribeLimits"]
    from botocore.exceptions import ClientError

    with LocalStack(template, asset_root=full_template.parent, port=0, clock=FakeClock(), retry_delay=0,
                    environment=QUIET, task_functions={"charge-card": charge_card}, iam=True) as st:
        with pytest.raises(ClientError) as denied:
            st.run_function("sweeper")
        error = denied.value.response["Error"]
        assert error["Code"] == "AccessDeniedException"
        assert "not authorized to perform: dynamodb:Scan on resource: arn:aws:dynamodb:" in error["Message"]
        assert st.iam is not None and [
            (d.function, d.action) for d in st.iam.decisions if not d.allowed] == [("sweeper", "dynamodb:Scan")]


def cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = run(argv)
    return code, capsys.readouterr().out


def test_the_operator_policy_allows_the_cli_commands_and_each_of_its_grants_is_needed(
        stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's AWS commands under the construct's operator policy — the one docs/aws-deploy.md prints
    (``operator_policy``) — are allowed, each of its grants is needed by one of them, and the only request
    denied is the ``CreateTable`` the store tries first (it takes the denial to mean the stack owns them)."""
    assert stack.iam is not None
    (policy_id,) = [lid for lid in stack.iam.managed if lid.startswith("EngineOperatorPolicy")]
    operator = stack.iam.managed[policy_id]
    generated = operator_policy("durastate", stack.region, stack.iam.account)
    assert set(grants_of({"o": operator})) == set(grants_of({"o": generated}))  # the same grants, however written
    stack.iam.policies["operator"] = operator
    sqs, q = stack.client("sqs"), stack.queue_url
    for oid in ("o1", "o2", "o3"):
        start(sqs, q, oid)
        send(sqs, q, oid, "add_item", {"price": 5})
    start(sqs, q, "f1", "fragile")
    send(sqs, q, "f1", "go")  # fails: redrive
    start(sqs, q, "long", "busy")
    incs(stack, "long", 200)  # 200 trace steps: the ring drops one at terminate's commit
    send(sqs, q, "ghost", "submit")  # two dead letters: one replayed, one dropped
    send(sqs, q, "ghost", "submit")
    settle(stack)
    start(sqs, q, "note-1", "notify")
    stack.poll_worker()  # committed, its notification not yet relayed: `show` lists it
    monkeypatch.delenv("DURASTATE_QUEUE_URL", raising=False)  # an operator's shell: no function environment
    monkeypatch.delenv("DURASTATE_DLQ_URL", raising=False)
    v2 = tmp_path / "v2"  # the order's next version: its cart is a basket (migrate renames the armed timer)
    v2.mkdir()
    text = (ROOT / "examples" / "order.yaml").read_text()
    (v2 / "order.yaml").write_text(text.replace("initial: cart", "initial: basket").replace("  cart:", "  basket:"))
    shutil.copyfile(ROOT / "examples" / "payment.yaml", v2 / "payment.yaml")
    (v2 / "busy.yaml").write_text(BUSY)  # its search field types `list --where`

    store, dlq = "dynamodb://durastate", stack.dlq_url
    code, out = cli(capsys, ["dead-letters", "list", "--dlq-url", dlq, "--json"])
    letters = [d["id"] for d in json.loads(out)["items"]]
    version = json.loads(cli(capsys, ["--store", store, "show", "o1", "--json"])[1])["definition_version"]
    before = len(stack.iam.decisions)
    for argv in (
        ["--store", store, "list"],
        ["--store", store, "list", "--status", "failed"],
        ["--store", store, "--definitions", str(v2), "list", "--where", "n=200"],
        ["--store", store, "show", "note-1"],
        ["cancel", "o1", "--queue-url", q],
        ["suspend", "o2", "--queue-url", q],
        ["resume", "o2", "--queue-url", q],
        ["--store", store, "terminate", "o3"],
        ["--store", store, "terminate", "long"],
        ["--store", store, "redrive", "f1"],
        ["--store", store, "redrive", "--definition", "fragile"],
        ["--store", store, "--definitions", str(v2), "migrate", "--definition", "order", "--from", version,
         "--map", "cart=basket", "--id", "o1", "--id", "o2", "--status", "running"],
        ["--store", store, "purge", "--older-than", "0s"],
        ["dead-letters", "list", "--dlq-url", dlq],
        ["dead-letters", "show", letters[0], "--dlq-url", dlq],
        ["dead-letters", "replay", "--id", letters[0], "--dlq-url", dlq, "--force"],
        ["dead-letters", "drop", letters[1], "--dlq-url", dlq],
    ):
        with stack.iam.new_clients(), stack.iam.acting_as("operator"):
            code, out = cli(capsys, argv)
        assert code == 0, (argv, out, capsys.readouterr().err)
    capsys.readouterr()
    with stack.iam.new_clients(), stack.iam.acting_as("operator"):  # a mistyped id: one line, nothing moved
        code = run(["--store", store, "--definitions", str(v2), "migrate", "--definition", "order", "--from",
                    version, "--map", "cart=basket", "--id", "nope"])
    assert code == 1 and "no execution 'nope'" in capsys.readouterr().err
    made = [d for d in stack.iam.decisions[before:] if d.function == "operator"]
    assert {d.action for d in made if not d.allowed} == {"dynamodb:CreateTable"}
    needed = needed_grants({"operator": operator}, made)
    assert sorted((g.action, g.resource) for g, why in needed.items() if not why) == []
    exes = executions(stack.client("dynamodb"))
    assert exes["o1"]["active_path"] == exes["o2"]["active_path"] == "basket"  # migrated: the --id selection
    assert exes["o1"]["definition_version"] != version
    assert exes["long"]["status"] == "purged"  # terminated, then purged
