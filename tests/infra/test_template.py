"""The synthesized stack, resource by resource (aws_cdk.assertions over the real `cdk synth` output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from durastate.cdk.construct import HANDLERS, INDEX_GRANTS, TABLE_GRANTS
from durastate.cdk.schema import TABLES, TTL_ATTRIBUTE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tpl(template_json: dict[str, Any]) -> Template:
    return Template.from_json(template_json)


def _resources(template_json: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template_json["Resources"].items() if v["Type"] == kind}


def _logical_id(template_json: dict[str, Any], kind: str, **props: Any) -> str:
    for lid, res in _resources(template_json, kind).items():
        if all(res["Properties"].get(k) == v for k, v in props.items()):
            return lid
    raise AssertionError(f"no {kind} with {props}")


def _tables_by_name(template_json: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tables = _resources(template_json, "AWS::DynamoDB::Table").values()
    return {r["Properties"]["TableName"]: r for r in tables}


def _function_id(template_json: dict[str, Any], role: str) -> str:
    return _logical_id(template_json, "AWS::Lambda::Function", Handler=HANDLERS[role])


# ---- tables ------------------------------------------------------------------------------------------------
def test_seven_tables_with_the_store_keys_on_demand(tpl: Template, template_json: dict[str, Any]) -> None:
    tpl.resource_count_is("AWS::DynamoDB::Table", 7)
    assert not _resources(template_json, "AWS::DynamoDB::GlobalTable"), "TableV2 cannot deploy on LocalStack"
    for name, spec in TABLES.items():
        keys = [{"AttributeName": spec.partition[0], "KeyType": "HASH"}]
        if spec.sort:
            keys.append({"AttributeName": spec.sort[0], "KeyType": "RANGE"})
        tpl.has_resource_properties("AWS::DynamoDB::Table", {
            "TableName": f"durastate_{name}",
            "KeySchema": keys,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": Match.array_with([
                {"AttributeName": spec.partition[0], "AttributeType": spec.partition[1]}]),
        })


def test_pitr_only_on_executions_and_ttl_where_data_expires(template_json: dict[str, Any]) -> None:
    tables = _tables_by_name(template_json)
    for name, spec in TABLES.items():
        props = tables[f"durastate_{name}"]["Properties"]
        pitr = props.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled", False)
        assert pitr == spec.point_in_time_recovery, name
        ttl = props.get("TimeToLiveSpecification")
        assert (ttl == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}) if spec.ttl else ttl is None, name
    assert TABLES["executions"].point_in_time_recovery
    assert TABLES["processed"].ttl and TABLES["trace"].ttl


def test_streams_feed_the_relay_from_outbox_and_spawns(template_json: dict[str, Any]) -> None:
    tables = _tables_by_name(template_json)
    for name in TABLES:
        stream = tables[f"durastate_{name}"]["Properties"].get("StreamSpecification")
        if name in ("outbox", "spawns"):
            assert stream == {"StreamViewType": "NEW_IMAGE"}
        else:
            assert stream is None, name


def test_indexes_match_the_store(template_json: dict[str, Any]) -> None:
    tables = _tables_by_name(template_json)
    for name, spec in TABLES.items():
        declared = tables[f"durastate_{name}"]["Properties"].get("GlobalSecondaryIndexes", [])
        got = {g["IndexName"]: g for g in declared}
        assert set(got) == {i.name for i in spec.indexes}, name
        for index in spec.indexes:
            assert got[index.name]["KeySchema"][0] == {"AttributeName": index.partition[0], "KeyType": "HASH"}
            assert got[index.name]["Projection"]["ProjectionType"] == index.projection


def test_tables_are_retained_by_default(template_json: dict[str, Any]) -> None:
    for res in _resources(template_json, "AWS::DynamoDB::Table").values():
        assert res["DeletionPolicy"] == "Retain"


# ---- queues ------------------------------------------------------------------------------------------------
def test_event_queue_is_high_throughput_fifo_with_a_dlq(tpl: Template, template_json: dict[str, Any]) -> None:
    dlq = _logical_id(template_json, "AWS::SQS::Queue", QueueName="durastate-events-dlq.fifo")
    worker = template_json["Resources"][_function_id(template_json, "worker")]["Properties"]
    tpl.has_resource_properties("AWS::SQS::Queue", {
        "QueueName": "durastate-events.fifo",
        "FifoQueue": True,
        "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId",
        "SqsManagedSseEnabled": True,
        "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]}, "maxReceiveCount": 1000},
    })
    queue = template_json["Resources"][_logical_id(template_json, "AWS::SQS::Queue",
                                                   QueueName="durastate-events.fifo")]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    tpl.has_resource_properties("AWS::SQS::Queue", {
        "QueueName": "durastate-events-dlq.fifo", "FifoQueue": True, "SqsManagedSseEnabled": True,
        "MessageRetentionPeriod": 14 * 86400})


def test_both_queues_refuse_plain_http(template_json: dict[str, Any]) -> None:
    queues = set(_resources(template_json, "AWS::SQS::Queue"))
    protected: set[str] = set()
    for policy in _resources(template_json, "AWS::SQS::QueuePolicy").values():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            if st["Effect"] == "Deny" and st.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}:
                protected.update(q["Ref"] for q in policy["Properties"]["Queues"])
    assert protected == queues


# ---- functions and triggers --------------------------------------------------------------------------------
def test_functions_python312_arm64_with_the_layer(template_json: dict[str, Any]) -> None:
    layer = next(iter(_resources(template_json, "AWS::Lambda::LayerVersion")))
    for role in HANDLERS:
        props = template_json["Resources"][_function_id(template_json, role)]["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["Layers"] == [{"Ref": layer}]
        assert props["TracingConfig"] == {"Mode": "Active"}
        env = props["Environment"]["Variables"]
        for key in ("DURASTATE_TABLE_PREFIX", "DURASTATE_QUEUE_URL", "DURASTATE_DLQ_URL", "DURASTATE_EVENT_BUS_NAME",
                    "DURASTATE_DEFINITIONS_DIR"):
            assert key in env, (role, key)
        assert env["DURASTATE_TABLE_PREFIX"] == "durastate"


def test_worker_consumes_the_queue_with_partial_batch_responses(template_json: dict[str, Any]) -> None:
    queue = _logical_id(template_json, "AWS::SQS::Queue", QueueName="durastate-events.fifo")
    worker = {"Ref": _function_id(template_json, "worker")}
    mappings = [m["Properties"] for m in _resources(template_json, "AWS::Lambda::EventSourceMapping").values()
                if m["Properties"]["FunctionName"] == worker]
    assert len(mappings) == 1
    m = mappings[0]
    assert m["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert m["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 1 <= m["BatchSize"] <= 10


def test_relay_triggered_by_inserts_on_both_streams(template_json: dict[str, Any]) -> None:
    relay = {"Ref": _function_id(template_json, "relay")}
    sources = {}
    for m in _resources(template_json, "AWS::Lambda::EventSourceMapping").values():
        p = m["Properties"]
        if p["FunctionName"] == relay:
            sources[p["EventSourceArn"]["Fn::GetAtt"][0]] = p
    tables = {lid: r["Properties"]["TableName"]
              for lid, r in _resources(template_json, "AWS::DynamoDB::Table").items()}
    assert {tables[lid] for lid in sources} == {"durastate_outbox", "durastate_spawns"}
    for p in sources.values():
        patterns = [json.loads(f["Pattern"]) for f in p["FilterCriteria"]["Filters"]]
        assert patterns == [{"eventName": ["INSERT"]}]
        assert p["StartingPosition"] in ("TRIM_HORIZON", "LATEST")


def test_schedules_sweeper_every_minute_and_relay_backstop(template_json: dict[str, Any]) -> None:
    by_target = {}
    for rule in _resources(template_json, "AWS::Events::Rule").values():
        p = rule["Properties"]
        for t in p["Targets"]:
            by_target[t["Arn"]["Fn::GetAtt"][0]] = p["ScheduleExpression"]
    assert by_target[_function_id(template_json, "sweeper")] == "rate(1 minute)"
    assert by_target[_function_id(template_json, "relay")] == "rate(5 minutes)"
    permissions = _resources(template_json, "AWS::Lambda::Permission").values()
    assert {p["Properties"]["Principal"] for p in permissions} == {"events.amazonaws.com"}


def test_notification_bus_and_dlq_alarm(tpl: Template, template_json: dict[str, Any]) -> None:
    tpl.has_resource_properties("AWS::Events::EventBus", {"Name": "durastate-notifications"})
    dlq = _logical_id(template_json, "AWS::SQS::Queue", QueueName="durastate-events-dlq.fifo")
    tpl.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Namespace": "AWS/SQS",
        "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq, "QueueName"]}}],
        "Threshold": 1,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
    })


# ---- least privilege ---------------------------------------------------------------------------------------
def _statements(template_json: dict[str, Any], role: str) -> list[dict[str, Any]]:
    fn = template_json["Resources"][_function_id(template_json, role)]["Properties"]
    role_id = fn["Role"]["Fn::GetAtt"][0]
    out: list[dict[str, Any]] = []
    for policy in _resources(template_json, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    role_res = template_json["Resources"][role_id]["Properties"]
    assert not role_res.get("ManagedPolicyArns"), f"{role} has managed policies"
    return out


def _actions(st: dict[str, Any]) -> list[str]:
    return st["Action"] if isinstance(st["Action"], list) else [st["Action"]]


@pytest.mark.parametrize("role", sorted(HANDLERS))
def test_each_function_gets_exactly_its_table_actions(template_json: dict[str, Any], role: str) -> None:
    tables = {lid: r["Properties"]["TableName"].removeprefix("durastate_")
              for lid, r in _resources(template_json, "AWS::DynamoDB::Table").items()}
    granted: dict[str, set[str]] = {}
    indexes: dict[tuple[str, str], set[str]] = {}
    for st in _statements(template_json, role):
        assert st["Effect"] == "Allow"
        dynamo = [a for a in _actions(st) if a.startswith("dynamodb:")]
        assert "dynamodb:*" not in dynamo
        res0 = st["Resource"]
        stream = isinstance(res0, dict) and res0.get("Fn::GetAtt", ["", ""])[1] == "StreamArn"
        if not dynamo or st["Resource"] == "*" or stream:
            continue
        for res in st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]:
            if "Fn::GetAtt" in res:
                table = tables[res["Fn::GetAtt"][0]]
                granted.setdefault(table, set()).update(a.split(":")[1] for a in dynamo)
            else:  # {"Fn::Join": ["", [{"Fn::GetAtt": [table, "Arn"]}, "/index/due"]]}
                parts = res["Fn::Join"][1]
                key = (tables[parts[0]["Fn::GetAtt"][0]], parts[1].removeprefix("/index/"))
                assert "*" not in key[1]
                indexes.setdefault(key, set()).update(a.split(":")[1] for a in dynamo)
    assert granted == {t: set(a) for t, a in TABLE_GRANTS[role].items()}
    assert indexes == {k: set(a) for k, a in INDEX_GRANTS[role].items()}
    if role == "sweeper":
        assert "executions" not in granted, "the sweeper never reads executions"


def test_queue_bus_and_wildcard_grants(template_json: dict[str, Any]) -> None:
    queue = _logical_id(template_json, "AWS::SQS::Queue", QueueName="durastate-events.fifo")
    dlq = _logical_id(template_json, "AWS::SQS::Queue", QueueName="durastate-events-dlq.fifo")
    timers = _logical_id(template_json, "AWS::SQS::Queue", QueueName="durastate-timers")

    def sends(role: str) -> set[str]:
        return {st["Resource"]["Fn::GetAtt"][0] for st in _statements(template_json, role)
                if "sqs:SendMessage" in _actions(st)}

    # The worker dead-letters and hops the timers it arms (never enqueues events); the timers function
    # applies due timeouts as the worker does (and sends back a hop that came early).
    assert sends("worker") == {dlq, timers}
    assert sends("relay") == {queue, timers}
    assert sends("sweeper") == {queue, timers}
    assert sends("timers") == {dlq, timers}
    for role in HANDLERS:
        for st in _statements(template_json, role):
            if st["Resource"] == "*":
                allowed = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
                if role == "relay":
                    allowed.add("dynamodb:ListStreams")
                assert set(_actions(st)) <= allowed, (role, st)
    puts = [st for st in _statements(template_json, "relay") if "events:PutEvents" in _actions(st)]
    assert len(puts) == 1 and "Fn::GetAtt" in puts[0]["Resource"]
    assert not any("events:PutEvents" in _actions(st) for r in ("worker", "sweeper")
                   for st in _statements(template_json, r))


# ---- assets ------------------------------------------------------------------------------------------------
def _asset_dir(cloud_assembly: Path, template_json: dict[str, Any], lid: str) -> Path:
    return cloud_assembly / str(template_json["Resources"][lid]["Metadata"]["aws:asset:path"])


def test_functions_carry_only_their_handler_and_the_definitions(cloud_assembly: Path,
                                                                 template_json: dict[str, Any]) -> None:
    for role in HANDLERS:
        folder = _asset_dir(cloud_assembly, template_json, _function_id(template_json, role))
        top = {p.name for p in folder.iterdir()}
        assert f"{role}.py" in top and "definitions" in top
        assert "durastate" not in top, "the engine comes from the layer"
        assert {p.suffix for p in (folder / "definitions").iterdir()} & {".yaml", ".yml", ".json"}


def test_layer_holds_the_engine_built_for_arm64(cloud_assembly: Path, template_json: dict[str, Any]) -> None:
    layer = next(iter(_resources(template_json, "AWS::Lambda::LayerVersion")))
    folder = _asset_dir(cloud_assembly, template_json, layer) / "python"
    assert (folder / "durastate" / "__init__.py").is_file()
    assert (folder / "durastate" / "store" / "dynamodb" / "sync.py").is_file()
    cores = list((folder / "pydantic_core").glob("_pydantic_core.cpython-312-*.so"))
    assert cores and "aarch64" in cores[0].name
    assert not (folder / "boto3").exists(), "boto3 comes with the Lambda runtime"
    assert not (folder / "bin").exists()


# ---- checks ------------------------------------------------------------------------------------------------
def test_cdk_nag_reports_nothing_unacknowledged(cloud_assembly: Path, template_json: dict[str, Any]) -> None:
    """The app runs AwsSolutions as a validation plugin (a finding fails the synth); every acknowledgment
    is written into the template with its reason."""
    report = json.loads((cloud_assembly / "validation-report.json").read_text())
    failures = [v for r in report["pluginReports"] for v in r.get("violations", [])]
    assert failures == []
    acks = [rule for res in template_json["Resources"].values()
            for rule in res.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])]
    assert acks, "the AwsSolutions pack did not run"
    for rule in acks:
        assert rule["id"].startswith("AwsSolutions-")
        assert len(rule["reason"]) > 30, rule


def test_cfn_lint_reports_no_error(cloud_assembly: Path) -> None:
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    proc = subprocess.run([str(cfn_lint), str(cloud_assembly / "DurastateStack.template.json")],
                          capture_output=True, text=True, check=False)
    # cfn-lint's exit code is a bit mask: 2 = errors (4 = warnings, 8 = informational).
    assert proc.returncode & 2 == 0 and proc.returncode & 1 == 0, proc.stdout + proc.stderr
