"""The CDK side of harel: the ``HarelEngine`` construct and the ``HarelStack`` that deploys it.

Nothing here imports the ``harel`` package, so ``cdk synth`` works from a clone with only the CDK libraries.
"""

from infra.construct import HarelEngine
from infra.schema import TABLES, TTL_ATTRIBUTE, TableSpec
from infra.stack import HarelStack

__all__ = ["TABLES", "TTL_ATTRIBUTE", "HarelEngine", "HarelStack", "TableSpec"]
