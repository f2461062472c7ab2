"""Every result of the worker maps to a record outcome, and every outcome to a metric of each handler.

A result without an outcome would raise after the commit: the record would be reported as a failure, and
SQS would redeliver it after the visibility timeout, holding its execution's FIFO group meanwhile.
"""

from __future__ import annotations

from typing import get_args

import pytest

from durastate.runtime.aws import Outcome, outcome_of
from durastate.runtime.worker import HandleResult

from .conftest import load_function


@pytest.mark.parametrize("result", list(HandleResult))
def test_every_handle_result_has_an_outcome(result: HandleResult) -> None:
    assert outcome_of(result) in get_args(Outcome)
    assert outcome_of(result) == result.value  # the same words in the logs and the metrics


def test_held_is_a_success_for_sqs() -> None:
    assert outcome_of(HandleResult.HELD) == "held"


@pytest.mark.parametrize("handler", ["worker", "timers"])
def test_every_outcome_has_a_metric(handler: str) -> None:
    metrics = load_function(handler).OUTCOME_METRICS
    assert set(metrics) == set(get_args(Outcome))
    assert metrics["held"] == "EventsHeld"
