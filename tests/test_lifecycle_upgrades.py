"""Upgrades of a running stack: the JobSet or Kueue chart, and tpu-rl itself.

Upgrading the JobSet or Kueue chart updates its CRDs, or `up` refuses with the command that does. Helm installs a
chart's ``crds/`` when it first installs the chart and never on an upgrade (helm v3.20.2
``pkg/action/install.go`` ``installCRDs``, ``pkg/action/upgrade.go``), and the JobSet chart ships its CRD there
(``charts/jobset/crds/`` at v0.10.1 and v0.12.0); Kueue's chart renders its CRDs as templates
(``charts/kueue/templates/crd/`` at v0.17.1), which an upgrade applies like any other object, so Kueue needs no such
check: ``make controller`` refuses a Kueue release whose chart does not (tests/test_adopt_controller.py).

The version that names each CPU step's Kubernetes service account as its Google account
(docs/upgrades.md "Upgrading tpu-rl") re-runs no step: the identity hashes the account by its step
(``workloads.specs.step_specs.hashed_account``) and an existing JobSet keeps the one it has (``ignoreChanges``)."""

from __future__ import annotations

import contextlib
import functools

import pytest
import yaml

import infra.gcp.naming
import workloads.specs.step_manifests
from core.controllers import JOBSET_SCHEMA_FIELDS, JOBSET_VERSIONS, RELEASES
from core.names import step_ksa
from infra.k8s.manifests import JOBSET_CRD, jobset_crd_fields, jobset_crd_problem
from tests.conftest import release_crd
from tests.engine import HELM_RELEASE
from tests.lifecycle_walk import settings
from tests.scenario import STEPS, live, names
from workloads.specs.step_specs import ACCOUNT_PATH

CTX = "gke_acme-tpu_us-east5_tpu-rl-prod"
"""The kubeconfig context of the stack's cluster, which the line's command names."""

UPGRADE = ["tpu-rl:workflow.jobsetVersion=0.12.0"]


@functools.cache
def _crd(version: str) -> dict:
    return yaml.load(release_crd("jobset", version, "jobsets").read_text(), Loader=yaml.CSafeLoader)


def crd(version: str) -> dict:
    import copy

    return copy.deepcopy(_crd(version))


@pytest.mark.pure
def test_every_allowed_jobset_version_names_the_fields_its_crd_serves():
    assert set(JOBSET_SCHEMA_FIELDS) == set(JOBSET_VERSIONS) == set(RELEASES["jobset"])
    for version in JOBSET_VERSIONS:
        assert crd(version)["metadata"]["name"] == JOBSET_CRD
        assert jobset_crd_fields(crd(version)) == JOBSET_SCHEMA_FIELDS[version], version


@pytest.mark.pure
def test_the_crd_check_refuses_an_older_crd_in_one_line_with_the_command():
    assert jobset_crd_problem(None, "0.12.0", CTX, "prod") is None, "no CRD yet: the chart's install creates it"
    assert jobset_crd_problem(crd("0.12.0"), "0.12.0", CTX, "prod") is None
    assert jobset_crd_problem(crd("0.12.0"), "0.10.1", CTX, "prod") is None, (
        "a newer CRD serves the older controller's fields"
    )
    assert jobset_crd_problem(crd("0.10.1"), "0.12.0", CTX, "prod") == (
        "the cluster's JobSet CRD jobsets.jobset.x-k8s.io predates JobSet 0.12.0 (it has no spec.volumeClaimPolicies, "
        "status.currentInPlaceRestartAttempt, status.previousInPlaceRestartAttempt and 2 more): "
        "Helm installs a chart's CRDs only when it first installs the chart, never on an upgrade. Apply the new CRD, "
        "then run `make up STACK=prod` again: helm show crds oci://registry.k8s.io/jobset/charts/jobset "
        "--version 0.12.0 | "
        f"kubectl --context {CTX} apply --server-side --force-conflicts -f -"
    )
    unreadable = {"spec": {"versions": [{"name": "v1beta1"}]}}
    assert str(jobset_crd_problem(unreadable, "0.12.0", CTX, "prod")).startswith(
        "the cluster's JobSet CRD jobsets.jobset.x-k8s.io predates JobSet 0.12.0 (it has no spec.coordinator, "
        "spec.failurePolicy, spec.managedBy and "
    ), "a CRD it cannot read is taken as serving nothing"


@pytest.mark.pure
def test_a_crd_lacking_only_a_status_field_of_the_new_version_is_refused():
    """JobSet 0.11.1's CRD has 0.12.0's spec fields but not the per-Job restart counts 0.12.0's controller writes to
    the status (``failure_policy.go`` ``failurePolicyRecreateJob``): the API server would prune them."""
    older = crd("0.12.0")
    status = older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    del status["replicatedJobsStatus"]["items"]["properties"]["jobRestarts"]
    assert str(jobset_crd_problem(older, "0.12.0", CTX, "prod")).startswith(
        "the cluster's JobSet CRD jobsets.jobset.x-k8s.io predates JobSet 0.12.0 (it has no "
        "status.replicatedJobsStatus[].jobRestarts): "
    )


@pytest.mark.slow
def test_upgrading_jobset_stops_before_the_chart_until_its_crd_is_applied_then_upgrades(stack):
    """From 0.10.1 to 0.12.0 on a running stack: the install created 0.10.1's CRD; the upgrade's preview and its
    `up` read it, find it older and stop before the release changes (the release's version is an Output the check
    resolves), with the same line; once the documented command applied 0.12.0's CRD, the preview passes and `up`
    upgrades the release and keeps every step (the JobSet version is not part of a step's identity)."""
    stack.jobset_crds = {version: crd(version) for version in JOBSET_VERSIONS}
    assert stack.up().error is None
    installed = stack.cluster.get("CustomResourceDefinition", "", JOBSET_CRD)
    assert jobset_crd_fields(installed) == JOBSET_SCHEMA_FIELDS["0.10.1"]
    release = stack.urn(HELM_RELEASE, "jobset")

    previewed = stack.preview(overrides=UPGRADE)
    assert str(previewed.error) == jobset_crd_problem(
        installed, "0.12.0", settings(stack.name, stack.overrides).kube_context, stack.name
    ), "refused at plan time"
    assert ("Update", release) not in previewed.calls and stack.state[release].inputs["version"] == "0.10.1"
    refused = stack.up(overrides=UPGRADE)
    assert str(refused.error) == jobset_crd_problem(
        installed, "0.12.0", settings(stack.name, stack.overrides).kube_context, stack.name
    )
    assert stack.state[release].inputs["version"] == "0.10.1" and ("Update", release) not in refused.calls
    assert refused.actions == {}, "no step is touched"
    served = jobset_crd_fields(stack.cluster.get("CustomResourceDefinition", "", JOBSET_CRD))
    assert served == JOBSET_SCHEMA_FIELDS["0.10.1"], "Helm never upgrades crds/"

    stack.cluster.put(crd("0.12.0"))  # helm show crds ... | kubectl apply --server-side --force-conflicts -f -
    previewed = stack.preview(overrides=UPGRADE)
    assert previewed.error is None and previewed.plan.warnings() == [], previewed.error
    upgraded = stack.up(overrides=UPGRADE)
    assert upgraded.error is None, upgraded.error
    assert stack.state[release].inputs["version"] == "0.12.0" and ("Update", release) in upgraded.calls
    assert upgraded.actions == {name: "same" for name in names(stack, UPGRADE).values()}


KSA = "kubernetes:core/v1:ServiceAccount"
BINDING = "gcp:serviceaccount/iAMMember:IAMMember"
CPU_STEPS = ("convert", "export")


@contextlib.contextmanager
def accounts_named_tpu_rl_step(monkeypatch):
    """The program of the versions before each CPU step's account was named as its Google account: every stack's
    CPU step ran as ``tpu-rl-<step>``."""
    with monkeypatch.context() as before:
        for module in (workloads.specs.step_manifests, infra.gcp.naming):
            before.setattr(module, "step_ksa", lambda cluster, step: f"tpu-rl-{step}")
        yield


def pod_account(obj: dict) -> str:
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["serviceAccountName"]


def assert_renamed(stack, cluster: str) -> None:
    """Each CPU step's KSA object and Workload Identity binding now name ``<clusterName>-<step>``."""
    for step in ("convert", "export", "publish"):
        ksa = stack.state[stack.urn(KSA, f"{step}-ksa")].inputs["metadata"]
        assert ksa["name"] == step_ksa(cluster, step) == f"{cluster}-{step}"
        member = stack.state[stack.urn(BINDING, f"{step}-workload-identity")].inputs["member"]
        assert member.endswith(f".svc.id.goog[tpu-rl/{cluster}-{step}]"), member


@pytest.mark.slow
def test_upgrading_to_per_stack_accounts_re_runs_no_step_and_a_running_one_finishes_as_it_started(stack, monkeypatch):
    """A stack of the earlier version whose conversion and training are done and whose export runs when tpu-rl is
    upgraded: the upgrade's `up` finds every step the same (the identity hashes the account by its step, and the
    recorded account is put back: sg.go processIgnoreChanges), so nothing is replaced, updated or run again (JobSet
    v0.10.1's webhook would refuse the update: ``ValidateUpdate``, spec.replicatedJobs is immutable), and `up`
    waits for the same export, which finishes under its old account: the old KSA and binding are replaced
    create-first, their deletes scheduled after every other step (sg.go GenerateDeletes). The KSAs and bindings
    take the new names."""
    with accounts_named_tpu_rl_step(monkeypatch):
        interrupted = stack.up({"export": "interrupt"})
        assert "stopped while waiting for" in str(interrupted.error)
    step_names = names(stack)
    export = step_names["export"]
    uids = {step: live(stack, step)["metadata"]["uid"] for step in STEPS}
    assert {step: pod_account(live(stack, step)) for step in CPU_STEPS} == {s: f"tpu-rl-{s}" for s in CPU_STEPS}

    stack.on_wait = lambda s: s.finish(export)
    upgraded = stack.up()
    assert upgraded.error is None, upgraded.error
    assert upgraded.actions == {step_names[s]: "same" for s in STEPS}, "no step re-runs"
    assert {step: live(stack, step)["metadata"]["uid"] for step in STEPS} == uids
    jobsets = {stack.urn("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", step_names[s]) for s in STEPS}
    assert not [c for c in upgraded.calls if c[1] in jobsets and c[0] in ("Update", "Create", "Delete")]
    for step in CPU_STEPS:
        recorded = stack.step_state(step_names[step])
        assert ACCOUNT_PATH in recorded.ignore_changes
        assert pod_account(recorded.inputs) == pod_account(live(stack, step)) == f"tpu-rl-{step}", "kept"
    assert [w.split(":")[0] for w in stack.written] == list(STEPS), "each step ran once"
    cluster = live(stack, "convert")["metadata"]["labels"]["app.kubernetes.io/instance"]
    assert_renamed(stack, cluster)
    for step in ("convert", "export", "publish"):
        assert upgraded.resources[stack.urn(KSA, f"{step}-ksa")] == "replace", "a new name is a new object"

    again = stack.up()
    assert again.error is None and set(again.actions.values()) == {"same"}


@pytest.mark.slow
def test_after_the_upgrade_a_retried_step_runs_as_its_new_account(stack, monkeypatch):
    """A CPU step of the earlier version that failed is retried by the upgrade's `up`: a replacement takes the
    program's current inputs (sg.go continueStepsFromDiff re-runs Check; nothing ignored is carried over), so the
    new run's pods run as the renamed KSA, into the same output path (its identity is unchanged)."""
    with accounts_named_tpu_rl_step(monkeypatch):
        failed = stack.up({"export": "fail"})
        assert failed.error is not None
    step_names = names(stack)
    old_uid = live(stack, "export")["metadata"]["uid"]

    retried = stack.up()
    assert retried.error is None, retried.error
    assert retried.actions == {
        step_names["convert"]: "same",
        step_names["train"]: "same",
        step_names["export"]: "replace",
    }
    cluster = live(stack, "convert")["metadata"]["labels"]["app.kubernetes.io/instance"]
    export = live(stack, "export")
    assert export["metadata"]["uid"] != old_uid and pod_account(export) == f"{cluster}-export"
    assert pod_account(live(stack, "convert")) == "tpu-rl-convert", "a finished step keeps the account it ran as"
    assert_renamed(stack, cluster)


@pytest.mark.slow
def test_a_preview_that_cannot_read_the_cluster_warns_once_and_up_still_refuses(stack):
    """The preview's CRD check reads the cluster when it exists; one this machine cannot read (here the API server
    refuses the credential) is one warning and no refusal: the workflow's, which reads the same cluster, or without
    the workflow the check's own; `up` checks again before the chart changes, and refuses there."""
    stack.jobset_crds = {version: crd(version) for version in JOBSET_VERSIONS}
    assert stack.up().error is None
    installed = stack.cluster.get("CustomResourceDefinition", "", JOBSET_CRD)
    token, stack.cluster.token = stack.cluster.token, "another-token"  # every request now answers 401
    unreadable = [w for w in stack.preview(overrides=UPGRADE).plan.warnings() if "(HTTP 401)" in w]
    assert len(unreadable) == 1 and unreadable[0].startswith("preview could not read the cluster ("), unreadable

    without = [*UPGRADE, "tpu-rl:workflow.enabled=false"]
    previewed = stack.preview(overrides=without)
    assert previewed.error is None, previewed.error
    unreadable = [w for w in previewed.plan.warnings() if "(HTTP 401)" in w]
    assert len(unreadable) == 1 and "\n" not in unreadable[0], previewed.plan.warnings()
    assert unreadable[0].startswith("the preview did not check the cluster's JobSet CRD for JobSet 0.12.0 (")
    assert unreadable[0].endswith("); `pulumi up` checks it before the chart changes")
    stack.cluster.token = token
    assert str(stack.up(overrides=UPGRADE).error) == jobset_crd_problem(
        installed, "0.12.0", settings(stack.name, stack.overrides).kube_context, stack.name
    )
