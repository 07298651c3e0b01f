"""Run lifecycle: identity decides replacement, an interrupted `up` re-attaches, a failed step is retried.

The engine behaviour these options rely on is cited in workloads/specs/step_specs.py, workloads/observe/live_state.py
and docs/when-a-step-fails.md ("What happens when..."); here everything the mock runtime can show is pinned.
"""

from __future__ import annotations

import re

import pytest

from infra.k8s import live
from tests.conftest import SENTINEL_TOKEN, one, plan_of, step_resources
from tests.lifecycle_walk import settings
from tools.lifecycle_walk import table, walk
from tools.plan import plan_stack
from tools.stack_files import ROOT
from workloads.specs.step_specs import AWAIT_GRACE_SECONDS, OPERATIONAL_PATHS, plan_workflow

UPGRADES = (ROOT / "docs" / "upgrades.md").read_text()
"""The page with the generated "what re-runs" table (tools/docs_tables.py writes it)."""


@pytest.fixture(scope="module")
def walks():
    return {stack: walk(stack) for stack in ("dev", "prod")}


# The walk changes every key of the schema, one at a time, and plans each: about 15 s per stack, so it is the slow
# tier's (make test-slow); the fast tier pins the step names themselves (test_pins_workloads STEP_NAMES).
@pytest.mark.slow
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_key_renames_a_step_or_is_ignored(walks, stack):
    """Walks every key of the schema (a new key is covered automatically; the walk fails if it cannot
    find a valid other value). classify() fails on any step that keeps its name while a field outside
    its ignoreChanges changed."""
    outcomes = walks[stack]
    from core.config.schema import FIELDS

    assert set(outcomes) == {f.key for f in FIELDS}
    ignored = {key for key, result in outcomes.items() if "ignored" in result.values()}
    assert ignored <= {
        "tpu-rl:workflow.maxRestarts",
        "tpu-rl:workflow.stallTimeout",
        "tpu-rl:workflow.restartDrill",  # a measurement of the run's restart: the run computes the same
        "tpu-rl:tpu.capacity",  # the default restarts follow the capacity mode
        "tpu-rl:tpu.reservation",  # on dev it switches the capacity to reservation
        "tpu-rl:workflow.timeouts.convert",
        "tpu-rl:workflow.timeouts.train",
        "tpu-rl:workflow.timeouts.export",
        "tpu-rl:workflow.timeouts.publish",
        "tpu-rl:kueue.enabled",  # which queue admits a step (the queue-name label)
        "tpu-rl:kueue.queue",
        "tpu-rl:kueue.recoveryTimeout",  # how long an attempt waits for its slice (TPU_RL_SLICE_WAIT_SECONDS)
        "tpu-rl:kueue.podsReadyTimeout",  # the recovery budget's default is podsReadyTimeout + 4 h
    }, "only operational settings may change a step without renaming it"
    for key in ("tpu-rl:kueue.enabled", "tpu-rl:kueue.queue"):
        assert set(outcomes[key].values()) == {"ignored"}, key
    for key in ("tpu-rl:workflow.timeouts.train", "tpu-rl:workflow.maxRestarts", "tpu-rl:workflow.restartDrill"):
        assert outcomes[key] == {"convert": "kept", "train": "ignored", "export": "kept", "publish": "kept"}, key
    for key in ("tpu-rl:training.learningRate", "tpu-rl:training.numBatches", "tpu-rl:images.pathwaysServer"):
        assert outcomes[key] == {"convert": "kept", "train": "re-runs", "export": "re-runs", "publish": "re-runs"}, key
    # A publication of its own: another repository or visibility uploads again (to a new branch); the
    # deadline bounds it without renaming it.
    for key in ("tpu-rl:publish.repo", "tpu-rl:publish.private"):
        assert outcomes[key] == {"convert": "kept", "train": "kept", "export": "kept", "publish": "re-runs"}, key
    assert outcomes["tpu-rl:workflow.timeouts.publish"] == {
        "convert": "kept",
        "train": "kept",
        "export": "kept",
        "publish": "ignored",
    }
    for key in ("tpu-rl:model.revision", "tpu-rl:images.maxtext", "tpu-rl:namespace", "tpu-rl:bucketName"):
        assert set(outcomes[key].values()) == {"re-runs"}, key
    for key in (
        "tpu-rl:hfToken",
        "tpu-rl:hfWriteToken",
        "tpu-rl:cpuPool.machineType",
        "tpu-rl:gke.maintenanceExclusion",
    ):
        assert set(outcomes[key].values()) == {"kept"}, key


@pytest.mark.slow  # the walk above
def test_the_upgrades_page_publishes_what_reruns_when_you_change_a_key(walks):
    expected = table(walks["prod"])
    assert expected in UPGRADES, "docs/upgrades.md's table is stale (make readme); it should read:\n" + expected


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("dev", ()),
        ("prod", ()),
        ("prod", ("tpu-rl:workflow.timeouts.train=30h", "tpu-rl:workflow.maxRestarts=0")),
        (
            "prod",
            (
                "tpu-rl:tpu.slices=2",
                "tpu-rl:training.iciExpertParallelism=1",
                "tpu-rl:training.rolloutTensorParallelism=32",
                "tpu-rl:training.optimizer=adamw",
            ),
        ),
    ],
)
def test_the_walk_sees_what_the_program_registers(stack, overrides):
    """The pure builders the walk uses are exactly what the program registers under the mock runtime."""
    registered = step_resources(plan_of(stack, *overrides))
    built = plan_workflow(settings(stack, list(overrides)))
    for step in built.steps:
        resource = registered[step.step]
        assert resource["name"] == step.name == resource["inputs"]["metadata"]["name"]
        inputs = {**resource["inputs"], "metadata": dict(resource["inputs"]["metadata"])}
        annotations = inputs["metadata"].pop("annotations")
        expected = {**step.manifest, "metadata": dict(step.manifest["metadata"])}
        assert annotations == {
            **expected["metadata"].pop("annotations"),
            **{k: v for k, v in annotations.items() if k == "tpu-rl/input"},
        }
        assert inputs == expected
        options = resource["options"]
        assert options["ignoreChanges"] == list(step.ignore_changes)
        assert options["ignoreChanges"][: len(OPERATIONAL_PATHS)] == list(OPERATIONAL_PATHS)
        assert options["customTimeouts"] == {"create": "10m", "update": "10m", "delete": "20m"}, "the apply only"


def test_step_options_never_replace_a_step_for_anything_but_its_identity(prod_plan):
    for step, resource in step_resources(prod_plan).items():
        options = resource["options"]
        assert options["replaceOnChanges"] == [], "'*' would also match #initerror and kill a running step"
        assert options["deleteBeforeReplace"] is True, "a retry re-uses the name"
        assert options["deletedWith"] == "cluster" and options["provider"] == "gke"
        assert "pulumi.com/replaceUnready" not in resource["inputs"]["metadata"]["annotations"], (
            "replaceUnready replaces a Job that is still running"
        )
        assert resource["name"].startswith(f"gemma4-26b-{step}-")


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_pulumi_waits_longer_than_each_steps_own_deadline(stack):
    s = settings(stack, [])
    for step in plan_workflow(s).steps:
        deadline = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"]
        # Each JobSet attempt (a restart re-creates the Jobs) gets the first Job's deadline; the CPU steps never
        # restart (their Job retries its pod within the same deadline).
        restarts = step.manifest["spec"]["failurePolicy"]["maxRestarts"]
        assert restarts == (s.workflow.max_restarts if step.step == "train" else 0)
        attempts = 1 + restarts
        assert step.await_seconds == attempts * (deadline + AWAIT_GRACE_SECONDS)
        assert step.await_seconds > attempts * deadline
        first = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert first["activeDeadlineSeconds"] == deadline == s.workflow.timeouts[step.step]


def test_prod_waits_for_two_24h_attempts():
    assert plan_workflow(settings("prod", [])).train.await_seconds == 2 * (24 * 3600 + 15 * 60)


def test_the_names_the_next_up_would_use_are_stable():
    first = {s: r["name"] for s, r in step_resources(plan_of("prod")).items()}
    again = plan_stack(ROOT / "Pulumi.prod.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})[0]
    assert {s: r["name"] for s, r in step_resources(again).items()} == first
    assert all(re.fullmatch(rf"gemma4-26b-{s}-[0-9a-f]{{10}}", n) for s, n in first.items())


def test_the_kubernetes_provider_adopts_a_run_a_killed_up_created_and_never_drops_state(prod_plan):
    provider = one(prod_plan, "pulumi:providers:kubernetes", "gke")["inputs"]
    assert provider["upsertExistingObjects"] == "true" or provider["upsertExistingObjects"] is True
    assert provider["clusterIdentifier"] == "my-tpu-prod-project/us-east5/tpu-rl-prod"
    # deleteUnreachable would make a refresh that cannot reach the cluster drop every object from the state.
    assert "deleteUnreachable" not in provider and "skipUpdateUnreachable" not in provider


# ---------------------------------------------------------------------------------------------
# What the next `up` does after each real sequence: tests/test_scenarios.py


def test_offline_plans_never_read_the_cluster(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the offline plan read a cluster")

    for method in ("get", "list", "crd", "dry_run_create"):
        monkeypatch.setattr(live.ClusterReader, method, forbidden)
    plan, _ = plan_stack(ROOT / "Pulumi.dev.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})
    assert plan.error is None


URNS = {
    "namespace": "tpu-rl:k8s:KubernetesPlatform$kubernetes:core/v1:Namespace::namespace",
    "hf-token": "tpu-rl:k8s:KubernetesPlatform$kubernetes:core/v1:Secret::hf-token",
    "network-policy-default-deny-ingress": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:networking.k8s.io/v1:NetworkPolicy::network-policy-default-deny-ingress"
    ),
    "network-policy-pathways-between-training-pods": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:networking.k8s.io/v1:NetworkPolicy::"
        "network-policy-pathways-between-training-pods"
    ),
    "network-policy-evaluation-egress": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:networking.k8s.io/v1:NetworkPolicy::network-policy-evaluation-egress"
    ),
    # One service account per CPU step. The shared workload-ksa of earlier versions (tpu-rl-workload) has no
    # alias: no URN here names that object, so the end of the `up` that upgrades a stack deletes it.
    "convert-ksa": "tpu-rl:k8s:KubernetesPlatform$kubernetes:core/v1:ServiceAccount::convert-ksa",
    "export-ksa": "tpu-rl:k8s:KubernetesPlatform$kubernetes:core/v1:ServiceAccount::export-ksa",
    "publish-ksa": "tpu-rl:k8s:KubernetesPlatform$kubernetes:core/v1:ServiceAccount::publish-ksa",
    # The training head's own account and its one grant: reading its namespace's pods (its slice's workers).
    "train-head-serviceaccount": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:core/v1:ServiceAccount::train-head-serviceaccount"
    ),
    "train-head-role": "tpu-rl:k8s:KubernetesPlatform$kubernetes:rbac.authorization.k8s.io/v1:Role::train-head-role",
    "train-head-rolebinding": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:rbac.authorization.k8s.io/v1:RoleBinding::train-head-rolebinding"
    ),
    "scratch-storage-class": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:storage.k8s.io/v1:StorageClass::scratch-storage-class"
    ),
    "jobset": "tpu-rl:k8s:KubernetesPlatform$kubernetes:helm.sh/v3:Release::jobset",
    "kueue": "tpu-rl:k8s:KubernetesPlatform$kubernetes:helm.sh/v3:Release::kueue",
    "kueue-tpu-flavor": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor::kueue-tpu-flavor"
    ),
    "kueue-cpu-flavor": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor::kueue-cpu-flavor"
    ),
    "kueue-cluster-queue": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue::kueue-cluster-queue"
    ),
    "kueue-local-queue": (
        "tpu-rl:k8s:KubernetesPlatform$kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue::kueue-local-queue"
    ),
    "convert": "tpu-rl:workflow:WorkflowRun$kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::{name}",
    "train": "tpu-rl:workflow:WorkflowRun$kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::{name}",
    "export": "tpu-rl:workflow:WorkflowRun$kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::{name}",
    # Each step's scripts are files of its own ConfigMap, named after the step (a new object per step).
    "convert-scripts": "tpu-rl:workflow:WorkflowRun$kubernetes:core/v1:ConfigMap::{name}",
    "train-scripts": "tpu-rl:workflow:WorkflowRun$kubernetes:core/v1:ConfigMap::{name}",
    "export-scripts": "tpu-rl:workflow:WorkflowRun$kubernetes:core/v1:ConfigMap::{name}",
}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_kubernetes_urn_is_pinned(stack):
    """The provider adopts existing objects (upsertExistingObjects): an object whose URN changed would be
    created (adopted) under the new URN and then deleted by name with the old one at the end of `up`
    (step_generator.go GenerateDeletes; the provider deletes by name). A change here needs an alias."""
    plan = plan_of(stack)
    steps = {s: r["name"] for s, r in step_resources(plan).items()}
    kubernetes = {
        r["name"] for r in plan.resources if r["type"].startswith("kubernetes:") and "providers" not in r["type"]
    }
    expected = {}
    for key, suffix in URNS.items():
        step = key.removesuffix("-scripts")
        name = steps[step] + "-scripts" if key.endswith("-scripts") else steps.get(key, key)
        expected[name] = f"urn:pulumi:{stack}::tpu-rl::" + suffix.format(name=name)
    assert kubernetes == set(expected)
    assert {name: plan.urns[name] for name in kubernetes} == expected
    providers = {r["options"]["provider"] for r in plan.resources if r["name"] in kubernetes}
    assert providers == {"gke"}, "every object names the provider (whose version selects the plugin)"
    assert all(not r["options"]["aliases"] for r in plan.resources if r["name"] in kubernetes), "add aliases here"
