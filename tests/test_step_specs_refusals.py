"""The two refusals every planned step passes before anything is created (``workloads.specs.step_specs``): its
ConfigMap of scripts must fit Kubernetes' size limit, and every object the controllers derive from its JobSet must be
one Kubernetes and JobSet would create. Each is one line an operator reads: the key to change, the step, and why.
Pure."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.config.values import ConfigError
from tests.lifecycle_walk import settings
from workloads.specs import step_specs
from workloads.specs.step_manifests import CONFIG_MAP_MAX_BYTES
from workloads.specs.step_specs import Step, Workflow, config_map_bytes, plan_workflow

pytestmark = pytest.mark.pure

BAD_LABEL = "bad value!"
"""A pod label value Kubernetes refuses for its characters alone (one problem, not a length)."""
LABEL_PROBLEM = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character"
)


@pytest.fixture
def prod() -> Workflow:
    """The prod stack's steps, planned for each test (the mutation run maps the builders to each test that plans)."""
    return plan_workflow(settings("prod", []))


def _largest(plan: Workflow) -> Step:
    return max(plan, key=lambda step: config_map_bytes(step.scripts))


def test_the_largest_config_map_of_scripts_exactly_at_the_limit_is_planned(prod, monkeypatch):
    """Kubernetes accepts a ConfigMap of exactly its limit, so the plan does too: no step is refused at the bound."""
    size = config_map_bytes(_largest(prod).scripts)
    assert size < CONFIG_MAP_MAX_BYTES, "the default stack is far from the limit"
    monkeypatch.setattr(step_specs, "CONFIG_MAP_MAX_BYTES", size)
    assert [step.step for step in plan_workflow(settings("prod", []))] == [step.step for step in prod]


def test_a_config_map_of_scripts_a_byte_over_the_limit_is_refused_naming_the_step_and_its_size(prod, monkeypatch):
    """One byte over: the step is refused with the one key that lengthens a script without bound, the step's name
    and the size Kubernetes would count (its filled-in data, the keys with the values)."""
    largest = _largest(prod)
    size = config_map_bytes(largest.scripts)
    monkeypatch.setattr(step_specs, "CONFIG_MAP_MAX_BYTES", size - 1)
    with pytest.raises(ConfigError) as refused:
        plan_workflow(settings("prod", []))
    assert refused.value.problems == (
        f'tpu-rl:training.extraArgs = "(its values)" is invalid: the {largest.step} step\'s scripts would be '
        f"{size} bytes, over a ConfigMap's {size - 1}; set fewer or shorter extraArgs",
    )


def test_config_map_bytes_counts_every_key_and_value_in_bytes():
    assert config_map_bytes({"data": {}}) == 0
    assert config_map_bytes({"data": {"run.sh": "echo", "é.py": "é"}}) == len("run.sh") + 4 + len("é.py") + 2


def test_each_steps_config_map_of_scripts_is_labelled_with_its_step_and_step_id(prod):
    """The ConfigMap carries the same step labels as its JobSet (its step id is the step's hash, filled in after the
    hash is computed), so a selector for one step's objects finds both."""
    for step in prod:
        labels = step.scripts["metadata"]["labels"]
        assert labels["tpu-rl/step-id"] == step.step_id == step.manifest["metadata"]["labels"]["tpu-rl/step-id"]
        assert labels["app.kubernetes.io/component"] == step.step
        assert step.scripts["metadata"]["name"] == f"{step.name}-scripts"


def _with_pod_labels(step: Step, count: int) -> dict[str, Any]:
    """The step's JobSet with ``count`` pod labels Kubernetes refuses (each its own problem, in order)."""
    manifest = copy.deepcopy(step.manifest)
    template = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels.update({f"tpu-rl/bad-{index}": BAD_LABEL for index in range(count)})
    return manifest


def test_a_jobset_every_derived_object_accepts_is_not_refused(prod):
    s = settings("prod", [])
    for step in prod:
        step_specs._creatable(s, step.step, step.manifest)


def test_a_step_whose_pods_kubernetes_would_refuse_is_refused_with_the_first_problem(prod):
    """The whole line: the key that names every derived object (the model's name), the step, its JobSet, the JobSet
    version whose webhook judges it, and the problem of the object the controllers would fail to create."""
    convert = prod["convert"]
    with pytest.raises(ConfigError) as refused:
        step_specs._creatable(settings("prod", []), "convert", _with_pod_labels(convert, 1))
    assert refused.value.problems == (
        f'tpu-rl:model.name = "gemma4-26b" is invalid: the convert step\'s JobSet {convert.name} could not run on '
        f"JobSet 0.10.1: Pod (manageJob) label tpu-rl/bad-0 {BAD_LABEL!r} ({len(BAD_LABEL)} characters): "
        f"{LABEL_PROBLEM}; a model's name must be short enough for every name derived from it",
    )


@pytest.mark.parametrize(("count", "more"), [(1, ""), (2, " (and 1 more)"), (3, " (and 2 more)")])
def test_a_refusal_shows_the_first_problem_and_counts_the_others(prod, count, more):
    """One line however many derived values fail: the first in full, the rest counted."""
    with pytest.raises(ConfigError) as refused:
        step_specs._creatable(settings("prod", []), "convert", _with_pod_labels(prod["convert"], count))
    (problem,) = refused.value.problems
    first = f"label tpu-rl/bad-0 {BAD_LABEL!r} ({len(BAD_LABEL)} characters): {LABEL_PROBLEM}"
    assert problem.endswith(f"{first}{more}; a model's name must be short enough for every name derived from it")
    assert problem.count("tpu-rl/bad-") == 1
