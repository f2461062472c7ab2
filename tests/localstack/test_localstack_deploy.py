"""The documented LocalStack path, for real: ``cdklocal bootstrap`` and ``cdklocal deploy`` of the stack,
with the engine bundled into each function (``-c durastate:bundleLayer=true``: LocalStack community runs no
Lambda layers), on LocalStack 4.14 community — then an order driven through the FIFO queue with plain
``send_message``, start → payment child → fork/join of the fulfilment regions → fulfilled.

Which LocalStack, and the two stand-ins the host run needs (DynamoDB from LocalStack's moto, Lambda
execution environments as host processes given the function's code and no layer): see
:mod:`tests.localstack.harness`. Everything else is LocalStack's own, CloudFormation and the event source
mapping pollers included. No test here waits for a schedule: the order needs none; the schedules are
checked as the rules and targets EventBridge holds.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from durastate.cdk.construct import DEFAULT_MAX_RECEIVE_COUNT
from durastate.devstack import parse_template
from tests.devstack.helpers import count, executions

from .harness import ACCOUNT, REGION, cdklocal, cdklocal_env, lambda_architecture, localstack, wait_for

pytestmark = pytest.mark.slow

STACK = "DurastateStack"
TABLES = ("executions", "outbox", "spawns", "timers", "processed", "counters", "trace")


@dataclass
class Deployed:
    endpoint: str
    outputs: dict[str, str]
    template: dict[str, Any]

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id="test", aws_secret_access_key="test")

    def function_arns(self) -> dict[str, str]:
        """``worker``/``relay``/``sweeper``/``timers`` → the deployed function's ARN."""
        out = {}
        for fn in self.client("lambda").list_functions()["Functions"]:
            service = fn.get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME", "")
            if service.startswith("durastate-"):
                out[service.removeprefix("durastate-")] = fn["FunctionArn"]
        return out


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    work = tmp_path_factory.mktemp("localstack")
    started = time.monotonic()
    with localstack(work) as endpoint:
        print(f"\nLocalStack up at {endpoint} after {time.monotonic() - started:.0f}s")
        env = cdklocal_env(endpoint)
        out = work / "cdk.out"
        cdklocal(["bootstrap", f"aws://{ACCOUNT}/{REGION}", "--no-notices"], env)
        print(f"cdklocal bootstrap done after {time.monotonic() - started:.0f}s")
        cdklocal(["deploy", STACK, "--require-approval", "never", "--no-notices", "-o", str(out),
                  "--outputs-file", str(work / "outputs.json"),
                  "-c", "durastate:bundleLayer=true", "-c", "durastate:removalPolicy=destroy",
                  "-c", f"durastate:architecture={lambda_architecture()}"], env)
        print(f"cdklocal deploy done after {time.monotonic() - started:.0f}s")
        outputs = json.loads((work / "outputs.json").read_text())[STACK]
        template = json.loads((out / f"{STACK}.template.json").read_text())
        yield Deployed(endpoint, outputs, template)


def test_the_template_deployed_what_it_declares(deployed: Deployed) -> None:
    ddb, sqs, lam = deployed.client("dynamodb"), deployed.client("sqs"), deployed.client("lambda")
    res = parse_template(deployed.template)
    assert {t.name for t in res.tables.values()} == {f"durastate_{n}" for n in TABLES}
    for t in res.tables.values():
        desc = ddb.describe_table(TableName=t.name)["Table"]
        assert desc["KeySchema"] == t.key_schema, t.name
        assert bool(desc.get("StreamSpecification", {}).get("StreamEnabled")) == (t.stream_view_type is not None)
        assert {g["IndexName"] for g in desc.get("GlobalSecondaryIndexes", [])} == {
            g["IndexName"] for g in t.global_secondary_indexes}
        indexes = [g["IndexName"] for g in t.global_secondary_indexes]
        print(f"table  {t.name}: keys {[k['AttributeName'] for k in t.key_schema]}"
              f"{', stream' if t.stream_view_type else ''}{', indexes ' + ','.join(indexes) if indexes else ''}")

    events = sqs.get_queue_attributes(QueueUrl=deployed.outputs["QueueUrl"], AttributeNames=["All"])["Attributes"]
    assert (events["FifoQueue"], events["DeduplicationScope"], events["FifoThroughputLimit"]) == (
        "true", "messageGroup", "perMessageGroupId")
    redrive = json.loads(events["RedrivePolicy"])
    assert redrive["maxReceiveCount"] == DEFAULT_MAX_RECEIVE_COUNT
    assert redrive["deadLetterTargetArn"].endswith(":durastate-events-dlq.fifo")
    dlq = sqs.get_queue_attributes(QueueUrl=deployed.outputs["DeadLetterQueueUrl"],
                                   AttributeNames=["FifoQueue"])["Attributes"]
    assert dlq["FifoQueue"] == "true"
    sqs.get_queue_attributes(QueueUrl=deployed.outputs["TimersQueueUrl"], AttributeNames=["QueueArn"])
    print(f"queues {events['QueueArn']} (redrive to the DLQ after {redrive['maxReceiveCount']} receives), "
          "the DLQ, the timers queue")

    arns = deployed.function_arns()
    assert set(arns) == {"worker", "relay", "sweeper", "timers"}
    for name, arn in arns.items():
        config = lam.get_function_configuration(FunctionName=arn)
        assert config["Runtime"] == "python3.12" and not config.get("Layers"), (name, config.get("Layers"))
        assert config["CodeSize"] > 1_000_000, (name, config["CodeSize"])  # the handler alone is a few kB
    print(f"functions {sorted(arns)}: python3.12, no layers, the engine bundled into each one's code")

    mappings = lam.list_event_source_mappings()["EventSourceMappings"]
    by_function: dict[str, list[dict[str, Any]]] = {}
    for m in mappings:
        by_function.setdefault(m["FunctionArn"], []).append(m)
    for name, queue in (("worker", "durastate-events.fifo"), ("timers", "durastate-timers")):
        (sqs_mapping,) = by_function[arns[name]]
        assert sqs_mapping["EventSourceArn"].endswith(f":{queue}")
        assert sqs_mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert sqs_mapping["State"] == "Enabled"
        print(f"mapping {queue} -> {name}: batch {sqs_mapping['BatchSize']}, {sqs_mapping['FunctionResponseTypes']}")
    streams = sorted(m["EventSourceArn"].split("/")[1] for m in by_function[arns["relay"]])
    assert streams == ["durastate_outbox", "durastate_spawns"]
    for m in by_function[arns["relay"]]:
        assert m["StartingPosition"] == "TRIM_HORIZON" and m["State"] == "Enabled"
        assert json.loads(m["FilterCriteria"]["Filters"][0]["Pattern"]) == {"eventName": ["INSERT"]}
    print(f"mapping streams of {streams} -> relay: INSERT only")

    bridge = deployed.client("events")
    rules = {r["ScheduleExpression"]: r for r in bridge.list_rules()["Rules"] if "ScheduleExpression" in r}
    targets = {expr: [t["Arn"] for t in bridge.list_targets_by_rule(Rule=r["Name"])["Targets"]]
               for expr, r in rules.items()}
    assert targets == {"rate(1 minute)": [arns["sweeper"]], "rate(5 minutes)": [arns["relay"]]}
    assert all(r["State"] == "ENABLED" for r in rules.values())
    print("schedules rate(1 minute) -> sweeper, rate(5 minutes) -> relay")
    assert bridge.describe_event_bus(Name="durastate-notifications")["Name"] == "durastate-notifications"

    topic = deployed.outputs["AlarmTopicArn"]
    assert deployed.client("sns").get_topic_attributes(TopicArn=topic)["Attributes"]["TopicArn"] == topic
    (alarm,) = deployed.client("cloudwatch").describe_alarms()["MetricAlarms"]
    assert alarm["AlarmActions"] == [topic] and alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    print(f"alarm {alarm['AlarmName']} -> {topic}")


def _send(deployed: Deployed, target: str, name: str, data: dict[str, Any] | None = None,
          event_id: str | None = None) -> None:
    """One event in the wire format, with a plain ``send_message`` (``MessageGroupId`` = the execution)."""
    eid = event_id or uuid.uuid4().hex
    body = json.dumps({"target_id": target, "event": {"id": eid, "name": name, "data": data or {}}})
    deployed.client("sqs").send_message(QueueUrl=deployed.outputs["QueueUrl"], MessageBody=body,
                                        MessageGroupId=target, MessageDeduplicationId=eid)


def _queue_depth(deployed: Deployed, url: str) -> int:
    attrs = deployed.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return sum(int(v) for v in attrs.values())


def test_an_order_runs_through_the_fifo_queue_to_fulfilled(deployed: Deployed) -> None:
    ddb = deployed.client("dynamodb")

    def state(**want: str) -> dict[str, dict[str, Any]] | None:
        exes = executions(ddb)
        ok = all(eid in exes and (exes[eid].get("active_path") == path or exes[eid].get("outcome") == path)
                 for eid, path in want.items())
        return exes if ok else None

    _send(deployed, "o1", "durastate.start", {"definition_id": "order", "context": {}}, event_id="o1:start")
    _send(deployed, "o1", "add_item", {"price": 30})
    _send(deployed, "o1", "submit")
    wait_for(lambda: state(o1="processing.payment", **{"o1~1": "pending"}),
             "the order to invoke its payment child", timeout=90)
    print("o1 processing.payment; child o1~1 (payment) created by the worker")

    _send(deployed, "o1~1", "authorize", {"receipt": "R-1"})
    regions = {"o1~2": "processing.fulfilment.packing.picking", "o1~3": "processing.fulfilment.shipping.awaiting_label"}
    exes = wait_for(lambda: state(o1="processing.fulfilment", **regions),
                    "the payment's outcome to reach the order and its regions to be spawned", timeout=90)
    assert exes["o1~1"]["status"] == "finished"
    print("o1~1 paid; o1 processing.fulfilment; regions o1~2 (packing), o1~3 (shipping) spawned by the relay")

    _send(deployed, "o1", "picked")
    _send(deployed, "o1", "label_printed", {"tracking": "T-1"})
    exes = wait_for(lambda: state(o1="fulfilled"), "the order to be fulfilled", timeout=90)
    order = exes["o1"]
    assert (order["status"], order["outcome"]) == ("finished", "fulfilled")
    assert order["context"]["receipt"] == "R-1" and order["context"]["tracking"] == "T-1"
    assert all(exes[c]["status"] == "finished" for c in ("o1~1", "o1~2", "o1~3"))
    print(f"o1 {order['status']} {order['outcome']}: receipt {order['context']['receipt']}, "
          f"tracking {order['context']['tracking']}; children {[exes[c]['outcome'] for c in ('o1~1', 'o1~2', 'o1~3')]}")

    # Nothing left behind: the relay drained the outbox and the spawn intents, the worker deleted every
    # message it applied, and nothing was dead-lettered.
    wait_for(lambda: all(count(ddb, f"durastate_{t}") == 0 for t in ("outbox", "spawns")),
             "the outbox and spawns tables to be drained", timeout=60)
    wait_for(lambda: _queue_depth(deployed, deployed.outputs["QueueUrl"]) == 0,
             "the event queue to be empty", timeout=60)
    assert _queue_depth(deployed, deployed.outputs["DeadLetterQueueUrl"]) == 0
    dead = deployed.client("sqs").receive_message(QueueUrl=deployed.outputs["DeadLetterQueueUrl"],
                                                  MaxNumberOfMessages=10).get("Messages", [])
    assert dead == []
    print("event queue empty, DLQ empty, outbox and spawns drained")

