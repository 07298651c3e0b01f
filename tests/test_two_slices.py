"""Two slices, honestly: `tpu.slices: 2` runs train_rl disaggregated, the trainer
on one slice and the samplers on the other as one replica, through MaxText's own ``num_trainer_slices`` /
``num_samplers_slices`` (MaxText 0.2.5 ``model_creation_utils.setup_configs_and_devices``: both positive, the devices
grouped by ``slice_index``; without them train_rl takes its single-slice path) and ``rollout_data_parallelism=1``;
more slices are refused at plan time in one line with MaxText's reason, the estimate and the capacity check count
both slices, and the plan says two slices are experimental: what is verified (the meshes) and what is not (a run)."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from core.estimate import estimate_for
from infra.gcp.capacity.needs import needs
from tests.lifecycle_walk import settings
from workloads.specs.commands import slice_warnings, train_argv
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

TWO = ["tpu-rl:tpu.slices=2", "tpu-rl:training.iciExpertParallelism=1", "tpu-rl:training.rolloutTensorParallelism=32"]
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


def test_more_than_two_slices_are_refused_in_one_line_with_maxtexts_reason():
    with pytest.raises(ConfigError) as caught:
        settings("prod", [*TWO, "tpu-rl:tpu.slices=3"])
    assert str(caught.value).startswith(
        "tpu-rl:tpu.slices = 3 is invalid: at most 2: MaxText 0.2.5's train_rl builds the trainer's and the samplers' "
        "meshes as one slice each"
    )
    assert "\n" not in str(caught.value)


def test_the_samplers_run_one_replica_over_their_slice():
    """maxtext#2702 introduced multislice RL with one sampler replica; rl.yml's -1 would make eight of rollout TP 4
    on a 32-chip slice. With one, MaxText needs rollout TP x EP to be the slice's chips (get_rollout_kwargs_for_
    parallelism), which the configuration checks, at the rollout TP the message names."""
    assert "rollout_data_parallelism=1" in _train_argv(TWO)
    assert not [a for a in _train_argv([]) if a.startswith("rollout_data_parallelism=")]
    with pytest.raises(ConfigError) as caught:
        settings("prod", [*TWO, "tpu-rl:training.rolloutTensorParallelism=4"])
    assert "rollout TP x EP (4) must be the samplers' slice of 32 chips" in str(caught.value)
    assert "set rolloutTensorParallelism x rolloutExpertParallelism to 32" in str(caught.value)


def test_fsdp_is_maxtexts_at_tensor_parallelism_one():
    """setup_configs_and_devices sets the trainer's FSDP to its slice's chips when tensor parallelism is 1, whatever
    the setting: no setting is refused there; above 1 the setting must fill the slice."""
    at_one = settings("prod", [*TWO, "tpu-rl:training.iciTensorParallelism=1", "tpu-rl:training.iciFsdpParallelism=3"])
    assert at_one.training.knobs["ici_fsdp_parallelism"] == 3
    with pytest.raises(ConfigError, match="FSDP \\(3\\) x tensor \\(2\\) must be the trainer's slice of 32 chips"):
        settings("prod", [*TWO, "tpu-rl:training.iciFsdpParallelism=3"])


def test_the_plan_warns_that_two_slices_are_experimental():
    assert slice_warnings(1) == []
    (line,) = slice_warnings(2)
    assert line.startswith("tpu-rl:tpu.slices 2 is experimental: ")
    assert "MaxText 0.2.5's own code builds its meshes" in line, "what is verified"
    assert "no training run on two slices has been seen" in line, "what is not"
    assert "rollout_data_parallelism 1, maxtext#2702" in line


def test_the_program_owns_the_split():
    for key in ("num_trainer_slices", "num_samplers_slices", "rollout_data_parallelism"):
        with pytest.raises(ConfigError) as caught:
            settings("prod", [*TWO, f'tpu-rl:training.extraArgs={{"{key}": 1}}'])
        assert "set by the program " in str(caught.value) and "tpu-rl:tpu.slices" in str(caught.value)
