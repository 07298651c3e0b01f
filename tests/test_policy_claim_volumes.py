"""``pod-bindings`` on the volumes a pod claims, and on the API token a pod of the namespace's ``default`` account
holds, on small hand-made stacks judged through pulumi-policy's analyzer as the engine runs it.

A pod's ``persistentVolumeClaim`` volume names a claim: one the stack does not declare (in the pod's namespace) may be
bound to any volume of the cluster, the node's disk among them. A generic ephemeral volume carries its claim inline
(``ephemeral.volumeClaimTemplate.spec``), judged as a declared claim is: on the volume or the class it may bind. Each
finding is pinned whole, on the workload it is reported on: the words an operator reads in ``pulumi preview``."""

from __future__ import annotations

from typing import Any

import pytest

from tests import analyzer
from tests.pod_bindings_stack import CLAIM, CLASS, FIX, FROM, JOB, VOLUME, judged, k8s, urn

pytestmark = pytest.mark.pure


FAST = k8s(CLASS, "fast", {"provisioner": "pd.csi.storage.gke.io"}, namespace=None)
STATIC = k8s(CLASS, "static", {"provisioner": "kubernetes.io/no-provisioner"}, namespace=None)
DISK = k8s(VOLUME, "disk", {"spec": {"capacity": {"storage": "1Gi"}}}, namespace=None)
DATA = k8s(CLAIM, "data", {"spec": {"storageClassName": "fast"}})
STACK = (FAST, STATIC, DISK, DATA)
"""A stack declaring a class with a provisioner, one without, a volume, and a claim of the first class."""


def workload(*volumes: dict[str, Any], tokenless: bool = True, namespace: str = "tpu-rl") -> analyzer.Resource:
    """Job ``a`` in ``namespace``, of the default account, mounting ``volumes``; ``tokenless``: without its API token
    (so only its volumes are judged)."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "img"}], "volumes": list(volumes)}
    if tokenless:
        spec["automountServiceAccountToken"] = False
    props = {"metadata": {"name": "a", "namespace": namespace}, "spec": {"template": {"spec": spec}}}
    return analyzer.Resource(JOB, "a", urn(JOB, "a"), props)


def on_job(message: str) -> tuple[str, str]:
    return (f"Job a: pod spec.template: {message}", urn(JOB, "a"))


def claiming(claim: Any, name: str = "scratch") -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}


def ephemeral(spec: dict[str, Any], name: str = "scratch") -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}


def undeclared(volume: str, claim: str, namespace: str = "tpu-rl") -> tuple[str, str]:
    return on_job(
        f"volume {volume} claims {claim}, which the stack does not declare in namespace {namespace}: it may be bound "
        "to any volume of the cluster, the node's disk among them; declare the claim in the stack"
    )


# ---------------------------------------------------------------------------------------------
# A named claim


@pytest.mark.parametrize(
    ("volumes", "expected"),
    [
        pytest.param([claiming("data")], [], id="declared"),
        pytest.param([claiming("node-disk")], [undeclared("scratch", "node-disk")], id="undeclared"),
        pytest.param([claiming("data", "cache")], [], id="declared-other-volume-name"),
        pytest.param(
            [claiming("data", "one"), claiming("other", "two")], [undeclared("two", "other")], id="one-of-two"
        ),
        pytest.param([{"name": "scratch", "emptyDir": {}}], [], id="no-claim"),
    ],
)
def test_a_pod_may_claim_only_a_claim_the_stack_declares(volumes, expected):
    """The refusal names the pod's volume, the claim it names and the namespace it was looked for in."""
    assert judged(*STACK, workload(*volumes)) == expected


def test_a_claim_is_the_stacks_only_in_the_pods_own_namespace():
    """The stack's claim ``data`` is in ``tpu-rl``: a pod elsewhere naming ``data`` claims another namespace's claim
    (refused besides for running outside the stack's namespace)."""
    elsewhere = [m for m, _ in judged(*STACK, workload(claiming("data"), namespace="kube-system"))]
    assert elsewhere[-1] == undeclared("scratch", "data", "kube-system")[0]
    assert len(elsewhere) == 2 and "runs in namespace kube-system, not the stack's (tpu-rl)" in elsewhere[0]


def test_a_claim_volume_that_names_no_claim_is_refused():
    """A volume whose claim names nothing, or whose ``persistentVolumeClaim`` is not a mapping, is not the stack's
    claim (the API server refuses it; the pack does not pass it as harmless)."""
    no_name = {"name": "scratch", "persistentVolumeClaim": {}}
    not_a_mapping = {"name": "scratch", "persistentVolumeClaim": ["data"]}
    unnamed = on_job(
        "volume scratch names no claim (persistentVolumeClaim.claimName): name a claim the stack declares in "
        "namespace tpu-rl"
    )
    assert judged(*STACK, workload(no_name)) == [unnamed]
    assert judged(*STACK, workload(not_a_mapping)) == [unnamed]


# ---------------------------------------------------------------------------------------------
# A generic ephemeral volume's claim


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        pytest.param({"storageClassName": "fast"}, None, id="declared-class"),
        pytest.param({}, None, id="default-class"),
        pytest.param({"volumeName": "disk"}, None, id="declared-volume"),
        pytest.param(
            {"volumeName": "node-disk"},
            f"binds PersistentVolume node-disk, which the stack does not declare: declare the volume, or {FROM}",
            id="undeclared-volume",
        ),
        pytest.param(
            {"storageClassName": ""},
            f'binds whichever volume without a class the cluster has (storageClassName: ""), the node\'s disk among '
            f"them: {FROM}",
            id="no-class",
        ),
        pytest.param(
            {"storageClassName": "local"},
            "claims from StorageClass local, which the stack does not declare (a class of local volumes binds the "
            f"node's disk): {FROM}",
            id="undeclared-class",
        ),
        pytest.param(
            {"storageClassName": "static"},
            "claims from StorageClass static, whose volumes are made beforehand (kubernetes.io/no-provisioner: local "
            "volumes among them): claim from a class with a provisioner",
            id="static-class",
        ),
    ],
)
def test_an_ephemeral_volumes_claim_is_judged_as_a_declared_claim_is(spec, problem):
    """The claim a generic ephemeral volume makes is the stack's own, judged on what it may bind; the refusal is the
    pod's, naming its volume."""
    expected = [] if problem is None else [on_job(f"volume cache's claim {problem}")]
    assert judged(*STACK, workload(ephemeral(spec, "cache"))) == expected


def test_an_ephemeral_volume_beside_a_named_claim_is_judged_on_its_own():
    """One volume of each kind: each refused on its own, in the pod's order."""
    volumes = (claiming("other", "named"), ephemeral({"storageClassName": ""}, "inline"))
    assert judged(*STACK, workload(*volumes)) == [
        undeclared("named", "other"),
        on_job(
            'volume inline\'s claim binds whichever volume without a class the cluster has (storageClassName: ""), '
            f"the node's disk among them: {FROM}"
        ),
    ]


# ---------------------------------------------------------------------------------------------
# The default account's API token


@pytest.mark.parametrize(("automount", "shown"), [(None, "unset"), (True, "true"), ("yes", "yes")])
def test_the_refusal_of_the_default_accounts_token_shows_the_pods_setting(automount, shown):
    """``automountServiceAccountToken`` shown as the manifest spells it (or ``unset``): what the operator changes."""
    pod = workload(tokenless=False)
    if automount is not None:
        pod.props["spec"]["template"]["spec"]["automountServiceAccountToken"] = automount
    assert judged(pod) == [
        (
            "Job a: pod spec.template runs as the namespace's default service account with its API token mounted "
            f"(automountServiceAccountToken: {shown}): set automountServiceAccountToken: false on the pod, or {FIX}",
            urn(JOB, "a"),
        )
    ]
