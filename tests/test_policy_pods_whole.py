"""Pods judged whole, through pulumi-policy's analyzer as the engine runs it, at `up` and at a
preview (unknowns): kinds matched by their full type token; a custom kind's templates (an Argo ``containerSet``, a
``podSpecPatch``, a Tekton ``podTemplate``) judged and refused; host paths wherever an object names one (a
PersistentVolume, a template); the volume sources a step uses; images of any provider; and what a pod binds to in the
stack (``pod-bindings``: its namespace, service account and API token, its claims). Each refusal has its near miss."""

from __future__ import annotations

import copy
import functools
import importlib
import json
from typing import Any

import pytest

from tests import analyzer
from tests.example_stacks import STACKS
from tools.plan.offline import UNKNOWN, Plan

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
BY_NAME = {p.name: p for p in policies.POLICIES}
BY_NAME["pod-bindings"] = importlib.import_module("policy.tpu_rl_policies.pod_bindings").pod_bindings
IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5"
PUBLIC = "docker.io/library/nginx:latest"
WORKFLOW = "kubernetes:argoproj.io/v1alpha1:Workflow"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
REGISTRIES = ["us-docker.pkg.dev/cloud-tpu-images", "us-docker.pkg.dev/cloud-tpu-v2-images"]


def _object(type_: str, body: dict[str, Any], name: str = "evil") -> analyzer.Resource:
    props = {"metadata": {"name": name, "namespace": "tpu-rl"}, **body} if type_.startswith("kubernetes:") else body
    return analyzer.Resource(type_, name, f"urn:pulumi:prod::tpu-rl::{type_}::{name}", props)


def judged(resource: analyzer.Resource, policy: str, *, preview: bool = False) -> list[analyzer.Finding]:
    pack = analyzer.Pack({"all": "mandatory"}, dry_run=preview, policies=[BY_NAME[policy]], stack="prod")
    return pack.analyze(resource)


def said(resource: analyzer.Resource, policy: str) -> list[str]:
    return [f.message for f in judged(resource, policy)]


def _pod(**fields: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": IMAGE}], **fields}


# ---------------------------------------------------------------------------------------------
# Kinds by their full type token


@pytest.mark.parametrize("kind", ["Release", "Chart", "Job", "Pod", "ConfigMap", "JobSet"])
def test_a_custom_kind_named_as_a_built_in_one_is_searched_and_refused(kind):
    """``kubernetes:evil.io/v1:<Kind>`` is not the built-in kind: its pod is found by shape, judged and refused."""
    body = {"spec": {"template": {"spec": _pod(hostPID=True)}}, "data": {"x": "y"}}
    resource = _object(f"kubernetes:evil.io/v1:{kind}", body)
    (refusal,) = said(resource, "known-workload-kinds")
    assert f"{kind} evil (kubernetes:evil.io/v1:{kind}) runs containers outside the pod specs" in refusal
    assert "(spec.template.spec)" in refusal
    assert any("process namespace (hostPID: true)" in m for m in said(resource, "least-privilege-pods"))


@pytest.mark.parametrize(
    ("type_", "body"),
    [
        ("kubernetes:helm.sh/v3:Release", {"values": {"image": {"repository": "x"}, "spec": _pod(hostPID=True)}}),
        ("kubernetes:helm.sh/v4:Chart", {"values": {"spec": _pod(hostPID=True)}}),
        ("kubernetes:core/v1:ConfigMapPatch", {"data": {"image": PUBLIC}}),
        ("kubernetes:batch/v1:Job", {"spec": {"template": {"spec": _pod()}}}),
        ("kubernetes:apps/v1beta2:DeploymentPatch", {"spec": {"template": {"spec": _pod()}}}),
    ],
)
def test_the_built_in_kinds_are_matched_by_group(type_, body):
    """Near miss: the real Helm kinds are not searched (``reviewed-helm-charts`` judges them), the real workload kinds'
    pods are at their API paths."""
    assert said(_object(type_, body), "known-workload-kinds") == []
    assert said(_object(type_, body), "least-privilege-pods") == []


def test_a_list_item_is_the_kind_its_api_version_names():
    item = {"apiVersion": "evil.io/v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": _pod()}
    (refusal,) = said(_object("kubernetes:core/v1:PodList", {"items": [item]}), "known-workload-kinds")
    assert "(items[0].spec)" in refusal
    item["apiVersion"] = "v1"
    assert said(_object("kubernetes:core/v1:PodList", {"items": [item]}), "known-workload-kinds") == []


# ---------------------------------------------------------------------------------------------
# A custom kind's templates: Argo containerSet and podSpecPatch, Tekton podTemplate


def _workflow(template: dict[str, Any], **spec: Any) -> analyzer.Resource:
    return _object(WORKFLOW, {"spec": {"entrypoint": "main", "templates": [{"name": "main", **template}], **spec}})


CONTAINER_SET = {"containerSet": {"containers": [{"name": "a", "image": IMAGE}]}}


def test_an_argo_container_set_is_refused_and_the_workflows_pod_fields_judged():
    plain = _workflow(CONTAINER_SET)
    (refusal,) = said(plain, "known-workload-kinds")
    assert "(spec.templates[0].containerSet)" in refusal
    assert said(plain, "least-privilege-pods") == []  # near miss: nothing of the node
    hostile = _workflow(CONTAINER_SET, hostNetwork=True, serviceAccountName="argo")
    assert said(hostile, "least-privilege-pods") == [
        "pod spec uses the node's network (hostNetwork: true): only the Pathways head and the TPU workers do"
    ]


PATCH = {"hostPID": True, "containers": [{"name": "main", "securityContext": {"privileged": True}}]}


@pytest.mark.parametrize(
    "text",
    [json.dumps(PATCH), "hostPID: true\ncontainers:\n- name: main\n  securityContext:\n    privileged: true\n"],
    ids=["json", "yaml"],
)
def test_a_pod_spec_patch_is_read_as_the_pod_it_merges_in(text):
    workflow = _workflow({"container": {"name": "main", "image": IMAGE}, "podSpecPatch": text})
    assert sorted(said(workflow, "least-privilege-pods")) == [
        "container main is privileged: root on the node, with the Hugging Face token and a bucket identity; no "
        "Pathways or MaxText container needs it",
        "pod spec.templates[0].podSpecPatch shares the node's process namespace (hostPID: true): it can see the "
        "node's other pods, the Pathways workers and their tokens among them; no step needs it",
    ]
    (refusal,) = said(workflow, "known-workload-kinds")
    assert "(spec.templates[0].podSpecPatch, spec.templates[0].container.image)" in refusal


def test_a_pod_spec_patch_that_only_sizes_the_container_draws_no_privilege_finding():
    """Near miss: a patch without an image keeps its container's (judged where it is), nothing of the node."""
    patch = json.dumps({"containers": [{"name": "main", "resources": {"limits": {"cpu": "1"}}}]})
    workflow = _workflow({"container": {"name": "main", "image": IMAGE}, "podSpecPatch": patch})
    assert said(workflow, "least-privilege-pods") == [] and said(workflow, "pinned-images") == []
    patched = json.dumps({"containers": [{"name": "main", "image": PUBLIC}]})
    workflow = _workflow({"container": {"name": "main", "image": IMAGE}, "podSpecPatch": patched})
    (found,) = said(workflow, "pinned-images")
    assert found == f"container main: image {PUBLIC} is not pinned; use a version tag or a digest"


@pytest.mark.parametrize(
    "text", ["a: &x [1]\nb: *x\n", "- hostPID: true\n", "{not yaml"], ids=["aliases", "a-list", "not-yaml"]
)
def test_a_pod_spec_patch_the_pack_cannot_read_is_a_finding(text):
    (found,) = said(
        _workflow({"container": {"name": "m", "image": IMAGE}, "podSpecPatch": text}), "least-privilege-pods"
    )
    assert found.startswith("spec.templates[0].podSpecPatch is not a pod spec the pack can read")


def test_a_pod_spec_patch_not_known_at_a_preview_is_judged_at_up():
    workflow = _workflow({"container": {"name": "m", "image": IMAGE}, "podSpecPatch": UNKNOWN})
    (preview,) = judged(workflow, "least-privilege-pods", preview=True)
    assert preview.unjudged and preview.level == "advisory" and "podSpecPatch" in preview.message
    (up,) = judged(workflow, "least-privilege-pods")
    assert up.level == "mandatory" and "cannot judge" in up.message and "podSpecPatch" in up.message
    refusal, unread = judged(workflow, "known-workload-kinds", preview=True)  # the kind is refused whatever the patch
    assert refusal.level == "mandatory" and not refusal.unjudged and "custom workload kind" in refusal.message
    assert unread.unjudged and unread.level == "advisory"


def test_a_tekton_pod_template_is_judged_as_the_pods():
    task = _object(
        "kubernetes:tekton.dev/v1:TaskRun",
        {"spec": {"podTemplate": {"hostIPC": True, "volumes": [{"name": "v", "hostPath": {"path": "/etc"}}]}}},
    )
    assert sorted(m.split(":")[0] for m in said(task, "least-privilege-pods")) == [
        "pod spec.podTemplate shares the node's IPC namespace (hostIPC",
        "volume v mounts the node's /etc",
    ]


# ---------------------------------------------------------------------------------------------
# Host paths and volume sources


@pytest.mark.parametrize(
    ("source", "path"),
    [({"hostPath": {"path": "/var/lib"}}, "/var/lib"), ({"local": {"path": "/mnt/disk"}}, "/mnt/disk")],
)
def test_a_persistent_volume_on_the_node_is_refused(source, path):
    volume = _object("kubernetes:core/v1:PersistentVolume", {"spec": {"capacity": {"storage": "1Gi"}, **source}})
    (found,) = said(volume, "least-privilege-pods")
    key = next(iter(source))
    assert found.startswith(f"PersistentVolume evil: spec.{key} is the node's {path} ({key}): a pod that mounts it")


def test_a_persistent_volume_of_a_csi_driver_passes():
    volume = _object("kubernetes:core/v1:PersistentVolume", {"spec": {"csi": {"driver": "pd.csi.storage.gke.io"}}})
    assert said(volume, "least-privilege-pods") == []


def test_a_host_path_anywhere_in_a_custom_kind_is_refused():
    mounter = _object("kubernetes:evil.io/v1:Mounter", {"spec": {"mount": {"hostPath": {"path": "/"}}}})
    found = said(mounter, "least-privilege-pods")
    assert [m.split(":")[0] for m in found] == ["Mounter evil"] and "spec.mount.hostPath is the node's /" in found[0]


@pytest.mark.parametrize(
    ("volume", "words"),
    [
        ({"nfs": {"server": "x", "path": "/"}}, "volume v is a nfs volume, a source no step uses"),
        ({"csi": {"driver": "hostpath.csi.k8s.io"}}, "volume v is a csi volume"),
        ({"image": {"reference": PUBLIC}}, "volume v is a image volume"),
        ({"projected": {"sources": [{"podCertificate": {}}]}}, "volume v projects podCertificate"),
    ],
)
def test_a_volume_source_no_step_uses_is_refused(volume, words):
    pod = _object("kubernetes:core/v1:Pod", {"spec": _pod(volumes=[{"name": "v", **volume}])})
    (found,) = said(pod, "least-privilege-pods")
    assert found.startswith(words)


def test_the_volume_sources_the_steps_use_pass():
    volumes = [
        {"name": "a", "emptyDir": {}},
        {"name": "b", "configMap": {"name": "c"}},
        {"name": "c", "secret": {"secretName": "s"}},
        {"name": "d", "projected": {"sources": [{"configMap": {"name": "c"}}, {"serviceAccountToken": {"path": "t"}}]}},
        {"name": "e", "persistentVolumeClaim": {"claimName": "x"}},
    ]
    assert said(_object("kubernetes:core/v1:Pod", {"spec": _pod(volumes=volumes)}), "least-privilege-pods") == []


# ---------------------------------------------------------------------------------------------
# Images of any provider


CLOUD_RUN = ("gcp:cloudrunv2/service:Service", {"template": {"containers": [{"image": PUBLIC}], "serviceAccount": "x"}})
FOREIGN = [
    CLOUD_RUN,
    ("gcp:cloudrun/service:Service", {"template": {"spec": {"containers": [{"image": PUBLIC}]}}}),
    ("gcp:cloudrunv2/job:Job", {"template": {"template": {"containers": [{"image": PUBLIC}]}}}),
    ("gcp:batch/job:Job", {"taskGroups": [{"taskSpec": {"runnables": [{"container": {"imageUri": PUBLIC}}]}}]}),
    (
        "gcp:compute/instance:Instance",
        {"metadata": {"gce-container-declaration": f"spec:\n  containers:\n  - image: {PUBLIC}\n"}},
    ),
    ("docker:index/container:Container", {"image": PUBLIC, "name": "c"}),
]


@pytest.mark.parametrize(("type_", "props"), FOREIGN, ids=[f[0] for f in FOREIGN])
def test_a_resource_of_any_provider_that_runs_an_image_is_refused_and_its_image_judged(type_, props):
    resource = _object(type_, props)
    (refusal,) = said(resource, "known-workload-kinds")
    assert refusal.startswith(f"{type_} evil runs images outside the cluster (")
    (pin,) = said(resource, "pinned-images")
    assert f"image {PUBLIC} is not pinned" in pin
    plan = Plan(stack="prod", resources=[_plan_resource(resource)], outputs={})
    pack = analyzer.Pack({"all": "mandatory"}, policies=[BY_NAME["trusted-registries"]], stack="prod")
    (untrusted,) = pack.analyze_stack(analyzer.resources(plan, preview=False, stack_view=True))
    assert untrusted.message.startswith(f"{type_} evil: container ") and f"image {PUBLIC} is not from a trusted" in (
        untrusted.message
    )


def test_an_image_not_known_at_a_preview_still_refuses_the_resource():
    type_, props = CLOUD_RUN
    resource = _object(type_, {"template": {"containers": [{"image": UNKNOWN}]}})
    (refusal,) = judged(resource, "known-workload-kinds", preview=True)
    assert refusal.level == "mandatory" and not refusal.unjudged
    (pin,) = judged(resource, "pinned-images", preview=True)
    assert pin.unjudged and pin.level == "advisory"
    up = judged(resource, "pinned-images")
    assert [f.level for f in up] == ["mandatory", "mandatory"] and "cannot judge" in up[-1].message


def test_a_resource_of_another_provider_without_an_image_passes():
    cases: list[tuple[str, dict[str, Any]]] = [
        ("gcp:container/nodePool:NodePool", {"nodeConfig": {"imageType": "COS_CONTAINERD", "serviceAccount": "a"}}),
        ("gcp:artifactregistry/repository:Repository", {"description": "tpu-rl: pull-through copy of images"}),
    ]
    for type_, props in cases:
        assert said(_object(type_, props), "known-workload-kinds") == []


def _plan_resource(r: analyzer.Resource) -> dict[str, Any]:
    options = {"protect": False, "ignoreChanges": [], "deleteBeforeReplace": False, "customTimeouts": None}
    return {"type": r.type, "name": r.name, "inputs": r.props, "options": {**options, "parent": None}}


# ---------------------------------------------------------------------------------------------
# pod-bindings: namespace, service account, token, claims, on the program's own plan


@functools.cache
def _program() -> tuple[dict[str, Any], ...]:
    """The prod program's resources as the engine received them, as plain dicts the cases copy and change."""
    from tests.conftest import plan_of

    plan = plan_of("prod")
    return tuple(
        {**{k: v for k, v in r.items() if k != "inputs"}, "inputs": copy.deepcopy(analyzer.inputs(plan, r))}
        for r in plan.resources
    )


def _step(resources: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return next(
        r
        for r in resources
        if r["type"] == JOBSET and r["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"] == component
    )


def _pod_spec(resources: list[dict[str, Any]], component: str, job: int = 0) -> dict[str, Any]:
    return _step(resources, component)["inputs"]["spec"]["replicatedJobs"][job]["template"]["spec"]["template"]["spec"]


def bindings(
    change=None, *, preview: bool = False, extra: tuple[dict[str, Any], ...] = (), config: dict[str, str] | None = None
) -> list[analyzer.Finding]:
    resources = [copy.deepcopy(r) for r in _program()] + [copy.deepcopy(e) for e in extra]
    if change is not None:
        change(resources)
    plan = Plan(stack="prod", resources=resources, outputs={})
    pack = analyzer.Pack(
        {"all": "mandatory"}, dry_run=preview, policies=[BY_NAME["pod-bindings"]], stack="prod", stack_config=config
    )
    return pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))


def _messages(change=None, **kwargs: Any) -> list[str]:
    return [f.message for f in bindings(change, **kwargs)]


@pytest.mark.program
def test_the_programs_pods_are_bound_to_what_the_stack_declares():
    assert bindings() == [] and bindings(preview=True) == []


@pytest.mark.program
@pytest.mark.parametrize("automount", [None, True])
def test_a_pod_of_the_default_account_with_a_token_is_refused(automount):
    """The TPU workers run as ``default``: with ``automountServiceAccountToken`` anything but false (the plan's)."""

    def change(resources):
        spec = _pod_spec(resources, "train", 1)
        spec.pop("automountServiceAccountToken")
        if automount is not None:
            spec["automountServiceAccountToken"] = automount

    (found,) = _messages(change)
    shown = "unset" if automount is None else "true"
    assert found.startswith("JobSet gemma4-26b-train-") and found.endswith(
        f": pod worker runs as the namespace's default service account with its API token mounted "
        f"(automountServiceAccountToken: {shown}): set automountServiceAccountToken: false on the pod, or run it as "
        "its step's own Kubernetes service account, in the stack's namespace (infra/k8s)"
    )


@pytest.mark.program
def test_a_projected_token_of_the_default_account_is_refused():
    def change(resources):
        _pod_spec(resources, "train", 1)["volumes"].append(
            {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
        )

    (found,) = _messages(change)
    assert found.endswith(
        "pod worker: volume t projects a token of the default service account: remove it, or run it as its step's "
        "own Kubernetes service account, in the stack's namespace (infra/k8s)"
    )


@pytest.mark.program
@pytest.mark.parametrize("field", ["serviceAccountName", "serviceAccount"])
def test_an_account_the_stack_does_not_declare_is_refused(field):
    def change(resources):
        _pod_spec(resources, "convert")[field] = "clusterrole-aggregation-controller"

    (found,) = _messages(change)
    assert found.endswith(
        ": pod convert runs as service account tpu-rl/clusterrole-aggregation-controller, which the stack does not "
        "declare: run it as its step's own Kubernetes service account, in the stack's namespace (infra/k8s)"
    )


@pytest.mark.program
def test_a_pod_in_another_namespace_is_refused():
    def change(resources):
        _step(resources, "convert")["inputs"]["metadata"]["namespace"] = "kube-system"

    found = _messages(change)
    assert [m.split(": ", 1)[1][:58] for m in found] == [
        "pod convert runs in namespace kube-system, not the stack's",
        "pod convert runs as service account kube-system/tpu-rl-pro",
    ]


@pytest.mark.program
def test_the_namespace_the_configuration_names_is_the_stacks_without_a_namespace_resource():
    """Near miss: ``tpu-rl:namespace`` names a namespace the program uses without creating it (the Namespace and the
    step's account moved there); another namespace is still refused."""

    def moved(namespace: str):
        def change(resources):
            resources[:] = [r for r in resources if r["type"] != "kubernetes:core/v1:Namespace"]
            for r in resources:
                if r["type"] in (JOBSET, "kubernetes:core/v1:ServiceAccount"):
                    r["inputs"]["metadata"]["namespace"] = namespace

        return change

    assert _messages(moved("rl-runs"), config={"tpu-rl:namespace": "rl-runs"}) == []
    found = _messages(moved("rl-runs"), config={"tpu-rl:namespace": "other"})
    assert found and all("runs in namespace rl-runs, not the stack's (other)" in m for m in found)


@pytest.mark.program
def test_two_workloads_sharing_an_account_are_each_refused():
    def change(resources):
        _pod_spec(resources, "export")["serviceAccountName"] = "tpu-rl-prod-convert"

    found = _messages(change)
    assert len(found) == 2 and all(
        "service account tpu-rl/tpu-rl-prod-convert is also the account of" in m for m in found
    )


@pytest.mark.program
def test_an_account_not_known_at_a_preview_is_judged_at_up():
    def change(resources):
        _pod_spec(resources, "convert")["serviceAccountName"] = UNKNOWN

    (preview,) = bindings(change, preview=True)
    assert preview.unjudged and preview.level == "advisory" and "serviceAccountName" in preview.message
    up = bindings(change)
    assert {f.level for f in up} == {"mandatory"} and "cannot judge" in up[-1].message


CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"


def _k8s(type_: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": "tpu-rl"} if type_ == CLAIM else {})}
    return _plan_resource(_object(type_, {**body, "metadata": metadata}, name))


def _claiming(claim: str):
    def change(resources):
        _pod_spec(resources, "convert")["volumes"].append(
            {"name": "data", "persistentVolumeClaim": {"claimName": claim}}
        )

    return change


@pytest.mark.program
@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"volumeName": "node-disk"}, "binds PersistentVolume node-disk, which the stack does not declare"),
        ({"storageClassName": ""}, 'binds whichever volume without a class the cluster has (storageClassName: "")'),
        ({"storageClassName": "local-storage"}, "claims from StorageClass local-storage, which the stack does not"),
        ({"storageClassName": "static"}, "whose volumes are made beforehand (kubernetes.io/no-provisioner"),
        ({"storageClassName": "tpu-rl-scratch"}, None),
        ({}, None),
    ],
)
def test_a_claim_is_bound_only_to_what_the_stack_judges(spec, words):
    static = _k8s(
        "kubernetes:storage.k8s.io/v1:StorageClass", "static", {"provisioner": "kubernetes.io/no-provisioner"}
    )
    extra = (_k8s(CLAIM, "data", {"spec": spec}), static)
    found = _messages(_claiming("data"), extra=extra)
    if words is None:
        assert found == []
    else:
        (line,) = found
        assert line.startswith("PersistentVolumeClaim tpu-rl/data ") and words in line


@pytest.mark.program
def test_a_claim_the_stack_does_not_declare_is_refused():
    (found,) = _messages(_claiming("someone-elses"))
    assert (
        "pod convert: volume data claims someone-elses, which the stack does not declare in namespace tpu-rl" in found
    )


# ---------------------------------------------------------------------------------------------
# The program's own plans


POD_RULES = ("pod-bindings", "least-privilege-pods", "known-workload-kinds", "pinned-images", "trusted-registries")


MIRRORED = ("tpu-rl:gke.versionPrefix=1.35.", "tpu-rl:gke.secretsEncryptionKey=create", "tpu-rl:images.mirror=true")


def _stacks() -> list[Any]:
    cases = []
    for variant, (stack, *overrides) in STACKS.items():
        for preview in (False, True):
            marks = [pytest.mark.slow] if preview and variant not in ("dev", "prod") else []
            key = f"{variant}-{'preview' if preview else 'up'}"
            cases.append(pytest.param(stack, tuple(overrides), preview, id=key, marks=marks))
    return cases


@pytest.mark.program
@pytest.mark.parametrize(("stack", "overrides", "preview"), _stacks())
def test_the_programs_plans_draw_no_finding_of_the_pod_rules(stack, overrides, preview):
    from tests.conftest import plan_of

    plan = analyzer.first_preview(stack, *overrides) if preview else plan_of(stack, *overrides)
    pack = analyzer.Pack(
        analyzer.policy_config_file(stack),
        dry_run=preview,
        policies=[BY_NAME[name] for name in POD_RULES],
        stack=stack,
        stack_config=analyzer.engine_config(stack, *overrides),
    )
    assert analyzer.analyze_plan(plan, pack, preview=preview) == []


@pytest.mark.program
def test_the_unchanged_mirror_plan_with_its_projects_registry_listed_draws_no_mandatory_finding():
    """The listing of the stack's own project trusts nothing and, relied on by no image, draws
    nothing (tests/test_policy_images.py: an image that relies on it is refused, naming it)."""
    from tests.conftest import plan_of

    config = analyzer.policy_config_file("prod")
    registries = [*REGISTRIES, "us-east5-docker.pkg.dev/my-tpu-prod-project"]
    config = {**config, "trusted-registries": {"enforcementLevel": "mandatory", "registries": registries}}
    pack = analyzer.Pack(config, stack="prod", stack_config=analyzer.engine_config("prod", *MIRRORED))
    assert analyzer.mandatory(analyzer.analyze_plan(plan_of("prod", *MIRRORED), pack)) == []
