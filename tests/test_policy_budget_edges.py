"""``stack_estimate`` (the program's own estimate, from the pack's reading of a stack) refuses a stack it cannot read
with the first reason, in the words the budget gate reports."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies.budget import EstimateInputError, stack_estimate
from tests.policy_args import policy_resource

pytestmark = pytest.mark.pure

JOB = "kubernetes:batch/v1:Job"


def tpu_job(name: str) -> Any:
    """A Job whose pod asks for TPU chips and runs no training command."""
    limits = {"limits": {"google.com/tpu": 4}}
    container = {"name": "main", "image": "x", "command": ["sleep", "1"], "resources": limits}
    pod = {"spec": {"containers": [container]}}
    props = {"metadata": {"name": name, "namespace": "tpu-rl"}, "spec": {"template": pod}}
    return policy_resource(JOB, name, props)


def test_a_stack_it_cannot_read_is_refused_with_the_first_reason() -> None:
    with pytest.raises(EstimateInputError) as raised:
        stack_estimate([tpu_job("first"), tpu_job("second")])
    assert str(raised.value) == (
        "cannot find the train_rl run (tpu-rl's launcher (launch.py, known by its sha256: core/step_config.py) with "
        "its /tpu-rl/train.json) in Job first, whose pods ask for TPU chips, so no estimate"
    )


def test_a_stack_without_tpu_pools_has_no_estimate() -> None:
    assert stack_estimate([]) is None


def test_a_trainer_named_outside_the_launcher_is_refused_in_the_budget_gates_words() -> None:
    """A TPU pod that names the trainer in its command (not through the launcher) cannot be costed: the refusal says
    where the trainer is named and that there is no estimate."""
    job = tpu_job("direct")
    container = job.props["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["python3", "-m", "maxtext.trainers.post_train.rl.train_rl", "num_batches=1"]
    with pytest.raises(EstimateInputError) as raised:
        stack_estimate([job])
    assert str(raised.value) == (
        "Job direct names the trainer in its command, not through tpu-rl's launcher (launch.py, known by its sha256: "
        "core/step_config.py): this policy cannot read that run, so no estimate"
    )
