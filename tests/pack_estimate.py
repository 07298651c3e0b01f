"""The ``tpu-budget`` policy's estimate of a stack, as the policy computes it before it compares it with the budget
(``policy/tpu_rl_policies/budget.py`` ``_training_runs`` and ``_estimate``): what the pack's tests compare with the
program's own estimate (``core.estimate``) and with each other. A workload the policy cannot read fails the test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policy.tpu_rl_policies.budget import _estimate, _training_runs
from policy.tpu_rl_policies.resources import _resources


def stack_estimate(resources: Sequence[Any]) -> dict[str, Any]:
    """The estimate of ``resources`` (as the pack receives them: ``tests.policy_args``), which have TPU pools."""
    plain = _resources(resources)
    runs, problems = _training_runs(plain)
    assert not problems, problems
    estimate = _estimate(plain, runs)
    assert estimate is not None, "no TPU pool"
    return estimate
