"""The serverless store, ``DynamoDBStore`` (boto3), and its async twin (aiobotocore).

Both share one request-generating core, so the sync and the async store run the same control flow.
The client libraries are imported only when a store makes its client.
"""

from durastate.store.dynamodb.aio import AsyncDynamoDBStore
from durastate.store.dynamodb.sync import DynamoDBStore

__all__ = ["AsyncDynamoDBStore", "DynamoDBStore"]
