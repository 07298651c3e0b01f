"""The cost and duration estimate, checked against hand-computed numbers."""

from __future__ import annotations

import pytest

from core.tpu import resolve_slice
from infra.estimate import describe, estimate_run
from tests.conftest import plan_of

V6E_32 = resolve_slice("v6e", "ct6e-standard-4t", "4x8")
TUTORIAL = {"model": "gemma4-26b", "num_batches": 50, "batch_size": 4, "num_generations": 4, "max_target_length": 640}


@pytest.mark.pure
def test_tutorial_on_a_reservation():
    e = estimate_run(V6E_32, 1, "reservation", **TUTORIAL)
    # train: 0.75 h start-up + 50 steps x (6 s x 4 prompts x 4 generations) = 0.75 + 50 x 96 s = 2.0833 h
    steps = {s.step: s for s in e.steps}
    assert steps["train"].hours == pytest.approx(0.75 + 50 * 96 / 3600)
    # a reserved slice bills during every step: 32 chips x hours x $1.89
    assert steps["convert"].holds_tpu is False and steps["convert"].tpu_chip_hours == pytest.approx(32.0)
    assert steps["convert"].usd == pytest.approx(32 * 1.0 * 1.89)  # $60.48
    assert steps["train"].usd == pytest.approx(32 * 2.083333 * 1.89, rel=1e-5)  # $126.00
    assert steps["export"].usd == pytest.approx(32 * 0.75 * 1.89)  # $45.36
    assert e.total_hours == pytest.approx(1.0 + 2.083333 + 0.75, rel=1e-5)
    assert e.total_usd == pytest.approx(60.48 + 126.00 + 45.36, abs=0.01)  # $231.84
    assert e.idle_usd_per_day == pytest.approx(32 * 1.89 * 24)  # $1,451.52 per day until destroy
    assert any("from creation until destroy" in n for n in e.notes)


@pytest.mark.pure
def test_autoscaled_capacity_bills_only_while_training():
    e = estimate_run(V6E_32, 1, "spot", **TUTORIAL)
    steps = {s.step: s for s in e.steps}
    assert steps["convert"].usd == 0 and steps["export"].usd == 0
    # (2.0833 h + 0.25 h scale-up/down) x 32 chips x ($2.70 x 0.40 = $1.08)
    assert steps["train"].usd == pytest.approx((2.083333 + 0.25) * 32 * 1.08, rel=1e-5)  # $80.64
    assert e.idle_usd_per_day == 0
    on_demand = estimate_run(V6E_32, 1, "on-demand", **TUTORIAL)
    assert on_demand.total_usd == pytest.approx((2.083333 + 0.25) * 32 * 2.70, rel=1e-5)  # $201.60


@pytest.mark.pure
def test_smaller_slice_trains_longer():
    small = resolve_slice("v6e", "ct6e-standard-4t", "2x4")
    e = estimate_run(small, 1, "spot", **TUTORIAL)
    train = next(s for s in e.steps if s.step == "train")
    assert train.hours == pytest.approx(0.75 + 50 * 96 * 4 / 3600)


@pytest.mark.pure
def test_provision_only_reservation_still_shows_the_daily_bill():
    e = estimate_run(V6E_32, 1, "reservation", workflow=False, **TUTORIAL)
    assert e.total_usd == 0 and e.idle_usd_per_day == pytest.approx(1451.52)


def test_estimate_is_a_stack_output_and_printed_by_the_plan(capsys):
    from infra.plan import main

    output = plan_of("prod").outputs["estimate"]
    assert output["totalUsd"] == pytest.approx(231.84, abs=0.01)
    assert output["steps"]["convert"]["holdsTpu"] is False and output["steps"]["train"]["holdsTpu"] is True
    assert "reservation, 32 chips" in describe(output)
    assert main(["--stack", "prod"]) == 0
    assert "note: the reserved slice bills from creation until destroy" in capsys.readouterr().out
