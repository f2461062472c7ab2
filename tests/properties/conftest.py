"""Hypothesis profiles of the property suite.

- ``ci`` (the default): a budget that keeps ``tests/properties`` around a minute on a 2-core machine
  across every registered store (each store runs a share of it: see ``harness.EXAMPLE_SHARE``);
- ``deep``: selected by ``DURASTATE_HYPOTHESIS_EXAMPLES=N`` — N examples per property on the fast stores
  (the same shares apply to the slow ones), e.g. ``DURASTATE_HYPOTHESIS_EXAMPLES=2000``.

The profiles are registered here but never *loaded* globally (that would change the settings of every
other hypothesis test in the session); the tests of this folder apply them explicitly
(``harness.settings_for``).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

CI_EXAMPLES = 40
"""Examples per property on the fast stores in the ``ci`` profile."""

_COMMON = {
    "deadline": None,  # every example does store I/O; timings vary with the machine and the server
    "suppress_health_check": (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                              HealthCheck.large_base_example),
    "print_blob": True,  # a failure prints @reproduce_failure, so it can be replayed on any machine
}

settings.register_profile("ci", max_examples=CI_EXAMPLES, **_COMMON)
settings.register_profile(
    "deep", max_examples=max(1, int(os.environ.get("DURASTATE_HYPOTHESIS_EXAMPLES") or CI_EXAMPLES)), **_COMMON
)

PROFILE = "deep" if os.environ.get("DURASTATE_HYPOTHESIS_EXAMPLES") else "ci"
