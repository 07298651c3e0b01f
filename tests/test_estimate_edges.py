"""Edges of the cost and duration estimate: the wording of its notes for one CPU step, a restart on the nodes a run
already holds, a checkpoint period too short to lose a step, and the rounding of the values the stack output shows.
Pure."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.estimate import (
    STARTUP_MINUTES,
    Maintenance,
    TrainingRun,
    cpu_note,
    estimate_run,
    restarted,
    step_hours,
)
from core.models import MODELS
from core.steps import STEPS
from core.tpu import Capacity, resolve_slice

pytestmark = pytest.mark.pure

V6E_32 = resolve_slice("v6e", "ct6e-standard-4t", "4x8")
TUTORIAL = TrainingRun(model="gemma4-26b", num_batches=50, batch_size=4, num_generations=4, max_target_length=640)
RESTART_HOURS = (45 - 8 - 5) / 60
"""A restart's start-up at the defaults: the cold compilation's 8 minutes and the pre-RL evaluation saved."""


@pytest.mark.parametrize(
    ("steps", "note"),
    [
        (["convert"], "conversion runs on the CPU pool and holds no TPU"),
        (["export"], "export runs on the CPU pool and holds no TPU"),
        (["convert", "export"], "conversion and export run on the CPU pool and hold no TPU"),
        (
            ["convert", "export", "evaluate"],
            "conversion, export and evaluation run on the CPU pool and hold no TPU",
        ),
    ],
)
def test_the_cpu_note_names_its_steps_in_a_sentence(steps, note):
    """One step is named alone and its verbs agree with it; two or more are listed with a final "and"."""
    assert cpu_note(steps) == note


def test_an_estimate_of_one_cpu_step_says_it_in_the_singular():
    e = estimate_run(V6E_32, 1, Capacity.SPOT, TUTORIAL, steps=("convert", "train"))
    assert e.notes[0] == "conversion runs on the CPU pool and holds no TPU"


def test_a_restart_on_the_nodes_the_run_holds_waits_for_no_node_and_pulls_no_image():
    """`make report` prices a run's own restart from its measured first attempt: on new nodes only the compilation
    (warm) and the pre-RL evaluation (skipped) change; on the same nodes the scale-up and the image pull go too."""
    measured = {**STARTUP_MINUTES, "nodes": 7, "images": 20, "compile": 14, "load": 4}
    new_nodes = {**measured, "compile": 2, "pre-RL eval": 0}
    assert restarted(measured) == new_nodes
    assert restarted(measured, same_nodes=False) == new_nodes
    assert restarted(measured, same_nodes=True) == {**new_nodes, "nodes": 0, "images": 0}
    assert list(restarted(measured, same_nodes=True)) == list(STARTUP_MINUTES), "the components keep their order"


def test_a_step_that_is_not_a_timed_cpu_step_has_no_assumed_hours():
    """Training is timed by the training model, not by a catalogue entry's hours."""
    model = MODELS["gemma4-26b"]
    assert step_hours(STEPS["train"], model) is None
    assert step_hours(STEPS["convert"], model) == model.convert_hours


@pytest.mark.parametrize(("checkpoint_period", "num_batches"), [(1, 50), (2, 50), (10, 2), (10, 1)])
def test_a_preemption_within_the_first_checkpoint_step_costs_the_restart_alone(checkpoint_period, num_batches):
    """Half a checkpoint period less the step the restart's start-up holds is never fewer than no step: with a
    period of 1 or 2 steps (or a run that short) a preemption loses nothing beyond the restart."""
    run = replace(TUTORIAL, num_batches=num_batches)
    e = estimate_run(V6E_32, 1, Capacity.RESERVATION, run, checkpoint_period=checkpoint_period)
    assert e.failures["preemption"].tpu_hours == pytest.approx(RESTART_HOURS)
    assert e.failures["preemption"].tpu_chip_hours == pytest.approx(32 * RESTART_HOURS)


def test_the_failure_modes_show_hours_to_hundredths():
    """Two slices (64 chips) halve a step to 48 s: a preemption's 32 minutes + 4 x 48 s = 0.5867 h, shown 0.59."""
    output = estimate_run(V6E_32, 2, Capacity.FLEX_START, TUTORIAL).to_output()
    assert output["failureModes"]["preemption"]["tpuHours"] == 0.59
    assert output["failureModes"]["maintenance"]["tpuHours"] == 0.59, "an autoscaled pool bills only the restart"


def test_maintenance_let_in_says_what_it_costs_and_the_wait_to_hundredths():
    """A recovery timeout of 100 minutes is 1.67 h in the output; node patches let in end a running attempt."""
    assert Maintenance("NO_MINOR_UPGRADES", 100 / 60).to_output() == {
        "nodeUpgrades": "let in: a node patch in the daily window ends a running training attempt, restarted from its "
        "checkpoint",
        "recoveryHours": 1.67,
        "tpuMaintenanceHours": 4.0,
    }
    assert Maintenance(None, 0.5).to_output()["nodeUpgrades"].endswith("restarted from its checkpoint")
