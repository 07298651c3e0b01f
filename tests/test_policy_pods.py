"""Pods in any shape: every Kubernetes object whose properties carry an ``image`` at any depth is judged as a pod
(image source, privilege, capabilities) where the image is outside a pod spec the pack knows, and refused as a custom
workload kind (``known-workload-kinds``), one line naming the kind; so is a pod spec outside a built-in kind's API
paths, still judged as a pod."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests import analyzer
from tests.pure_plan import pure_plan
from tools.plan.offline import Plan

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
BY_NAME = {p.name: p for p in policies.POLICIES}
IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5"
HOSTILE = "docker.io/library/busybox:1.36"
WORKFLOW = "kubernetes:argoproj.io/v1alpha1:Workflow"
PIPELINE = "kubernetes:tekton.dev/v1:Task"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"


def _object(type_: str, body: dict[str, Any]) -> analyzer.Resource:
    manifest = {"metadata": {"name": "evil", "namespace": "tpu-rl"}, **body}
    return analyzer.Resource(type_, "evil", f"urn:pulumi:prod::tpu-rl::{type_}::evil", manifest)


def findings(resource: analyzer.Resource, policy: str) -> list[str]:
    pack = analyzer.Pack({"all": "mandatory"}, policies=[BY_NAME[policy]], stack="prod")
    return [f.message for f in pack.analyze(resource)]


def _argo(container: dict[str, Any]) -> analyzer.Resource:
    return _object(WORKFLOW, {"spec": {"entrypoint": "main", "templates": [{"name": "main", "container": container}]}})


def _tekton(*steps: dict[str, Any]) -> analyzer.Resource:
    return _object(PIPELINE, {"spec": {"steps": list(steps)}})


def test_an_argo_template_container_is_refused_naming_the_kind():
    (found,) = findings(_argo({"image": IMAGE, "command": ["true"]}), "known-workload-kinds")
    assert found == (
        f"Workflow evil ({WORKFLOW}) runs containers outside the pod specs of the built-in workload kinds "
        "(spec.templates[0].container.image): a custom workload kind, whose pods get their namespace, service account "
        "and host access where the pack does not see; run it as a Job or JobSet"
    )


def test_tekton_steps_are_one_line_naming_every_path():
    (found,) = findings(_tekton(*({"name": f"s{i}", "image": IMAGE} for i in range(4))), "known-workload-kinds")
    assert "(spec.steps[0].image, spec.steps[1].image, spec.steps[2].image and 1 more)" in found


@pytest.mark.parametrize(
    ("policy", "container", "words"),
    [
        ("trusted-registries", {"name": "main", "image": HOSTILE}, f"image {HOSTILE} is not from a trusted registry"),
        ("pinned-images", {"name": "main", "image": IMAGE.replace(":0.2.5", ":latest")}, "is not pinned"),
        ("least-privilege-pods", {"image": IMAGE, "securityContext": {"privileged": True}}, "is privileged"),
        (
            "least-privilege-pods",
            {"image": IMAGE, "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
            "adds capabilities",
        ),
    ],
)
def test_a_stray_image_is_judged_as_a_pod(policy, container, words):
    if policy == "trusted-registries":
        plan = Plan(stack="prod", resources=[_argo_resource(container)], outputs={})
        pack = analyzer.Pack({"all": "mandatory"}, policies=[BY_NAME[policy]], stack="prod")
        found = [f.message for f in pack.analyze_stack(analyzer.resources(plan, preview=False, stack_view=True))]
    else:
        found = findings(_argo(container), policy)
    assert any(words in m for m in found), found
    assert not [m for m in findings(_argo({"name": "main", "image": IMAGE}), policy) if words in m]


def _argo_resource(container: dict[str, Any]) -> dict[str, Any]:
    r = _argo(container)
    options = {"protect": False, "ignoreChanges": [], "deleteBeforeReplace": False, "customTimeouts": None}
    return {"type": r.type, "name": r.name, "inputs": r.props, "options": {**options, "parent": None}}


def test_a_pod_spec_of_a_custom_kind_is_judged_as_a_pod_and_refused_as_a_custom_kind():
    """A ``containers`` list (LeaderWorkerSet), with init containers: judged as a pod by the pod policies, and refused
    as a kind whose pods' namespace and account the pack cannot place; the same pod as a built-in Deployment passes."""
    spec: dict[str, Any] = {
        "containers": [{"name": "a", "image": IMAGE}],
        "initContainers": [{"name": "b", "image": IMAGE}],
    }
    lws = _object(LWS, {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": spec}}}})
    (found,) = findings(lws, "known-workload-kinds")
    assert "(spec.leaderWorkerTemplate.workerTemplate.spec)" in found and "custom workload kind" in found
    deployment = _object("kubernetes:apps/v1:Deployment", {"spec": {"template": {"spec": spec}}})
    assert findings(deployment, "known-workload-kinds") == []
    spec["containers"][0]["securityContext"] = {"privileged": True}
    assert any("is privileged" in m for m in findings(lws, "least-privilege-pods"))


def test_an_image_beside_a_pod_spec_is_still_refused():
    """Just outside: the same object with one more ``image`` outside its pod spec."""
    spec = {"containers": [{"name": "a", "image": IMAGE}]}
    lws = _object(
        LWS, {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": spec}}, "sidecar": {"image": IMAGE}}}
    )
    (found,) = findings(lws, "known-workload-kinds")
    assert "(spec.leaderWorkerTemplate.workerTemplate.spec, spec.sidecar.image)" in found


def test_objects_that_carry_no_workload_are_not_searched():
    for type_ in ("kubernetes:core/v1:ConfigMap", "kubernetes:helm.sh/v3:Release"):
        body = {"data": {"image": IMAGE}, "values": {"image": {"tag": "x"}}}
        assert findings(_object(type_, body), "known-workload-kinds") == []
    pool = _object("gcp:container/nodePool:NodePool", {"nodeConfig": {"imageType": "COS_CONTAINERD"}})
    assert findings(pool, "known-workload-kinds") == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_example_stacks_have_no_unknown_workload_kind(stack):
    plan = pure_plan(stack)
    pack = analyzer.Pack(analyzer.policy_config_file(stack), policies=[BY_NAME["known-workload-kinds"]], stack=stack)
    assert [f for r in analyzer.resources(plan, preview=False, stack_view=False) for f in pack.analyze(r)] == []
