"""DynamoDB and DynamoDB Streams from the moto bundled with LocalStack (``PROVIDER_OVERRIDE_<SERVICE>=moto``).

Both providers implement no operation themselves: LocalStack's ``MotoFallbackDispatcher`` sends every request
to moto in-process, with the request's account and region. moto's streams backend reads the tables of its
DynamoDB backend, so the stream records the Lambda event source mapping polls are the table's own writes.
"""

from __future__ import annotations

from typing import Any

from localstack.services.plugins import aws_provider


@aws_provider(api="dynamodb", name="moto")
def dynamodb_moto() -> Any:
    from localstack.aws.api.dynamodb import DynamodbApi
    from localstack.services.moto import MotoFallbackDispatcher
    from localstack.services.plugins import Service

    class MotoDynamoDB(DynamodbApi):
        """Every operation falls through to moto."""

    return Service.for_provider(MotoDynamoDB(), dispatch_table_factory=MotoFallbackDispatcher)


@aws_provider(api="dynamodbstreams", name="moto")
def dynamodbstreams_moto() -> Any:
    from localstack.aws.api.dynamodbstreams import DynamodbstreamsApi
    from localstack.services.moto import MotoFallbackDispatcher
    from localstack.services.plugins import Service

    class MotoDynamoDBStreams(DynamodbstreamsApi):
        """Every operation falls through to moto."""

    return Service.for_provider(MotoDynamoDBStreams(), dispatch_table_factory=MotoFallbackDispatcher)
