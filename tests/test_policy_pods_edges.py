"""Where the pack finds the pods of a ``...List`` and of an Argo ``podSpecPatch`` (``policy/tpu_rl_policies/pods.py``):
each item of a list is the kind its ``apiVersion`` and ``kind`` name (the list's own where it names none), placed at
its API path, in its own namespace (the list's where it sets none); a patch is read up to ``MAX_TEXT`` characters
and no further. A pod found at its API path is judged as the built-in kind's; one found elsewhere is a custom kind's
(``known-workload-kinds`` refuses it), so where each is found is what the policies decide on."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

pytestmark = pytest.mark.pure

pod_module = importlib.import_module("policy.tpu_rl_policies.pods")
IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5"
POD_SPEC = {"containers": [{"name": "main", "image": IMAGE}]}
WORKFLOW = "kubernetes:argoproj.io/v1alpha1:Workflow"


def found(resource_type: str, props: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(where, origin, namespace) of every pod the pack finds in a resource."""
    return [(p.where, p.origin, p.namespace) for p in pod_module.pods(resource_type, props)]


def _deployment(**item: Any) -> dict[str, Any]:
    return {**item, "spec": {"template": {"spec": POD_SPEC}}}


@pytest.mark.parametrize(
    "item",
    [
        {"apiVersion": "apps/v1", "kind": "Deployment"},
        {"kind": "Deployment"},
        {},
    ],
    ids=["its-group-and-kind", "the-lists-group", "the-lists-kind"],
)
def test_each_item_of_a_workload_list_is_placed_at_its_kinds_api_path(item):
    """An item naming its group (``apps/v1``), only its kind (the list's group) or nothing (the list's kind) is a
    Deployment: its pods are at ``spec.template``, every item's, never judged as a custom kind's."""
    props = {"metadata": {"namespace": "tpu-rl"}, "items": [_deployment(**item), _deployment(**item)]}
    assert found("kubernetes:apps/v1:DeploymentList", props) == [
        ("items[0].spec.template", "api", "tpu-rl"),
        ("items[1].spec.template", "api", "tpu-rl"),
    ]
    assert pod_module.unplaced("kubernetes:apps/v1:DeploymentList", props) == []


def test_an_item_of_a_custom_group_in_a_list_is_found_by_its_shape():
    """Near miss: the same kind in another group is a custom kind, its pod found by shape (and refused)."""
    props = {"items": [_deployment(apiVersion="evil.io/v1", kind="Deployment")]}
    assert found("kubernetes:apps/v1:DeploymentList", props) == [("items[0].spec.template.spec", "shape", None)]


def test_a_list_items_pods_run_in_its_own_namespace_or_else_the_lists():
    """``pod-bindings`` judges each pod's namespace: an item's own ``metadata.namespace`` wins over the list's."""
    props = {
        "metadata": {"namespace": "tpu-rl"},
        "items": [
            {"kind": "Pod", "metadata": {"namespace": "kube-system"}, "spec": POD_SPEC},
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": POD_SPEC},
        ],
    }
    assert found("kubernetes:core/v1:PodList", props) == [
        ("items[0].spec", "api", "kube-system"),
        ("items[1].spec", "api", "tpu-rl"),
    ]
    unset = {"items": [{"kind": "Pod", "spec": POD_SPEC}]}
    assert found("kubernetes:core/v1:PodList", unset) == [("items[0].spec", "api", None)]


def test_a_list_within_a_list_passes_its_group_to_its_items():
    """An item without an ``apiVersion`` takes its list's, at any depth: the inner Pod is a core/v1 Pod."""
    inner = {"kind": "PodList", "items": [{"kind": "Pod", "spec": POD_SPEC}]}
    props = {"metadata": {"namespace": "tpu-rl"}, "items": [inner]}
    assert found("kubernetes:core/v1:PodList", props) == [("items[0].items[0].spec", "api", "tpu-rl")]


def _patch_of_length(length: int) -> str:
    """A pod spec of ``length`` characters: ``hostPID`` and a long host name."""
    head = "hostPID: true\nhostname: "
    return head + "x" * (length - len(head))


@pytest.mark.parametrize(
    ("length", "origin"),
    [(pod_module.MAX_TEXT, "patch"), (pod_module.MAX_TEXT + 1, "unread")],
    ids=["at-the-limit", "past-it"],
)
def test_a_pod_spec_patch_is_read_up_to_the_limit(length, origin):
    """A ``podSpecPatch`` of ``MAX_TEXT`` characters is read as the pod spec it merges in (its ``hostPID`` judged);
    one character more and it is unread (refused as a patch the pack cannot read)."""
    text = _patch_of_length(length)
    assert len(text) == length
    props = {"spec": {"templates": [{"name": "main", "podSpecPatch": text}]}}
    (patch,) = [p for p in pod_module.pods(WORKFLOW, props) if p.where.endswith("podSpecPatch")]
    assert (patch.where, patch.origin) == ("spec.templates[0].podSpecPatch", origin)
    assert patch.spec.get("hostPID") is (True if origin == "patch" else None)
