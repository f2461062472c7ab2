"""The serverless store, ``DynamoDBStore`` (boto3), and its async twin (aiobotocore).

Both share one request-generating core, so the sync and the async store run the same control flow.
The client libraries are imported only when a store makes its client.

Modules: ``sync`` and ``aio`` drive the request generators of ``core`` (what each store operation does);
``layout`` holds the tables (and the documentation of the layout and its design), ``limits`` DynamoDB's
limits and item sizes, ``errors`` the error classification, ``client`` the client settings,
``sharding`` the partition-key shards, ``bloom`` the filter of spilled event ids and ``claim_check``
the S3 objects of executions too large for an item.
"""

from durastate.store.dynamodb.aio import AsyncDynamoDBStore
from durastate.store.dynamodb.sync import DynamoDBStore

__all__ = ["AsyncDynamoDBStore", "DynamoDBStore"]
