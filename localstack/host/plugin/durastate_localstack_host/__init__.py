"""Stand-ins for the two pieces LocalStack 4.14 community downloads at first use, for a host without Docker.

* :mod:`.providers` — DynamoDB and DynamoDB Streams served by the moto that LocalStack bundles (the default
  providers start DynamoDB Local, a Java download, and put the streams on kinesis-mock, another download).
  Selected with ``PROVIDER_OVERRIDE_DYNAMODB=moto`` and ``PROVIDER_OVERRIDE_DYNAMODBSTREAMS=moto``.
* :mod:`.executor` — a Lambda runtime executor that runs each execution environment as a host process, in
  place of a container with LocalStack's runtime-init binary (another download). Selected with
  ``LAMBDA_RUNTIME_EXECUTOR=host-process``. Like the community Docker executor, it gives the function its own
  unzipped code and nothing of its layers.

Everything else — CloudFormation, IAM, STS, S3, SQS, the event source mapping pollers, EventBridge, SNS,
CloudWatch, Logs, the Lambda service itself — is LocalStack's own.
"""
