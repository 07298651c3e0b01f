"""``least-privilege-pods`` on a whole Kubernetes object, as the engine runs it at ``pulumi up`` (``tests/analyzer.py``,
the policy alone): a ``podSpecPatch`` the pack cannot read is refused in full words, since the pod it patches would run
unjudged, and a readable one passes; a node path the object names outside its pod volumes (a PersistentVolume's
``hostPath``, a custom kind's template) is named with the object's own ``metadata.name`` (its Pulumi name only where
it has none), the property path, the node's path and the fix, on the resource judged. The check itself, called
directly, walks an object for node paths down to 64 levels below it and not past (the engine's own cut of deeper
values is ``properties.plain``'s)."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from policy.tpu_rl_policies.workloads import _least_privilege_pods
from tests import analyzer
from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

POLICY = analyzer.pack_policy("least-privilege-pods")
WORKFLOW = "kubernetes:argoproj.io/v1alpha1:Workflow"
VOLUME = "kubernetes:core/v1:PersistentVolume"


def resource(type_: str, name: str, props: dict[str, Any]) -> analyzer.Resource:
    return analyzer.Resource(type_, name, f"urn:pulumi:dev::tpu-rl::{type_}::{name}", props)


def found(type_: str, name: str, props: dict[str, Any]) -> list[str]:
    """The messages of ``least-privilege-pods`` on one resource at ``pulumi up``, each on that resource."""
    return analyzer.found_at_up(POLICY, resource(type_, name, props))


def host_path(label: str, where: str, path: str) -> str:
    return (
        f"{label}: {where} is the node's {path} (hostPath): a pod that mounts it, as a volume or through a claim bound "
        "to it, gets the node's files; only the Pathways workers on TPU hosts mount a host path (/tmp), as a volume "
        "of their pod spec"
    )


def workflow_with_patch(patch: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "rl"},
        "spec": {"templates": [{"name": "step", "podSpecPatch": patch}]},
    }


@pytest.mark.parametrize(
    "patch",
    ["[unclosed", "- a list\n- not a mapping", "a: &x 1\nb: *x\n"],
    ids=["not-yaml", "a-list", "an-alias"],
)
def test_a_pod_spec_patch_the_pack_cannot_read_is_refused(patch):
    assert found(WORKFLOW, "rl", workflow_with_patch(patch)) == [
        "spec.templates[0].podSpecPatch is not a pod spec the pack can read (YAML or JSON of a mapping, no anchors or "
        "aliases): the pod it patches would run unjudged; remove it"
    ]


@pytest.mark.parametrize(
    "patch", ['{"terminationGracePeriodSeconds": 30}', "terminationGracePeriodSeconds: 30\n"], ids=["json", "yaml"]
)
def test_a_readable_pod_spec_patch_that_asks_for_nothing_passes(patch):
    assert found(WORKFLOW, "rl", workflow_with_patch(patch)) == []


def test_a_persistent_volume_on_a_node_path_is_named_by_its_kubernetes_name():
    props = {"metadata": {"name": "node-scratch"}, "spec": {"hostPath": {"path": "/var/lib"}}}
    assert found(VOLUME, "scratch", props) == [host_path("PersistentVolume node-scratch", "spec.hostPath", "/var/lib")]


@pytest.mark.parametrize(
    "metadata",
    [{}, {"name": ""}, {"labels": {"name": "node-scratch"}}],
    ids=["no-name", "empty-name", "a-label-called-name"],
)
def test_a_persistent_volume_without_a_kubernetes_name_is_named_by_its_pulumi_name(metadata):
    props = {"metadata": metadata, "spec": {"hostPath": {"path": "/var/lib"}}}
    assert found(VOLUME, "scratch", props) == [host_path("PersistentVolume scratch", "spec.hostPath", "/var/lib")]


@pytest.mark.parametrize("host", [{}, {"path": None}, {"path": ""}], ids=["no-path", "null-path", "empty-path"])
def test_a_node_path_without_a_path_is_shown_as_none(host):
    """The API server would refuse it too; the finding still names the object and says there is no path, never
    ``None``."""
    props = {"metadata": {"name": "node-scratch"}, "spec": {"hostPath": host}}
    assert found(VOLUME, "scratch", props) == [host_path("PersistentVolume node-scratch", "spec.hostPath", "(none)")]


def test_a_persistent_volume_on_network_storage_passes():
    props = {"metadata": {"name": "shared"}, "spec": {"nfs": {"server": "filer", "path": "/exports"}}}
    assert found(VOLUME, "shared", props) == []


def nested(levels: int) -> dict[str, Any]:
    """A Workflow whose ``hostPath`` key is on a mapping ``levels`` levels below the object."""
    node: dict[str, Any] = {"hostPath": {"path": "/var"}}
    for _ in range(levels - 1):
        node = {"a": node}
    return {"metadata": {"name": "deep"}, "spec": node}


def checked(props: dict[str, Any]) -> list[tuple[str, str | None]]:
    """``least-privilege-pods``' check itself on a Workflow's props as given, with no depth cut of its own: the engine's
    path (``properties.plain``) cuts what lies below 64 levels, so there the ``hostPath``'s value at the walk's limit is
    not known and a finding that says so joins this one."""
    report = Reports()
    args = ResourceValidationArgs(WORKFLOW, props, f"urn:pulumi:dev::tpu-rl::{WORKFLOW}::deep", "deep", OPTIONS, None)
    _least_privilege_pods(args, props, report)
    return report.calls


def test_a_node_path_at_the_depth_limit_of_the_object_is_named():
    where = ".".join(["spec"] + ["a"] * 63 + ["hostPath"])
    assert checked(nested(64)) == [(host_path("Workflow deep", where, "/var"), None)]


def test_a_node_path_past_the_depth_limit_of_the_object_is_not_walked():
    assert checked(nested(65)) == []
