"""The development stack: the AWS deployment run on this machine, without Docker and without AWS.

``durastate local`` (and the local-stack and AWS tests) use it: moto's HTTP server stands in for AWS, the
resources are created from the synthesized CDK template, and the four Lambda handlers
(``durastate/functions/worker.py``, ``relay.py``, ``sweeper.py``, ``timers.py``, as packaged in each
function's asset) are called the way Lambda would call them, each request they make checked against their
roles as IAM would.

**Development only.** Production code — :mod:`durastate.runtime` and everything the deployed Lambda
functions import — must never import this package: it emulates Lambda, it does not run in it (and it
needs moto, which the layer does not ship). Import the names below from ``durastate.devstack``; the
modules are arranged by topic:

* :mod:`~durastate.devstack.template` — reading the synthesized CloudFormation template;
* :mod:`~durastate.devstack.moto_server` — starting (or attaching to) moto's server, clients for it;
* :mod:`~durastate.devstack.handlers` — importing the packaged handler code as Lambda does;
* :mod:`~durastate.devstack.streams` — the DynamoDB Streams trigger of the relay;
* :mod:`~durastate.devstack.lambda_emulator` — Lambda's event shapes, context and SQS batching;
* :mod:`~durastate.devstack.iam` — every request of a function decided against its role in the template;
* :mod:`~durastate.devstack.stack` — :class:`LocalStack`, which ties them together and runs the loop.

boto3 and moto are imported lazily, when a stack starts: importing this package needs neither.
"""

from __future__ import annotations

from durastate.devstack.errors import LocalStackError
from durastate.devstack.lambda_emulator import (
    BatchResult,
    FakeLambdaContext,
    Handler,
    HandlerLoop,
    SqsBatchInvoker,
    dynamodb_stream_event,
    queue_arn,
    scheduled_event,
    sqs_event,
    sqs_record,
)
from durastate.devstack.moto_server import MotoServer
from durastate.devstack.stack import LocalStack, StepReport
from durastate.devstack.template import (
    DEFAULT_TEMPLATE,
    FunctionDef,
    QueueDef,
    Schedule,
    SqsTrigger,
    StackResources,
    StreamTrigger,
    TableDef,
    parse_template,
    read_template,
)

__all__ = [
    "DEFAULT_TEMPLATE",
    "BatchResult",
    "FakeLambdaContext",
    "FunctionDef",
    "Handler",
    "HandlerLoop",
    "LocalStack",
    "LocalStackError",
    "MotoServer",
    "QueueDef",
    "Schedule",
    "SqsBatchInvoker",
    "SqsTrigger",
    "StackResources",
    "StepReport",
    "StreamTrigger",
    "TableDef",
    "dynamodb_stream_event",
    "parse_template",
    "queue_arn",
    "read_template",
    "scheduled_event",
    "sqs_event",
    "sqs_record",
]
