"""Where the pack finds the pods of an object outside a built-in kind's API paths (``pods.pods``), found whole: each
``Pod`` it returns (where, spec, metadata, origin, namespace) is what every pod policy judges, and ``where`` is what
``known-workload-kinds`` names when it refuses a custom kind. Covered: the type tokens never searched (a ConfigMap's or
CRD's ``...List`` and ``...Patch`` forms) against a custom kind of the same name; a custom kind named ``Patch``; a
component token without a version (``kubernetes:yaml:ConfigGroup``); a pod spec's shape at the object's root
(``(root)``) and a root ``podSpecPatch``; the metadata a shape's pods get (its parent's); a stray image and pod fields
outside a pod spec, in the object's namespace through mappings and lists; a built-in kind's pod spec under a misplaced
``containers`` list reported once; and how deep the search goes (``MAX_DEPTH`` levels of mappings or lists, counted
once each). Found too shallow or too deep, a custom kind's pod runs unjudged or the search of a hostile object goes
unbounded; found with the wrong metadata or namespace, ``pod-bindings`` judges the wrong namespace and account."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from policy.tpu_rl_policies import workloads
from policy.tpu_rl_policies.pods import MAX_DEPTH, Pod, pods
from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

RUNNER = "kubernetes:example.com/v1:Runner"
IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5"
CUSTOM = (
    "a custom workload kind, whose pods get their namespace, service account and host access where the pack does not "
    "see; run it as a Job or JobSet"
)


def container() -> dict[str, Any]:
    return {"name": "main", "image": IMAGE}


def pod_spec() -> dict[str, Any]:
    return {"containers": [container()]}


def refused(type_: str, props: dict[str, Any], name: str = "in-stack") -> list[tuple[str, str | None]]:
    """What ``known-workload-kinds`` reports of one resource, called as the SDK calls its check: (message, URN)."""
    report = Reports()
    urn = f"urn:pulumi:dev::tpu-rl::{type_}::{name}"
    workloads._known_workload_kinds(ResourceValidationArgs(type_, props, urn, name, OPTIONS, None), props, report)
    return report.calls


def outside(kind: str, name: str, type_: str, shown: str) -> tuple[str, None]:
    """``known-workload-kinds``' refusal of a custom kind's pods at ``shown``, reported on the resource judged."""
    return (
        f"{kind} {name} ({type_}) runs containers outside the pod specs of the built-in workload kinds ({shown}): "
        + CUSTOM,
        None,
    )


def _configmaps() -> dict[str, Any]:
    return {"metadata": {"namespace": "tpu-rl"}, "items": [{"metadata": {"name": "cfg"}, "data": {"image": IMAGE}}]}


def _crds() -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"properties": {"image": {"type": "string"}}}}
    return {"metadata": {"namespace": "tpu-rl"}, "items": [{"spec": {"versions": [{"schema": schema}]}}]}


@pytest.mark.parametrize(
    ("kind", "props", "where", "stray"),
    [
        ("ConfigMapList", _configmaps(), "items[0].data", {"image": IMAGE}),
        ("ConfigMapListPatch", _configmaps(), "items[0].data", {"image": IMAGE}),
        ("SecretList", _configmaps(), "items[0].data", {"image": IMAGE}),
        (
            "CustomResourceDefinitionList",
            _crds(),
            "items[0].spec.versions[0].schema.openAPIV3Schema.properties",
            {"image": {"type": "string"}},
        ),
    ],
    ids=["configmap-list", "configmap-list-patch", "secret-list", "crd-list"],
)
def test_a_list_of_objects_never_searched_is_not_searched_but_a_custom_kind_of_its_name_is(kind, props, where, stray):
    """A ConfigMap's data, a Secret's, a CRD's schema name an ``image`` key without running one, in their ``...List``
    and ``...Patch`` forms too; the same kind name in another group is a custom kind, its stray image found (in the
    list's namespace, through its items) and refused."""
    group = "apiextensions.k8s.io" if kind.startswith("CustomResource") else "core"
    assert pods(f"kubernetes:{group}/v1:{kind}", props) == []
    assert refused(f"kubernetes:{group}/v1:{kind}", props) == []
    custom = f"kubernetes:example.com/v1:{kind}"
    assert pods(custom, props) == [Pod(where, {"containers": [stray]}, {}, origin="stray", namespace="tpu-rl")]
    shown = kind.removesuffix("Patch")
    assert refused(custom, props) == [outside(shown, "in-stack", custom, f"{where}.image")]


def test_a_custom_kind_named_patch_is_searched_like_any_other():
    """``Patch`` alone is a kind's name, not a patch of none: its pod template is found by its shape and refused."""
    patch = "kubernetes:example.com/v1:Patch"
    props = {"metadata": {"name": "p"}, "spec": {"template": {"spec": pod_spec()}}}
    assert pods(patch, props) == [Pod("spec.template.spec", pod_spec(), {}, origin="shape")]
    assert refused(patch, props) == [outside("Patch", "p", patch, "spec.template.spec")]


def test_a_pod_among_the_objects_of_a_component_without_a_version_is_refused():
    """``kubernetes:yaml:ConfigGroup`` names no group and version: no built-in kind, its objects searched by shape (the
    Pod's spec, with the Pod's metadata)."""
    group = "kubernetes:yaml:ConfigGroup"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug"}, "spec": pod_spec()}
    props = {"objs": [pod]}
    assert pods(group, props) == [Pod("objs[0].spec", pod_spec(), {"name": "debug"}, origin="shape")]
    assert refused(group, props) == [outside("ConfigGroup", "in-stack", group, "objs[0].spec")]


def test_a_pod_spec_shape_at_the_objects_root_is_named_root():
    """A custom kind that is itself a pod spec: found at ``(root)``, whose pods get no metadata of a parent."""
    props = {"containers": [container()]}
    assert pods(RUNNER, props) == [Pod("(root)", props, {}, origin="shape")]
    assert refused(RUNNER, props) == [outside("Runner", "in-stack", RUNNER, "(root)")]


@pytest.mark.parametrize(
    ("props", "where"),
    [
        ({"podSpecPatch": json.dumps(pod_spec())}, "podSpecPatch"),
        ({"spec": {"podSpecPatch": json.dumps(pod_spec())}}, "spec.podSpecPatch"),
    ],
    ids=["at-the-root", "in-the-spec"],
)
def test_a_pod_spec_patch_is_named_by_its_path_from_the_root(props, where):
    workflow = "kubernetes:argoproj.io/v1alpha1:Workflow"
    assert pods(workflow, props) == [Pod(where, pod_spec(), {}, origin="patch")]
    assert refused(workflow, props) == [outside("Workflow", "in-stack", workflow, where)]


def test_a_shape_found_in_a_template_gets_the_templates_metadata():
    """The mapping that holds a pod spec's shape is its template: its ``metadata`` (labels, annotations a policy reads)
    is the pods'."""
    template = {"metadata": {"labels": {"app": "runner"}}, "spec": pod_spec()}
    props = {"metadata": {"name": "r", "namespace": "tpu-rl"}, "spec": {"template": template}}
    assert pods(RUNNER, props) == [
        Pod("spec.template.spec", pod_spec(), {"labels": {"app": "runner"}}, origin="shape", namespace="tpu-rl")
    ]


def test_a_stray_image_runs_in_the_objects_namespace_through_mappings_and_lists():
    """A mapping with an image outside any pod spec is a pod of that one container, with no metadata of its own, in
    its object's namespace wherever it is."""
    step = container()
    runner = {"image": IMAGE}
    props = {"metadata": {"namespace": "tpu-rl"}, "spec": {"runner": runner, "steps": [{"name": "s"}, step]}}
    assert pods(RUNNER, props) == [
        Pod("spec.runner", {"containers": [runner]}, {}, origin="stray", namespace="tpu-rl"),
        Pod("spec.steps[1]", {"containers": [step]}, {}, origin="stray", namespace="tpu-rl"),
    ]


def test_a_security_context_without_containers_is_a_pods_part():
    """A pod's ``securityContext`` outside a pod spec (a custom kind's template) is judged as the pod's part."""
    spec = {"securityContext": {"runAsUser": 0}}
    props = {"metadata": {"namespace": "tpu-rl"}, "spec": spec}
    assert pods(RUNNER, props) == [Pod("spec", spec, {}, origin="part", namespace="tpu-rl")]


def test_a_security_context_beside_containers_that_are_not_a_list_is_not_a_part():
    """Near miss: beside ``containers`` (here a mapping of named containers) the ``securityContext`` is a container
    holder's, not a pod's; each container with an image is a stray."""
    main = container()
    props = {"spec": {"securityContext": {"runAsUser": 0}, "containers": {"main": main}}}
    assert pods(RUNNER, props) == [Pod("spec.containers.main", {"containers": [main]}, {}, origin="stray")]


def test_a_workloads_pod_spec_under_a_misplaced_containers_list_is_found_once():
    """A Deployment whose ``spec`` also holds a ``containers`` list: that list is a shape (refused), and the template's
    pod spec under it stays the built-in kind's, never reported again as a shape."""
    deployment = "kubernetes:apps/v1:Deployment"
    misplaced = {"containers": [container()], "template": {"spec": pod_spec()}}
    props = {"metadata": {"name": "web", "namespace": "tpu-rl"}, "spec": misplaced}
    assert pods(deployment, props) == [
        Pod("spec.template", pod_spec(), {}, namespace="tpu-rl"),
        Pod("spec", misplaced, {"name": "web", "namespace": "tpu-rl"}, origin="shape", namespace="tpu-rl"),
    ]
    assert refused(deployment, props) == [outside("Deployment", "web", deployment, "spec")]


def _nested(levels: int, by: str) -> dict[str, Any]:
    """A custom kind whose pod spec's shape is ``levels`` levels below its root: one key ``a``, then mappings (``a``)
    or lists."""
    node: Any = pod_spec()
    for _ in range(levels - 1):
        node = {"a": node} if by == "mapping" else [node]
    return {"a": node}


@pytest.mark.parametrize("by", ["mapping", "list"])
def test_a_pod_spec_shape_at_the_packs_depth_is_found_and_one_level_deeper_is_not(by):
    where = "a" + (".a" if by == "mapping" else "[0]") * (MAX_DEPTH - 1)
    assert pods(RUNNER, _nested(MAX_DEPTH, by)) == [Pod(where, pod_spec(), {}, origin="shape")]
    assert pods(RUNNER, _nested(MAX_DEPTH + 1, by)) == []
