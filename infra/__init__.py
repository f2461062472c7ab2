"""The CDK side of durastate: the ``DurastateEngine`` construct and the ``DurastateStack`` that deploys it.

Nothing here imports the ``durastate`` package, so ``cdk synth`` works from a clone with only the CDK libraries.
"""

from infra.construct import DurastateEngine
from infra.schema import TABLES, TTL_ATTRIBUTE, TableSpec
from infra.stack import DurastateStack

__all__ = ["TABLES", "TTL_ATTRIBUTE", "DurastateEngine", "DurastateStack", "TableSpec"]
