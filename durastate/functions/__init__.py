"""The four Lambda handlers (worker, relay, sweeper, timers), shipped with the package.

They are thin adapters over :mod:`durastate.runtime.aws`. The CDK construct (:mod:`durastate.cdk`) copies each
one into its function's code as a top-level module (``worker.py`` → handler ``worker.handler``), next to the
definitions; the engine comes from the layer. They ship in the wheel so that a user's own CDK app packages
them from the installed distribution, not from a checkout.
"""
