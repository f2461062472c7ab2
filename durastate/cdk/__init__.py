"""The CDK side of durastate: the ``DurastateEngine`` construct and the ``DurastateStack`` that deploys it.

Nothing here imports the ``durastate`` package, so ``cdk synth`` works from a clone with only the CDK libraries.
"""

from durastate.cdk.construct import DurastateEngine
from durastate.cdk.schema import TABLES, TTL_ATTRIBUTE, TableSpec
from durastate.cdk.stack import DurastateStack

__all__ = ["TABLES", "TTL_ATTRIBUTE", "DurastateEngine", "DurastateStack", "TableSpec"]
