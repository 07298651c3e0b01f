"""The cost and duration estimate, checked against hand-computed numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.estimate import (
    Maintenance,
    TrainingRun,
    describe,
    estimate_for,
    estimate_run,
    step_seconds,
    step_seconds_for,
    training_run,
    usd_per_chip_hour,
)
from core.steps import StepName
from core.tpu import Capacity, resolve_slice
from tests.conftest import plan_of
from tests.lifecycle_walk import settings

V6E_32 = resolve_slice("v6e", "ct6e-standard-4t", "4x8")
TUTORIAL = TrainingRun(model="gemma4-26b", num_batches=50, batch_size=4, num_generations=4, max_target_length=640)


@pytest.mark.pure
def test_tutorial_on_a_reservation():
    e = estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL)
    # train: 45 min start-up (whose "first step" is the first of the 50 steps; load 5: the checkpoint read twice, the
    # default) + 49 steps x (6 s x 4 prompts x 4 generations) = 0.75 + 49 x 96 s = 2.0567 h
    steps = {s.step: s for s in e.steps}
    assert steps["train"].hours == pytest.approx(45 / 60 + 49 * 96 / 3600)
    # a reserved slice bills during every step: 32 chips x hours x $1.89
    assert steps["convert"].holds_tpu is False and steps["convert"].tpu_chip_hours == pytest.approx(32.0)
    assert steps["convert"].usd == pytest.approx(32 * 1.0 * 1.89)  # $60.48
    assert steps["train"].usd == pytest.approx(32 * (45 / 60 + 49 * 96 / 3600) * 1.89)  # $124.39
    assert steps["export"].usd == pytest.approx(32 * 0.75 * 1.89)  # $45.36
    assert e.total_hours == pytest.approx(1.0 + 45 / 60 + 49 * 96 / 3600 + 0.75)
    assert e.total_usd == pytest.approx(60.48 + 124.39 + 45.36, abs=0.01)  # $230.23
    assert e.idle_usd_per_day == pytest.approx(32 * 1.89 * 24)  # $1,451.52 per day until the reservation is deleted
    assert any("bills from its creation until it is deleted" in n for n in e.notes)


@pytest.mark.pure
def test_autoscaled_capacity_bills_only_while_training():
    e = estimate_run(V6E_32, 1, Capacity.SPOT, TUTORIAL)
    steps = {s.step: s for s in e.steps}
    assert steps["convert"].usd == 0 and steps["export"].usd == 0
    # (2.0567 h + 0.25 h scale-up/down) x 32 chips x ($2.70 x 0.40 = $1.08)
    train = 45 / 60 + 49 * 96 / 3600
    assert steps["train"].usd == pytest.approx((train + 0.25) * 32 * 1.08)  # $79.72
    assert e.idle_usd_per_day == 0
    on_demand = estimate_run(V6E_32, 1, Capacity.ON_DEMAND, TUTORIAL)
    assert on_demand.total_usd == pytest.approx((train + 0.25) * 32 * 2.70)  # $199.30


@pytest.mark.pure
def test_smaller_slice_trains_longer():
    small = resolve_slice("v6e", "ct6e-standard-4t", "2x4")
    e = estimate_run(small, 1, Capacity.SPOT, TUTORIAL)
    train = next(s for s in e.steps if s.step == "train")
    assert train.hours == pytest.approx(45 / 60 + 49 * 96 * 4 / 3600)


@pytest.mark.pure
def test_provision_only_reservation_still_shows_the_daily_bill():
    e = estimate_run(V6E_32, 1, Capacity.RESERVATION, None)
    assert e.total_usd == 0 and e.idle_usd_per_day == pytest.approx(1451.52)


@pytest.mark.slow
def test_estimate_is_a_stack_output_and_printed_by_the_plan(capsys):
    from tools.plan import main

    output = plan_of("prod").outputs["estimate"]
    assert output["totalUsd"] == pytest.approx(230.23, abs=0.01)
    assert output["steps"]["convert"]["holdsTpu"] is False and output["steps"]["train"]["holdsTpu"] is True
    assert "reservation, 32 chips" in describe(output)
    assert main(["--stack", "prod"]) == 0
    assert "note: the reservation bills from its creation until it is deleted" in capsys.readouterr().out


@pytest.mark.pure
def test_the_stack_output_of_the_tutorial_run_on_a_reservation():
    """Every field of the `estimate` stack output, rounded as documented."""
    assert estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL).to_output() == {
        "capacity": "reservation",
        "chips": 32,
        "usdPerChipHour": 1.89,
        "steps": {
            "convert": {"hours": 1.0, "holdsTpu": False, "tpuChipHours": 32.0, "usd": 60.48},
            "train": {"hours": 2.06, "holdsTpu": True, "tpuChipHours": 65.8, "usd": 124.39},
            "export": {"hours": 0.75, "holdsTpu": False, "tpuChipHours": 24.0, "usd": 45.36},
        },
        "totalHours": 3.81,
        "totalTpuChipHours": 121.8,
        "totalUsd": 230.23,
        "idleUsdPerDay": 1451.52,
        "pricesAsOf": "2026-11-29",
        "notes": [
            "conversion and export run on the CPU pool and hold no TPU",
            "the reservation bills from its creation until it is deleted, used or not: for this slice 32 chips x "
            "$1.89 = $1,452 per day, also while the CPU steps run and after `pulumi destroy` (which removes "
            "the slice, not the reservation); delete the reservation to stop it",
        ],
        # one start-up (45 min: 0.75 h x 32 x $1.89 = $45.36); a restart (45 min less 8 min of compilation, its cache
        # warm, and the 5-min pre-RL evaluation, skipped as it resumes: 32 min, 0.5333 h) + half of checkpoint_period
        # 10 less the restart's first step, 4 x 96 s (0.1067 h): 0.64 h x 32 = 20.48 chip-h x $1.89 = $38.71; 15 min
        # held; a TPU maintenance event: the slice away 4 h (billed: reserved) + a restart, 4.64 h x 32 = 148.48
        # chip-h x $1.89 = $280.63; node upgrades held off: nothing
        "failureModes": {
            "deterministicFailure": {"tpuHours": 0.75, "tpuChipHours": 24.0, "usd": 45.36},
            "preemption": {"tpuHours": 0.64, "tpuChipHours": 20.5, "usd": 38.71},
            "unschedulable": {"tpuHours": 0.25, "tpuChipHours": 8.0, "usd": 15.12},
            "maintenance": {"tpuHours": 4.64, "tpuChipHours": 148.5, "usd": 280.63},
            "nodeUpgrade": {"tpuHours": 0.0, "tpuChipHours": 0.0, "usd": 0.0},
        },
        # the 45-minute start-up of an attempt, by the components `make status` and `make report` measure (load 5: the
        # tokenizer and dataset 1 + two reads of the checkpoint, 2 each)
        "trainStartupMinutes": {
            "admission": 1,
            "nodes": 5,
            "images": 12,
            "set-up": 1,
            "Pathways": 2,
            "load": 5,
            "compile": 10,
            "restore": 2,
            "pre-RL eval": 5,
            "first step": 2,
        },
    }


@pytest.mark.pure
def test_two_flex_start_slices_halve_the_steps_and_bill_only_training():
    # 64 chips at $2.70 x 0.60 = $1.62; train 45 min + 49 x 96 s x 32/64 = 0.75 + 0.6533 = 1.4033 h, billed + 0.25 h:
    # 1.6533 h x 64 = 105.81 chip-h x $1.62 = $171.42.
    assert describe(estimate_run(V6E_32, 2, Capacity.FLEX_START, TUTORIAL).to_output()).splitlines() == [
        "estimate (flex-start, 64 chips at $1.62/chip-hour, prices as of 2026-11-29):",
        "  convert    1.00 h  CPU only       0.0 chip-h  $      0.00",
        "  train      1.40 h  TPU          105.8 chip-h  $    171.42",
        "  export     0.75 h  CPU only       0.0 chip-h  $      0.00",
        "  total      3.15 h               105.8 chip-h  $    171.42",
        "  note: conversion and export run on the CPU pool and hold no TPU",
        "  note: the flex-start pool scales to zero: its TPU VMs bill from when the capacity is granted to the "
        "scale-down after training, nothing while the request waits for capacity",
        "  train start-up per attempt 0.75 h, in minutes: admission 1, nodes 5, images 12, set-up 1, Pathways 2, "
        "load 5, compile 10, restore 2, pre-RL eval 5, first step 2 (assumed; `make report` measures them); a restart "
        "compiles from the run's cache and, resuming, skips the pre-RL evaluation: compile 2, pre-RL eval 0",
        # 45 min x 64 = 48.0 chip-h x $1.62 = $77.76; a warm restart's 32 min + 4 steps x 48 s = 0.5867 h x 64 = 37.55
        # chip-h x $1.62 = $60.83; no slice is created for a pod that cannot start
        "  if a failure of the trainer (no restart)                    48.0 chip-h  $     77.76",
        "  if a preemption (restart + steps since the checkpoint)      37.5 chip-h  $     60.83",
        "  if an unschedulable step until `up` stops                    0.0 chip-h  $      0.00",
        # an autoscaled pool has no VMs while the slice is away: the restart only
        "  if a TPU maintenance event (the wait + a restart)           37.5 chip-h  $     60.83",
        "  if a node upgrade under training (restart)                   0.0 chip-h  $      0.00",
    ]


@pytest.mark.pure
def test_failure_costs_follow_the_checkpoint_period_and_the_unschedulable_bound():
    """Both sides: a longer checkpoint period loses more steps to a preemption (never more than the run has),
    a longer bound holds a reserved slice longer."""
    base = estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL).failures
    sparse = estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL, checkpoint_period=50, unschedulable_seconds=3600)
    assert sparse.failures["preemption"].tpu_hours == pytest.approx((45 - 13) / 60 + 24 * 96 / 3600)
    assert sparse.failures["unschedulable"].tpu_chip_hours == pytest.approx(32.0)
    assert base["unschedulable"].tpu_chip_hours == pytest.approx(8.0)
    huge = estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL, checkpoint_period=1000).failures["preemption"]
    assert huge.tpu_hours == pytest.approx(sparse.failures["preemption"].tpu_hours), "at most the run's 50 steps"
    assert estimate_run(V6E_32, 1, Capacity.RESERVATION, None).failures == {}, "provision-only: nothing runs"
    prod = estimate_for(
        settings("prod", ["tpu-rl:workflow.unschedulableTimeout=30m", "tpu-rl:training.checkpointPeriod=20"])
    )
    assert prod.failures["unschedulable"].tpu_hours == 0.5
    assert prod.failures["preemption"].tpu_hours == pytest.approx((45 - 13) / 60 + 9 * 96 / 3600)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("version", "capacity", "usd"),
    [
        ("v6e", "reservation", 1.89),
        ("v6e", "on-demand", 2.70),
        ("v6e", "spot", 2.70 * 0.40),
        ("v6e", "flex-start", 2.70 * 0.60),
        ("v5e", "reservation", 0.84),
        ("v5e", "on-demand", 1.20),
        ("v5p", "reservation", 2.94),
        ("v5p", "flex-start", 4.20 * 0.60),
    ],
)
def test_price_per_chip_hour(version, capacity, usd):
    assert usd_per_chip_hour(version, capacity) == pytest.approx(usd)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("target", "chips", "seconds"),
    [(640, 32, 96.0), (1280, 32, 192.0), (320, 32, 48.0), (640, 64, 48.0), (640, 8, 384.0)],
)
def test_step_time_scales_with_target_length_and_inversely_with_chips(target, chips, seconds):
    run = replace(TUTORIAL, max_target_length=target)
    assert step_seconds(run, chips) == pytest.approx(seconds)
    assert step_seconds(replace(run, model="gemma4-e4b"), chips) == pytest.approx(seconds / 4)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([], ("reservation", 1, TUTORIAL)),
        (
            [
                "tpu-rl:tpu.slices=2",
                "tpu-rl:training.iciExpertParallelism=1",
                "tpu-rl:training.rolloutTensorParallelism=32",
            ],
            ("reservation", 2, TUTORIAL),
        ),
        (["tpu-rl:tpu.capacity=spot"], ("spot", 1, TUTORIAL)),
        (["tpu-rl:training.numBatches=7"], ("reservation", 1, replace(TUTORIAL, num_batches=7))),
        (
            ["tpu-rl:training.batchSize=8", "tpu-rl:training.trainMicroBatchSize=8"],
            ("reservation", 1, replace(TUTORIAL, batch_size=8)),
        ),
        (["tpu-rl:training.numGenerations=3"], ("reservation", 1, replace(TUTORIAL, num_generations=3))),
        (["tpu-rl:training.maxTargetLength=1024"], ("reservation", 1, replace(TUTORIAL, max_target_length=1024))),
        (["tpu-rl:model.name=gemma4-e4b"], ("reservation", 1, replace(TUTORIAL, model="gemma4-e4b"))),
        (["tpu-rl:workflow.enabled=false"], ("reservation", 1, None)),
    ],
)
def test_the_estimate_of_a_stack_reads_each_setting(overrides, expected):
    """estimate_for passes every setting the model uses; step_seconds_for agrees with it."""
    capacity, slices, run = expected
    extra = ["tpu-rl:tpu.reservation="] if capacity == "spot" else []
    s = settings("prod", [*overrides, *extra])
    held = Maintenance("NO_MINOR_OR_NODE_UPGRADES", 4.5)  # kueue.podsReadyTimeout 30m + a TPU maintenance event 4 h
    assert estimate_for(s) == estimate_run(V6E_32, slices, capacity, run, maintenance=held)
    assert step_seconds_for(s) == pytest.approx(step_seconds(run or TUTORIAL, 32 * slices))


@pytest.mark.pure
def test_the_output_rounds_money_to_cents_and_hours_to_hundredths():
    # 7 batches on spot: train 45 min + 6 x 96 s = 0.91 h, billed + 0.25 h: 1.16 h x 32 chips = 37.12 chip-h x $1.08
    # = $40.0896; total 1.0 + 0.91 + 0.75 = 2.66 h.
    output = estimate_run(V6E_32, 1, Capacity.SPOT, replace(TUTORIAL, num_batches=7)).to_output()
    assert output["steps"]["train"] == {"hours": 0.91, "holdsTpu": True, "tpuChipHours": 37.1, "usd": 40.09}
    assert (output["totalHours"], output["totalUsd"], output["usdPerChipHour"]) == (2.66, 40.09, 1.08)


@pytest.mark.pure
def test_an_estimate_output_without_failure_modes_still_reads():
    """A stack output written before the failure modes were estimated (an older `up`) is still shown."""
    output = estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL).to_output()
    del output["failureModes"]
    assert not any(line.startswith("  if ") for line in describe(output).splitlines())


@pytest.mark.pure
@pytest.mark.parametrize(
    ("capacity", "words"),
    [
        ("reservation", "the reservation bills from its creation until it is deleted, used or not"),
        ("spot", "the spot pool scales to zero: its TPU VMs bill at the spot price only while they exist"),
        ("flex-start", "nothing while the request waits for capacity"),
        ("on-demand", "the on-demand pool scales to zero: its TPU VMs bill only while they exist"),
    ],
)
def test_the_billing_note_says_what_bills_in_each_capacity_mode(capacity, words):
    """A reservation bills until the reservation is deleted, not until `pulumi destroy` (core/estimate.py's
    docstring cites Google's pages for each mode); no note says a destroy ends a reservation's bill."""
    notes = estimate_run(V6E_32, 1, capacity, TUTORIAL).notes
    assert words in notes[1]
    assert not any("until destroy" in note or "until `pulumi destroy`" in note for note in notes)
    assert ("after `pulumi destroy`" in notes[1]) is (capacity == "reservation")


# ---------------------------------------------------------------------------------------------
# The whole run: the evaluation and the publication, and maintenance


@pytest.mark.pure
def test_the_evaluation_and_the_publication_are_estimated_when_the_stack_runs_them():
    every: tuple[StepName, ...] = ("convert", "train", "export", "evaluate", "publish")
    e = estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL, steps=every)
    steps = {s.step: s for s in e.steps}
    assert list(steps) == list(every)
    # gemma4-26b's entry: evaluation 1.5 h, publication 0.5 h, on cpu-np; a reserved slice bills through both
    assert (steps["evaluate"].hours, steps["publish"].hours) == (1.5, 0.5)
    assert steps["evaluate"].holds_tpu is False and steps["evaluate"].usd == pytest.approx(32 * 1.5 * 1.89)
    assert steps["publish"].usd == pytest.approx(32 * 0.5 * 1.89)  # $30.24
    assert e.total_hours == pytest.approx(1.0 + 45 / 60 + 49 * 96 / 3600 + 0.75 + 1.5 + 0.5)
    assert e.total_usd == pytest.approx(230.23 + 90.72 + 30.24, abs=0.01)  # $351.19
    assert e.notes[0] == "conversion, export, evaluation and publication run on the CPU pool and hold no TPU"
    spot = {s.step: s for s in estimate_run(V6E_32, 1, Capacity.SPOT, TUTORIAL, steps=every).steps}
    assert spot["evaluate"].hours == 1.5 and spot["evaluate"].usd == 0 and spot["publish"].usd == 0
    # only the steps the stack runs: the publication alone, without the evaluation
    alone = estimate_run(V6E_32, 1, Capacity.RESERVATION, TUTORIAL, steps=("convert", "train", "export", "publish"))
    assert [s.step for s in alone.steps] == ["convert", "train", "export", "publish"]


@pytest.mark.pure
def test_a_stack_estimates_the_steps_it_runs():
    plain = estimate_for(settings("prod", []))
    assert [s.step for s in plain.steps] == ["convert", "train", "export"]
    both = estimate_for(
        settings("prod", ["tpu-rl:workflow.steps.evaluate=true", "tpu-rl:publish.repo=my-org/gemma4-grpo"])
    )
    steps = {s.step: s for s in both.steps}
    assert list(steps) == ["convert", "train", "export", "evaluate", "publish"]
    assert both.total_usd == pytest.approx(plain.total_usd + 32 * (1.5 + 0.5) * 1.89)
    small = {
        s.step: s
        for s in estimate_for(
            settings("prod", ["tpu-rl:workflow.steps.evaluate=true", "tpu-rl:model.name=gemma4-e4b"])
        ).steps
    }
    assert small["evaluate"].hours == 0.5  # gemma4-e4b's entry


@pytest.mark.pure
@pytest.mark.parametrize(
    ("overrides", "recovery"),
    [
        ([], 4.5),
        (["tpu-rl:tpu.capacity=spot", "tpu-rl:tpu.reservation="], 4.5),
        (["tpu-rl:tpu.capacity=on-demand", "tpu-rl:tpu.reservation="], 4.5),
        (["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="], 6.0),
        (["tpu-rl:kueue.recoveryTimeout=2h"], 2.0),
    ],
    ids=["reservation", "spot", "on-demand", "flex-start", "own"],
)
def test_the_estimate_says_how_a_run_is_protected_from_maintenance(overrides, recovery):
    output = estimate_for(settings("prod", overrides)).to_output()
    assert output["maintenance"] == {
        "nodeUpgrades": "held off until end of support (NO_MINOR_OR_NODE_UPGRADES)",
        "recoveryHours": recovery,
        "tpuMaintenanceHours": 4.0,
    }
    assert output["failureModes"]["nodeUpgrade"]["usd"] == 0.0
    assert f"a restarted attempt (and Kueue) waits {recovery:g} h for a slice that is away" in describe(output)


@pytest.mark.pure
def test_node_patches_let_in_cost_a_restart_and_the_wait_is_bounded_by_kueue():
    s = settings("prod", ["tpu-rl:gke.maintenanceExclusion=NO_MINOR_UPGRADES", "tpu-rl:kueue.recoveryTimeout=2h"])
    output = estimate_for(s).to_output()
    assert output["maintenance"]["nodeUpgrades"].startswith("let in: a node patch in the daily window ends")
    restart = output["failureModes"]["preemption"]
    assert output["failureModes"]["nodeUpgrade"] == restart
    # Kueue stops waiting after 2 h: the reserved slice bills 2 h of the wait, then the restart
    assert output["failureModes"]["maintenance"]["tpuHours"] == pytest.approx(2.0 + restart["tpuHours"], abs=0.01)
    none = estimate_for(settings("prod", ["tpu-rl:gke.maintenanceExclusion=none"])).to_output()
    assert none["failureModes"]["nodeUpgrade"] == none["failureModes"]["preemption"]


@pytest.mark.pure
def test_the_start_up_is_split_into_the_measured_components_and_keeps_its_total():
    """The estimate's start-up is the sum of the components `make status` and `make report` measure, in their
    order; at the defaults (the checkpoint read twice, MaxText's default) it is the baseline's 0.75 h, and one read
    less with tpu-rl:training.loadCheckpointOnlyOnce."""
    from core.estimate import (
        BASELINE_STARTUP_MINUTES,
        CHECKPOINT_READ_MINUTES,
        RESTART_STARTUP_MINUTES,
        STARTUP_MINUTES,
        startup_minutes,
    )
    from workloads.observe.startup import COMPONENTS

    assert tuple(STARTUP_MINUTES) == COMPONENTS
    assert sum(STARTUP_MINUTES.values()) == 45
    once = startup_minutes(replace(TUTORIAL, checkpoint_reads=1))
    assert BASELINE_STARTUP_MINUTES == 45 == sum(STARTUP_MINUTES.values())
    assert sum(once.values()) == 45 - CHECKPOINT_READ_MINUTES == 43, "loadCheckpointOnlyOnce: one read less"
    assert RESTART_STARTUP_MINUTES == {**STARTUP_MINUTES, "compile": 2, "pre-RL eval": 0}, (
        "a restart compiles warm and, resuming, skips the pre-RL evaluation"
    )
    assert sum(RESTART_STARTUP_MINUTES.values()) == 45 - 8 - 5, "8 minutes of cold compilation and the evaluation saved"
    assert estimate_run(V6E_32, 1, Capacity.RESERVATION, None).to_output().get("trainStartupMinutes") is None, (
        "no training"
    )


@pytest.mark.pure
def test_a_run_that_reads_the_checkpoint_once_is_estimated_without_the_second_read():
    """tpu-rl:training.loadCheckpointOnlyOnce false, the default (MaxText's): MaxText reads the converted checkpoint
    into the actor too; true copies the actor from the reference, two minutes less of "load" on every attempt, first
    and restarts (45 - 2 = 43 minutes)."""
    from core.estimate import startup_minutes

    reads_once = settings("prod", ["tpu-rl:training.loadCheckpointOnlyOnce=true"])
    run = training_run(reads_once)
    assert run.checkpoint_reads == 1 and training_run(settings("prod", [])).checkpoint_reads == 2
    assert TUTORIAL.checkpoint_reads == 2, "a TrainingRun reads it twice unless told"
    assert startup_minutes(run) == {**startup_minutes(TUTORIAL), "load": 3}
    once, twice = estimate_for(reads_once), estimate_for(settings("prod", []))
    assert sum(twice.startup.values()) == 45 and sum(once.startup.values()) == 43
    train = {s.step: s.hours for s in twice.steps}["train"] - {s.step: s.hours for s in once.steps}["train"]
    assert train == pytest.approx(2 / 60)
    for mode in ("deterministicFailure", "preemption"):
        assert twice.failures[mode].tpu_hours - once.failures[mode].tpu_hours == pytest.approx(2 / 60), mode


@pytest.mark.pure
def test_the_start_up_table_of_the_docs_is_the_estimates():
    """docs/cost.md "Start-up, before and after": each row's minutes are the four start-ups' components (the
    baseline: cold, the checkpoint read twice, which the defaults' first attempt is too), the totals their sums, the
    goal a quarter of the baseline's 45 minutes."""
    from core.estimate import (
        BASELINE_STARTUP_MINUTES,
        RESTART_STARTUP_MINUTES,
        STARTUP_GOAL_MINUTES,
        STARTUP_MINUTES,
        restarted,
        startup_minutes,
    )
    from tools.stack_files import ROOT

    page = (ROOT / "docs" / "cost.md").read_text()
    section = page.split("### Start-up, before and after", 1)[1].split("\n## ", 1)[0]
    rows = {
        cells[0]: cells[1:5]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith(("| component", "| ---"))
        for cells in [[c.strip().strip("*") for c in line.strip("|").split("|")]]
    }
    before = startup_minutes(replace(TUTORIAL, checkpoint_reads=2))
    assert sum(before.values()) == BASELINE_STARTUP_MINUTES
    columns = (before, STARTUP_MINUTES, RESTART_STARTUP_MINUTES, restarted(STARTUP_MINUTES, same_nodes=True))
    for name in STARTUP_MINUTES:
        assert rows[name] == [str(c[name]) for c in columns], name
    assert rows["total"] == [str(sum(c.values())) for c in columns]
    assert f"goal: {STARTUP_GOAL_MINUTES:g}" in section
