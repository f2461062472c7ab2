"""What the synthesized CloudFormation template describes, read into plain dataclasses.

Why this exists: the local stack creates exactly what ``cdk deploy`` would, so everything it needs — every
``AWS::DynamoDB::Table`` with its keys, indexes, stream and TTL; every ``AWS::SQS::Queue`` with its FIFO
attributes and redrive policy; every ``AWS::Events::EventBus``; every ``AWS::S3::Bucket`` with its encryption,
public access block and ``AWS::S3::BucketPolicy``; the Lambda functions with their asset
folder, handler, timeout and (unresolved) environment; their SQS and DynamoDB stream event source
mappings; and the ``rate(...)`` schedules — is read from ``cdk.out/DurastateStack.template.json`` here,
with no AWS call and no boto3. :mod:`durastate.devstack.stack` turns the result into resources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durastate.devstack.errors import LocalStackError

__all__ = [
    "DEFAULT_TEMPLATE",
    "TASK_ROOT",
    "BucketDef",
    "FunctionDef",
    "QueueDef",
    "Schedule",
    "SqsTrigger",
    "StackResources",
    "StreamTrigger",
    "TableDef",
    "parse_template",
    "read_template",
    "referenced_id",
]

DEFAULT_TEMPLATE = Path("cdk.out") / "DurastateStack.template.json"
TASK_ROOT = "/var/task"
"""Where Lambda unpacks a function's code; the template's environment refers to paths under it."""
_RATE = re.compile(r"rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class TableDef:
    logical_id: str
    name: str
    key_schema: list[dict[str, str]]
    attribute_definitions: list[dict[str, str]]
    stream_view_type: str | None = None
    ttl_attribute: str | None = None
    global_secondary_indexes: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class QueueDef:
    logical_id: str
    name: str
    attributes: dict[str, str]
    dead_letter_logical_id: str | None = None
    max_receive_count: int | None = None


@dataclass(frozen=True)
class BucketDef:
    """An S3 bucket: its name (CloudFormation's generated one when the template names none, made here from
    the logical id), and the properties moto keeps — encryption, public access block, the bucket policy
    (unresolved: it refers to the bucket itself)."""

    logical_id: str
    name: str
    encryption: dict[str, Any] | None = None
    public_access_block: dict[str, Any] | None = None
    policy: dict[str, Any] | None = None


@dataclass(frozen=True)
class FunctionDef:
    logical_id: str
    handler: str  # "worker.handler"
    code_dir: Path | None  # the asset folder in cdk.out
    environment: dict[str, Any]  # unresolved template values
    timeout: int = 3

    @property
    def module(self) -> str:
        return self.handler.rsplit(".", 1)[0]

    @property
    def role(self) -> str:
        """worker | relay | sweeper — the handler module's name."""
        return self.module.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class SqsTrigger:
    function: str
    queue: str
    batch_size: int = 10


@dataclass(frozen=True)
class StreamTrigger:
    function: str
    table: str
    batch_size: int = 100
    starting_position: str = "TRIM_HORIZON"
    patterns: list[dict[str, Any]] = field(default_factory=list)
    retry_attempts: int = 2


@dataclass(frozen=True)
class Schedule:
    function: str
    rule: str
    seconds: float


@dataclass(frozen=True)
class StackResources:
    tables: dict[str, TableDef]
    queues: dict[str, QueueDef]
    buses: dict[str, str]  # logical id -> bus name
    functions: dict[str, FunctionDef]
    sqs_triggers: list[SqsTrigger]
    stream_triggers: list[StreamTrigger]
    schedules: list[Schedule]
    buckets: dict[str, BucketDef] = field(default_factory=dict)

    def function(self, role: str) -> FunctionDef:
        for fn in self.functions.values():
            if fn.role == role:
                return fn
        raise LocalStackError(f"the template has no {role} function (handler '{role}.handler')")


def read_template(path: str | Path = DEFAULT_TEMPLATE) -> dict[str, Any]:
    """The template file as JSON; a missing file says how to synthesize it."""
    p = Path(path)
    if not p.is_file():
        raise LocalStackError(f"no synthesized template at {p}: run `make synth` (or `cdk synth`) first, "
                              "or pass --template")
    data: dict[str, Any] = json.loads(p.read_text())
    return data


def _literal(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    raise LocalStackError(f"{what} must be a literal name in the template, found {json.dumps(value)}")


def referenced_id(value: Any) -> str | None:
    """The logical id a ``Ref`` / ``Fn::GetAtt`` points at."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def _rate_seconds(expression: str) -> float:
    m = _RATE.fullmatch(expression.strip())
    if not m:
        raise LocalStackError(f"unsupported schedule {expression!r} (the local stack runs rate(...) "
                              "schedules)")
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2).rstrip("s")]


def parse_template(template: Mapping[str, Any], asset_root: Path | None = None) -> StackResources:
    """Everything the local stack needs, read from a synthesized CloudFormation template."""
    resources: Mapping[str, Any] = template.get("Resources") or {}
    tables: dict[str, TableDef] = {}
    queues: dict[str, QueueDef] = {}
    buses: dict[str, str] = {}
    functions: dict[str, FunctionDef] = {}
    sqs_triggers: list[SqsTrigger] = []
    stream_triggers: list[StreamTrigger] = []
    schedules: list[Schedule] = []
    buckets: dict[str, BucketDef] = {}
    policies = {referenced_id((res.get("Properties") or {}).get("Bucket")): res["Properties"]["PolicyDocument"]
                for res in resources.values() if res.get("Type") == "AWS::S3::BucketPolicy"}
    for lid, res in resources.items():
        kind, props = res.get("Type"), res.get("Properties") or {}
        if kind == "AWS::DynamoDB::Table":
            ttl = props.get("TimeToLiveSpecification") or {}
            tables[lid] = TableDef(
                logical_id=lid,
                name=_literal(props.get("TableName"), f"{lid}.TableName"),
                key_schema=list(props["KeySchema"]),
                attribute_definitions=list(props["AttributeDefinitions"]),
                stream_view_type=(props.get("StreamSpecification") or {}).get("StreamViewType"),
                ttl_attribute=ttl.get("AttributeName") if ttl.get("Enabled") else None,
                global_secondary_indexes=list(props.get("GlobalSecondaryIndexes") or []),
            )
        elif kind == "AWS::SQS::Queue":
            attrs = {}
            for key in ("FifoQueue", "DeduplicationScope", "FifoThroughputLimit", "VisibilityTimeout",
                        "MessageRetentionPeriod", "ContentBasedDeduplication", "DelaySeconds",
                        "ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled"):
                if key in props:
                    value = props[key]
                    attrs[key] = str(value).lower() if isinstance(value, bool) else str(value)
            redrive = props.get("RedrivePolicy") or {}
            queues[lid] = QueueDef(
                logical_id=lid,
                name=_literal(props.get("QueueName"), f"{lid}.QueueName"),
                attributes=attrs,
                dead_letter_logical_id=referenced_id(redrive.get("deadLetterTargetArn")),
                max_receive_count=int(redrive["maxReceiveCount"]) if "maxReceiveCount" in redrive else None,
            )
        elif kind == "AWS::S3::Bucket":
            name = props.get("BucketName")
            buckets[lid] = BucketDef(
                logical_id=lid,
                # CloudFormation names an unnamed bucket <stack>-<logical id>-<random>, lower case
                name=_literal(name, f"{lid}.BucketName") if name is not None else f"local-{lid.lower()}"[:63],
                encryption=props.get("BucketEncryption"),
                public_access_block=props.get("PublicAccessBlockConfiguration"),
                policy=policies.get(lid),
            )
        elif kind == "AWS::Events::EventBus":
            buses[lid] = _literal(props.get("Name"), f"{lid}.Name")
        elif kind == "AWS::Lambda::Function":
            asset = (res.get("Metadata") or {}).get("aws:asset:path")
            code_dir = (asset_root / asset) if asset_root is not None and asset else None
            functions[lid] = FunctionDef(
                logical_id=lid,
                handler=str(props.get("Handler")),
                code_dir=code_dir,
                environment=dict((props.get("Environment") or {}).get("Variables") or {}),
                timeout=int(props.get("Timeout") or 3),
            )
        elif kind == "AWS::Lambda::EventSourceMapping":
            fn_id = referenced_id(props.get("FunctionName")) or ""
            source = props.get("EventSourceArn")
            target = referenced_id(source) or ""
            filters = (props.get("FilterCriteria") or {}).get("Filters", [])
            patterns = [json.loads(f["Pattern"]) for f in filters]
            if isinstance(source, dict) and "Fn::GetAtt" in source and source["Fn::GetAtt"][1] == "StreamArn":
                stream_triggers.append(StreamTrigger(
                    function=fn_id, table=target, batch_size=int(props.get("BatchSize") or 100),
                    starting_position=str(props.get("StartingPosition") or "TRIM_HORIZON"),
                    patterns=patterns, retry_attempts=int(props.get("MaximumRetryAttempts", 2))))
            else:
                sqs_triggers.append(SqsTrigger(function=fn_id, queue=target,
                                               batch_size=int(props.get("BatchSize") or 10)))
        elif kind == "AWS::Events::Rule" and props.get("ScheduleExpression"):
            seconds = _rate_seconds(str(props["ScheduleExpression"]))
            for t in props.get("Targets") or []:
                target_fn = referenced_id(t.get("Arn"))
                if target_fn:
                    schedules.append(Schedule(function=target_fn, rule=lid, seconds=seconds))
    return StackResources(tables, queues, buses, functions, sqs_triggers, stream_triggers, schedules, buckets)
