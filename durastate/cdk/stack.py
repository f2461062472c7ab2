"""``DurastateStack``: the deployable stack — the engine construct plus outputs a user needs to drive it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from durastate.cdk.construct import DEFAULT_WORKER_MAX_CONCURRENCY, DurastateEngine

_ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}
_REMOVAL = {"retain": cdk.RemovalPolicy.RETAIN, "destroy": cdk.RemovalPolicy.DESTROY,
            "snapshot": cdk.RemovalPolicy.SNAPSHOT}


def removal_policy(name: str) -> cdk.RemovalPolicy:
    try:
        return _REMOVAL[name.lower()]
    except KeyError:
        raise ValueError(f"removal policy must be one of {sorted(_REMOVAL)}, not {name!r}") from None


def architecture(name: str) -> lambda_.Architecture:
    try:
        return _ARCHITECTURES[name.lower()]
    except KeyError:
        raise ValueError(f"architecture must be one of {sorted(_ARCHITECTURES)}, not {name!r}") from None


class DurastateStack(cdk.Stack):
    """One durastate engine and the stack outputs (queue URLs, table prefix, bus) the README's commands read."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table_prefix: str = "durastate",
        definitions_dir: str | Path = "examples",
        removal: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        sweeper_rate: cdk.Duration | None = None,
        relay_backstop_rate: cdk.Duration | None = None,
        memory_size: int = 512,
        arch: lambda_.Architecture = lambda_.Architecture.ARM_64,
        retention: cdk.Duration | None = None,
        trace: bool = False,
        history: bool = False,
        timer_hops: bool = True,
        worker_max_concurrency: int | None = DEFAULT_WORKER_MAX_CONCURRENCY,
        task_functions: Sequence[str] = (),
        bundle_layer: bool = False,
        large_contexts: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, description="durastate: durable Harel statecharts on AWS", **kwargs)
        self.engine = DurastateEngine(
            self, "Engine",
            table_prefix=table_prefix,
            definitions_dir=definitions_dir,
            removal_policy=removal,
            sweeper_rate=sweeper_rate,
            relay_backstop_rate=relay_backstop_rate,
            memory_size=memory_size,
            architecture=arch,
            retention=retention,
            trace=trace,
            history=history,
            timer_hops=timer_hops,
            worker_max_concurrency=worker_max_concurrency,
            task_functions=task_functions,
            bundle_layer=bundle_layer,
            large_contexts=large_contexts,
        )
        outputs = {
            "QueueUrl": (self.engine.queue.queue_url,
                         "send events here (wire format, MessageGroupId = target)"),
            "DeadLetterQueueUrl": (self.engine.dead_letter_queue.queue_url, "poison messages, with reasons"),
            "TablePrefix": (table_prefix, "DynamoDB tables are {prefix}_{name}"),
            "EventBusName": (self.engine.event_bus.event_bus_name, "untargeted emits (notifications)"),
            "WorkerFunctionName": (self.engine.worker.function_name, "the SQS-triggered worker"),
            "AlarmTopicArn": (self.engine.alarm_topic.topic_arn, "subscribe to hear of dead letters"),
            "OperatorPolicyArn": (self.engine.operator_policy.managed_policy_arn,
                                  "attach to whoever runs the durastate CLI's AWS commands"),
        }
        if self.engine.context_bucket is not None:
            outputs["ContextBucketName"] = (self.engine.context_bucket.bucket_name,
                                            "executions past the DynamoDB item limit (the claim check)")
        if self.engine.timers_queue is not None:
            outputs["TimersQueueUrl"] = (self.engine.timers_queue.queue_url,
                                         "timers due within 15 minutes wait here until due")
        for key, (value, description) in outputs.items():
            cdk.CfnOutput(self, key, value=value, description=description)
