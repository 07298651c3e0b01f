"""A training run's JobSet restarts cover the disruptions a run of its length should survive
(core/config/workflow_rules.py ``restarts_for_run``): each disruption costs one counted restart, planned at one per
started ``DISRUPTION_HOURS`` (24) of the estimate's training. The default is the capacity mode's (reservation and
on-demand 1, spot 3, flex-start 2) or that number where more; a value set from 1 to one below it is refused in one
line, 0 (the tutorial's, fail at the first disruption) stays allowed. The hours are the estimate's own
(``core.estimate``)."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from core.config.defaults import DISRUPTION_HOURS
from core.config.workflow_rules import expected_train_hours, restarts_needed
from core.estimate import estimate_for
from core.settings import Settings
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.pure

T = "tpu-rl:training."
SPOT = ["tpu-rl:tpu.capacity=spot", "tpu-rl:tpu.reservation="]
FLEX = ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="]
ON_DEMAND = ["tpu-rl:tpu.capacity=on-demand", "tpu-rl:tpu.reservation="]


LONG = "tpu-rl:workflow.timeouts.train=168h"
"""A deadline an attempt of these long runs fits in (``check_train_deadline``: one that does not is refused)."""


def _hours(s: Settings) -> float:
    return expected_train_hours(s.training, s.model.spec, s.total_chips)


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("prod", []),
        ("dev", []),
        ("prod", [f"{T}loadCheckpointOnlyOnce=true"]),
        ("prod", [f"{T}numBatches=900", f"{T}maxTargetLength=1024", LONG]),
        (
            "prod",
            ["tpu-rl:tpu.slices=2", f"{T}iciExpertParallelism=1", f"{T}rolloutTensorParallelism=32"],
        ),
    ],
)
def test_the_hours_are_the_estimates_training_step(stack, overrides):
    s = settings(stack, overrides)
    (train,) = [step for step in estimate_for(s).steps if step.step == "train"]
    assert _hours(s) == pytest.approx(train.hours)


def test_one_restart_per_started_day():
    assert DISRUPTION_HOURS == 24
    assert [restarts_needed(h) for h in (0.5, 24.0, 24.001, 48.0, 48.5, 100.0)] == [1, 1, 2, 2, 3, 5]


@pytest.mark.parametrize(
    ("capacity", "batches", "restarts"),
    [
        ([], 872, 1),  # 23.98 h
        ([], 873, 2),  # 24.003 h
        (ON_DEMAND, 873, 2),
        (FLEX, 1772, 2),  # 47.98 h: flex-start's own 2
        (FLEX, 1773, 3),  # 48.003 h
        (SPOT, 2672, 3),  # 71.98 h: spot's own 3
        (SPOT, 2673, 4),  # 72.003 h
    ],
)
def test_the_default_is_the_capacity_modes_or_the_runs_where_more(capacity, batches, restarts):
    s = settings("prod", [*capacity, f"{T}numBatches={batches}", LONG])
    assert s.workflow.max_restarts == restarts


@pytest.mark.parametrize("capacity", [[], SPOT, FLEX, ON_DEMAND], ids=["reservation", "spot", "flex", "on-demand"])
def test_a_value_below_the_runs_is_refused_in_every_mode_and_0_is_allowed(capacity):
    long_run = [*capacity, f"{T}numBatches=2673", LONG]  # 72.003 h: 4 restarts
    assert settings("prod", [*long_run, "tpu-rl:workflow.maxRestarts=0"]).workflow.max_restarts == 0
    assert settings("prod", [*long_run, "tpu-rl:workflow.maxRestarts=4"]).workflow.max_restarts == 4
    with pytest.raises(ConfigError) as caught:
        settings("prod", [*long_run, "tpu-rl:workflow.maxRestarts=3"])
    assert str(caught.value) == (
        "tpu-rl:workflow.maxRestarts = 3 is invalid: each disruption of a training run (a lost slice, a maintenance "
        "event, a stalled attempt) costs one counted JobSet restart, and the estimate's training takes 72.003 h: at "
        "least 4, one per started 24 h; raise it to 4 or more, or set 0 to fail the run at its first disruption (the "
        "tutorial's behaviour)"
    )


def test_the_hours_shown_are_past_the_days_they_exceed():
    with pytest.raises(ConfigError, match=r"training takes 30\.0 h: at least 2,"):
        settings("prod", [f"{T}numBatches=1098", "tpu-rl:workflow.maxRestarts=1", LONG])


def test_a_stack_that_runs_no_workflow_keeps_what_it_says():
    off = ["tpu-rl:workflow.enabled=false", f"{T}numBatches=2673"]
    assert settings("prod", off).workflow.max_restarts == 1
    assert settings("prod", [*off, "tpu-rl:workflow.maxRestarts=2"]).workflow.max_restarts == 2


def test_a_training_problem_leaves_the_other_rules_reported():
    """The restarts need the training's knobs; a knob's own problem does not hide the workflow's other rules."""
    with pytest.raises(ConfigError) as caught:
        settings("prod", [f"{T}trainMicroBatchSize=3", "tpu-rl:cpuPool.machineType=n2-standard-48"])
    lines = str(caught.value).splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "tpu-rl:training.trainMicroBatchSize",
        "tpu-rl:cpuPool.machineType",
    ]
