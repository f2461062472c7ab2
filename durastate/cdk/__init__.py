"""The durastate engine as AWS CDK code: the ``DurastateEngine`` construct and the ``DurastateStack`` around it.

Behind the ``cdk`` extra (``pip install "durastate[cdk]"``: aws-cdk-lib and constructs). A user's own CDK
app imports the construct from here; everything it packages at synth time comes from the installed
distribution — the Lambda handlers (:mod:`durastate.functions`), the table layout (:mod:`durastate.cdk.schema`)
and the layer, built by :mod:`durastate.cdk.layer` from this package's files and its pinned closure.

Nothing here imports durastate outside ``durastate.cdk``: ``cdk synth`` runs all of this code, and must not
depend on the engine's run-time dependencies.
"""

from durastate.cdk.construct import DEFAULT_WORKER_MAX_CONCURRENCY, DurastateEngine
from durastate.cdk.layer import build_layer, default_build_root
from durastate.cdk.schema import TABLES, TTL_ATTRIBUTE, TableSpec
from durastate.cdk.stack import DurastateStack, architecture, removal_policy

__all__ = ["DEFAULT_WORKER_MAX_CONCURRENCY", "TABLES", "TTL_ATTRIBUTE", "DurastateEngine", "DurastateStack",
           "TableSpec", "architecture", "build_layer", "default_build_root", "removal_policy"]
