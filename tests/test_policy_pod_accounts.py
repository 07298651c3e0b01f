"""``pod-bindings`` on the service account a pod runs as: both fields that name it (``serviceAccountName`` and the
deprecated ``serviceAccount``, each judged), the namespace's ``default`` account, whose API token a pod of the
program's own shape must not hold, and the volumes judged with the pod. Judged through pulumi-policy's analyzer as the
engine runs it; each finding is pinned whole, with the resource it is reported on."""

from __future__ import annotations

from typing import Any

import pytest

from tests import analyzer
from tests.pod_bindings_stack import ACCOUNT, FIX, JOB, judged, k8s, urn

pytestmark = pytest.mark.pure

RUNNER = "kubernetes:example.com/v1:Runner"
"""A custom kind: the pack finds a pod in it by its shape, not at an API path."""
CONTAINERS = [{"name": "main", "image": "img"}]


STEP = k8s(ACCOUNT, "step", {})
"""The stack's one ServiceAccount, ``tpu-rl/step``."""


def job(**pod: Any) -> analyzer.Resource:
    """Job ``a`` whose pod spec holds ``pod`` beside its one container."""
    return k8s(JOB, "a", {"spec": {"template": {"spec": {"containers": CONTAINERS, **pod}}}})


def undeclared(account: str) -> tuple[str, str]:
    return (
        f"Job a: pod spec.template runs as service account tpu-rl/{account}, which the stack does not declare: {FIX}",
        urn(JOB, "a"),
    )


def tokened(label: str, where: str, shown: str = "unset") -> str:
    """The refusal of a pod at ``where`` of the default account whose API token is mounted."""
    return (
        f"{label}: pod {where} runs as the namespace's default service account with its API token mounted "
        f"(automountServiceAccountToken: {shown}): set automountServiceAccountToken: false on the pod, or {FIX}"
    )


# ---------------------------------------------------------------------------------------------
# The accounts a pod names


ACCOUNTS = [
    ({"serviceAccountName": "step"}, []),
    ({"serviceAccountName": "other"}, [undeclared("other")]),
    ({"serviceAccount": "other"}, [undeclared("other")]),
    ({"serviceAccountName": "step", "serviceAccount": "step"}, []),
    ({"serviceAccountName": "default"}, []),
    ({"serviceAccount": "default"}, []),
    ({"serviceAccountName": "default", "serviceAccount": "other"}, [undeclared("other")]),
    ({"serviceAccountName": "step", "serviceAccount": "other"}, [undeclared("other")]),
    ({"serviceAccountName": "other", "serviceAccount": "step"}, [undeclared("other")]),
    ({"serviceAccountName": "other", "serviceAccount": "more"}, [undeclared("other"), undeclared("more")]),
]


@pytest.mark.parametrize(
    ("fields", "expected"),
    ACCOUNTS,
    ids=[
        "declared",
        "undeclared",
        "deprecated-field",
        "both-the-same",
        "default",
        "deprecated-default",
        "default-then-undeclared",
        "declared-then-undeclared",
        "undeclared-then-declared",
        "both-undeclared",
    ],
)
def test_every_account_a_pod_names_is_one_the_stack_declares_or_the_default(fields, expected):
    """The API server reads the deprecated ``serviceAccount`` when ``serviceAccountName`` is unset, so each field is
    judged, whichever the other holds: a declared or ``default`` account in one does not pass an undeclared one in the
    other. (Each pod here holds no token of the default account, so only its accounts are judged.)"""
    assert judged(STEP, job(automountServiceAccountToken=False, **fields)) == expected


# ---------------------------------------------------------------------------------------------
# The default account's API token


def runner(body: dict[str, Any]) -> analyzer.Resource:
    return k8s(RUNNER, "r", {"spec": body})


TOKENS = [
    (job(), [(tokened("Job a", "spec.template"), urn(JOB, "a"))]),
    (job(serviceAccountName="default"), [(tokened("Job a", "spec.template"), urn(JOB, "a"))]),
    (job(serviceAccount="default"), [(tokened("Job a", "spec.template"), urn(JOB, "a"))]),
    (job(automountServiceAccountToken=True), [(tokened("Job a", "spec.template", "true"), urn(JOB, "a"))]),
    (job(serviceAccountName="step"), []),
    (runner({"pod": {"containers": CONTAINERS}}), [(tokened("Runner r", "spec.pod"), urn(RUNNER, "r"))]),
    (runner({"pod": {"containers": CONTAINERS, "automountServiceAccountToken": False}}), []),
    (runner({"serviceAccountName": "default"}), []),
    (runner({"podSpecPatch": "serviceAccountName: default\n"}), []),
]


@pytest.mark.parametrize(
    ("workload", "expected"),
    TOKENS,
    ids=[
        "no-account",
        "default",
        "deprecated-default",
        "mounted",
        "own-account",
        "custom-kind-pod",
        "custom-kind-pod-without-token",
        "custom-kind-pod-fields",
        "pod-spec-patch",
    ],
)
def test_a_pod_of_the_default_account_holds_no_api_token(workload, expected):
    """A whole pod, at a built-in kind's API path or shaped like one in a custom kind, that runs as the default account
    (named so, or naming none) must not mount its token. Pod fields without a pod around them (a custom kind's lone
    ``serviceAccountName``) and an Argo ``podSpecPatch`` are merged into a pod made elsewhere, which sets the token:
    they are not refused for leaving it unset."""
    assert judged(STEP, workload) == expected


# ---------------------------------------------------------------------------------------------
# A pod's volumes


def test_a_pods_volumes_are_judged_with_the_pod():
    """Each volume of a pod spec is judged: a claim the stack does not declare, and the claim of an ephemeral volume,
    each refused naming the pod and the volume."""
    volumes = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "node"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": ""}}}},
    ]
    assert judged(STEP, job(automountServiceAccountToken=False, volumes=volumes)) == [
        (
            "Job a: pod spec.template: volume data claims node, which the stack does not declare in namespace tpu-rl: "
            "it may be bound to any volume of the cluster, the node's disk among them; declare the claim in the stack",
            urn(JOB, "a"),
        ),
        (
            "Job a: pod spec.template: volume scratch's claim binds whichever volume without a class the cluster has "
            '(storageClassName: ""), the node\'s disk among them: claim from a class the stack declares',
            urn(JOB, "a"),
        ),
    ]


@pytest.mark.parametrize(
    ("volumes", "projecting"),
    [
        pytest.param([{"name": "api", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}], ["api"]),
        pytest.param(
            [
                {"name": "cfg", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
                {"name": "both", "projected": {"sources": [{"configMap": {"name": "c"}}, {"serviceAccountToken": {}}]}},
                {"name": "plain", "emptyDir": {}},
            ],
            ["both"],
        ),
        pytest.param([{"name": "odd", "projected": {"sources": ["serviceAccountToken"]}}], []),
    ],
    ids=["one", "among-others", "source-not-a-mapping"],
)
def test_a_pod_of_the_default_account_projects_no_token_of_it(volumes, projecting):
    """Without the mounted token, a projected ``serviceAccountToken`` source is the default account's token all the
    same: each volume that projects one is named; other sources and volumes are not."""
    found = judged(STEP, job(automountServiceAccountToken=False, volumes=volumes))
    assert found == [
        (
            f"Job a: pod spec.template: volume {name} projects a token of the default service account: remove it, "
            f"or {FIX}",
            urn(JOB, "a"),
        )
        for name in projecting
    ]
