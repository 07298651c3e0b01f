"""Two slices, honestly (issue 40 item 6): `tpu.slices: 2` runs train_rl disaggregated, the trainer on one slice and
the samplers on the other, through MaxText's own ``num_trainer_slices`` / ``num_samplers_slices`` (MaxText 0.2.4
``model_creation_utils.setup_configs_and_devices``: both positive, the devices grouped by ``slice_index``; without
them train_rl takes its single-slice path); more slices are refused at plan time in one line, and the estimate and the
capacity check count both slices."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from core.estimate import estimate_for
from infra.gcp.capacity.needs import needs
from tests.lifecycle_walk import settings
from workloads.specs.commands import train_argv
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

TWO = ["tpu-rl:tpu.slices=2", "tpu-rl:training.iciExpertParallelism=1"]
SPLIT = ["num_trainer_slices=1", "num_samplers_slices=1"]


def _train_argv(overrides: list[str]) -> list[str]:
    return train_argv(settings("prod", overrides), "gs://b/in/", "gs://b/out/")


def test_one_slice_leaves_train_rl_on_its_single_slice_path():
    argv = _train_argv([])
    assert not [a for a in argv if a.startswith(("num_trainer_slices=", "num_samplers_slices="))]


def test_two_slices_give_the_trainer_one_and_the_samplers_the_other():
    argv = _train_argv(TWO)
    assert [a for a in argv if a.startswith(("num_trainer_slices=", "num_samplers_slices="))] == SPLIT
    # MaxText's rule (configs/types.py): both -1 or both positive, and as many slices as the two ask for.
    trainer, samplers = (int(a.split("=")[1]) for a in SPLIT)
    assert trainer > 0 and samplers > 0 and trainer + samplers == 2


def test_two_slices_are_two_pathways_instances_and_two_worker_jobs():
    s = settings("prod", TWO)
    train = next(step for step in plan_workflow(s) if step.name.split("-")[-2] == "train")
    jobs = {job["name"]: job for job in train.manifest["spec"]["replicatedJobs"]}
    head = jobs["pathways-head"]["template"]["spec"]["template"]["spec"]
    args = [a for c in head.get("initContainers", []) + head["containers"] for a in c.get("args", [])]
    assert "--instance_count=2" in args
    assert jobs["worker"]["replicas"] == 2


def test_the_estimate_and_the_capacity_check_count_both_slices():
    one, two = settings("prod", []), settings("prod", TWO)
    assert estimate_for(two).chips == 2 * estimate_for(one).chips
    assert needs(two).vms == 2 * needs(one).vms and needs(two).chips == 2 * needs(one).chips


def test_more_than_two_slices_are_refused_in_one_line():
    with pytest.raises(ConfigError) as caught:
        settings("prod", ["tpu-rl:tpu.slices=3", "tpu-rl:training.iciExpertParallelism=1"])
    assert str(caught.value).startswith("tpu-rl:tpu.slices = 3 is invalid: at most 2: one slice, or two")
    assert "\n" not in str(caught.value)


def test_the_program_owns_the_split():
    for key in ("num_trainer_slices", "num_samplers_slices"):
        with pytest.raises(ConfigError) as caught:
            settings("prod", [*TWO, f'tpu-rl:training.extraArgs={{"{key}": 1}}'])
        assert "set by the program from tpu-rl:tpu.slices" in str(caught.value)
