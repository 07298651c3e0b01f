"""Upgrading the JobSet or Kueue chart updates its CRDs, or `up` refuses with the command that does.

Helm installs a chart's ``crds/`` when it first installs the chart and never on an upgrade (helm v3.20.2
``pkg/action/install.go`` ``installCRDs``, ``pkg/action/upgrade.go``), and the JobSet chart ships its CRD there
(``charts/jobset/crds/`` at v0.10.1 and v0.12.0); Kueue's chart renders its CRDs as templates
(``charts/kueue/templates/crd/`` at v0.17.1), which an upgrade applies like any other object."""

from __future__ import annotations

import functools

import pytest
import yaml

from core.config.schema import JOBSET_VERSIONS, KUEUE_VERSIONS
from infra.k8s.manifests import JOBSET_CRD, JOBSET_SPEC_FIELDS, jobset_crd_fields, jobset_crd_problem
from tests.conftest import shared_path
from tests.engine import HELM_RELEASE
from tests.scenario import names

REAL_CLUSTER = True
CRD_FILES = {
    "0.10.1": ("schemas", "jobset.x-k8s.io_jobsets.yaml"),
    "0.12.0": ("schemas", "jobset-v0.12.0", "jobset.x-k8s.io_jobsets.yaml"),
}
UPGRADE = ["tpu-rl:workflow.jobsetVersion=0.12.0"]


@functools.cache
def _crd(version: str) -> dict:
    return yaml.load(shared_path(*CRD_FILES[version]).read_text(), Loader=yaml.CSafeLoader)


def crd(version: str) -> dict:
    import copy

    return copy.deepcopy(_crd(version))


@pytest.mark.pure
def test_every_allowed_jobset_version_names_the_spec_fields_its_crd_serves():
    assert set(JOBSET_SPEC_FIELDS) == set(JOBSET_VERSIONS) == set(CRD_FILES)
    for version in JOBSET_VERSIONS:
        assert crd(version)["metadata"]["name"] == JOBSET_CRD
        assert jobset_crd_fields(crd(version)) == JOBSET_SPEC_FIELDS[version], version


@pytest.mark.pure
def test_the_crd_check_refuses_an_older_crd_in_one_line_with_the_command():
    assert jobset_crd_problem(None, "0.12.0") is None, "no CRD yet: the chart's install creates it"
    assert jobset_crd_problem(crd("0.12.0"), "0.12.0") is None
    assert jobset_crd_problem(crd("0.12.0"), "0.10.1") is None, "a newer CRD serves the older controller's fields"
    assert jobset_crd_problem(crd("0.10.1"), "0.12.0") == (
        "the cluster's JobSet CRD jobsets.jobset.x-k8s.io predates JobSet 0.12.0 (it has no spec.volumeClaimPolicies): "
        "Helm installs a chart's CRDs only when it first installs the chart, never on an upgrade. Apply the new CRD, "
        "then run `pulumi up` again: helm show crds oci://registry.k8s.io/jobset/charts/jobset --version 0.12.0 | "
        "kubectl apply --server-side --force-conflicts -f -"
    )
    unreadable = {"spec": {"versions": [{"name": "v1beta1"}]}}
    assert "spec.volumeClaimPolicies" in str(jobset_crd_problem(unreadable, "0.12.0"))


@pytest.mark.pure
def test_kueue_has_one_version_whose_chart_upgrades_its_crds():
    """A second Kueue version needs no CRD step as long as its chart keeps them in ``templates/crd/`` (check the
    new chart, then extend this test)."""
    assert KUEUE_VERSIONS == ("0.17.1",)


@pytest.mark.slow
def test_upgrading_jobset_stops_before_the_chart_until_its_crd_is_applied_then_upgrades(stack):
    """From 0.10.1 to 0.12.0 on a running stack: the install created 0.10.1's CRD; the upgrade's `up` reads it,
    finds it older and stops before the release changes (the release's version is an Output the check
    resolves); once the documented command applied 0.12.0's CRD, `up` upgrades the release and keeps every
    step (the JobSet version is not part of a step's identity)."""
    stack.jobset_crds = {version: crd(version) for version in CRD_FILES}
    assert stack.up().error is None
    installed = stack.cluster.get("CustomResourceDefinition", "", JOBSET_CRD)
    assert jobset_crd_fields(installed) == JOBSET_SPEC_FIELDS["0.10.1"]
    release = stack.urn(HELM_RELEASE, "jobset")

    refused = stack.up(overrides=UPGRADE)
    assert str(refused.error) == jobset_crd_problem(installed, "0.12.0")
    assert stack.state[release].inputs["version"] == "0.10.1" and ("Update", release) not in refused.calls
    assert refused.actions == {}, "no step is touched"
    assert (
        jobset_crd_fields(stack.cluster.get("CustomResourceDefinition", "", JOBSET_CRD)) == JOBSET_SPEC_FIELDS["0.10.1"]
    ), "Helm never upgrades crds/"

    stack.cluster.put(crd("0.12.0"))  # helm show crds ... | kubectl apply --server-side --force-conflicts -f -
    upgraded = stack.up(overrides=UPGRADE)
    assert upgraded.error is None, upgraded.error
    assert stack.state[release].inputs["version"] == "0.12.0" and ("Update", release) in upgraded.calls
    assert upgraded.actions == {name: "same" for name in names(stack, UPGRADE).values()}
