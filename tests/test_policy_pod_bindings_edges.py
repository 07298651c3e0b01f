"""``pod-bindings`` on small hand-made stacks, judged through pulumi-policy's analyzer as the engine runs it: which
namespaces are the stack's (its configuration's, its default, those it declares), the accounts it declares and those
not known yet, two workloads sharing an account, and the claims it declares. Each finding is pinned whole, with the
resource it is reported on: these are the words and the resource an operator sees in ``pulumi preview``."""

from __future__ import annotations

from typing import Any

import pytest

from tests import analyzer
from tests.pod_bindings_stack import (
    ACCOUNT,
    CLAIM,
    CLASS,
    FIX,
    FROM,
    JOB,
    NAMESPACE,
    VOLUME,
    findings,
    judged,
    k8s,
    urn,
)
from tools.plan.offline import UNKNOWN

pytestmark = pytest.mark.pure

SHARED = "each workload runs as a service account of its own, so that one step's rights are not another's"


def job(name: str, namespace: Any = "tpu-rl", **pod: Any) -> analyzer.Resource:
    """A Job whose pod holds no API token of the default account (so only what a case sets is judged)."""
    spec = {"containers": [{"name": "main", "image": "img"}], "automountServiceAccountToken": False, **pod}
    return k8s(JOB, name, {"spec": {"template": {"spec": spec}}}, namespace)


def elsewhere(namespace: str, stack: str, shown: str | None = None) -> tuple[str, str]:
    """The refusal of Job ``a`` running in ``namespace`` when the stack's namespaces are ``stack``."""
    return (
        f"Job a: pod spec.template runs in namespace {shown or namespace}, not the stack's ({stack}): its service "
        "account and Secrets there are outside the stack's review; set metadata.namespace to tpu-rl:namespace",
        urn(JOB, "a"),
    )


# ---------------------------------------------------------------------------------------------
# The stack's namespaces


@pytest.mark.parametrize(
    ("config", "namespace", "expected"),
    [
        (None, "tpu-rl", []),
        ({"tpu-rl:namespace": "rl-runs"}, "rl-runs", []),
        ({"tpu-rl:namespace": ""}, "tpu-rl", []),
        ({"tpu-rl:namespace": "rl-runs"}, "tpu-rl", [elsewhere("tpu-rl", "rl-runs")]),
        ({}, "kube-system", [elsewhere("kube-system", "tpu-rl")]),
        ({}, None, [elsewhere("", "tpu-rl", "(unset: the provider default)")]),
    ],
    ids=["default", "configured", "configured-empty", "default-not-kept", "other", "unset"],
)
def test_the_stacks_namespace_is_the_configured_one_or_else_the_default(config, namespace, expected):
    """Without a Namespace resource, the stack's namespace is ``tpu-rl:namespace`` as the engine sends it, or its
    default (``tpu-rl``) when unset or empty; only that one, and an unset namespace is never it."""
    assert judged(job("a", namespace), config=config) == expected


def test_a_namespace_the_stack_declares_is_the_stacks_and_the_refusal_names_them_all():
    extra = k8s(NAMESPACE, "extra", namespace=None)
    assert judged(extra, job("a", "extra")) == []
    assert judged(extra, job("a", "elsewhere")) == [elsewhere("elsewhere", "extra, tpu-rl")]


def test_a_workload_sent_without_a_urn_is_still_named_by_its_kind_and_name():
    """The pack reads a resource's URN as empty when the engine sends none; the finding still says which object."""
    unnamed = job("a", "elsewhere")
    unnamed.urn = ""
    assert judged(unnamed) == [(elsewhere("elsewhere", "tpu-rl")[0], "")]


def test_resources_of_other_providers_are_passed_over_not_the_end_of_the_stack():
    bucket = analyzer.Resource("gcp:storage/bucket:Bucket", "b", urn("gcp:storage/bucket:Bucket", "b"), {"name": "b"})
    assert judged(bucket, job("a", "elsewhere"), bucket) == [elsewhere("elsewhere", "tpu-rl")]


# ---------------------------------------------------------------------------------------------
# Accounts: declared, not known yet, shared


def test_an_account_the_stack_does_not_declare_is_refused_on_its_workload():
    assert judged(k8s(ACCOUNT, "convert"), job("a", serviceAccountName="other")) == [
        (
            f"Job a: pod spec.template runs as service account tpu-rl/other, which the stack does not declare: {FIX}",
            urn(JOB, "a"),
        )
    ]


def pending_account(unknown: str) -> analyzer.Resource:
    """A ServiceAccount whose ``metadata.<unknown>`` the engine does not know yet."""
    metadata = {"name": "step", "namespace": "tpu-rl", unknown: UNKNOWN}
    return analyzer.Resource(ACCOUNT, "step-account", urn(ACCOUNT, "step-account"), {"metadata": metadata})


@pytest.mark.parametrize("unknown", ["name", "namespace"])
def test_an_account_not_known_yet_holds_back_only_a_pod_of_an_account_not_declared(unknown):
    """At a preview, an account whose name (or namespace) is not known yet may be the one a pod names that the stack
    does not declare: that refusal waits for ``pulumi up`` (advisory, naming the account); a stack whose pods all run
    as declared accounts is judged at once."""
    pending, declared = pending_account(unknown), k8s(ACCOUNT, "convert")
    assert judged(pending, declared, job("a", serviceAccountName="convert"), preview=True) == []
    assert judged(pending, declared, job("a", serviceAccountName="convert")) == []
    (held,) = findings(pending, declared, job("a", serviceAccountName="other"), preview=True)
    assert held.unjudged and held.level == "advisory"
    assert f"during preview: ServiceAccount step-account: metadata.{unknown}" in held.message
    assert "not known until what they come from exists; judged at `pulumi up`" in held.message
    assert held.message.endswith(f"runs as service account tpu-rl/other, which the stack does not declare: {FIX}")


def test_an_account_still_not_known_at_up_is_a_finding_beside_the_refusal():
    found = judged(pending_account("name"), job("a", serviceAccountName="other"))
    assert [m for m, _ in found] == [
        f"Job a: pod spec.template runs as service account tpu-rl/other, which the stack does not declare: {FIX}",
        "cannot judge ServiceAccount step-account: metadata.name: not known at `pulumi up`; give it a value the "
        "program knows",
    ]


def test_two_workloads_sharing_an_account_are_each_refused_naming_the_other():
    found = judged(k8s(ACCOUNT, "x"), job("a", serviceAccountName="x"), job("b", serviceAccountName="x"))
    assert found == [
        (f"Job a: service account tpu-rl/x is also the account of Job b: {SHARED}", urn(JOB, "a")),
        (f"Job b: service account tpu-rl/x is also the account of Job a: {SHARED}", urn(JOB, "b")),
    ]


def test_three_workloads_sharing_an_account_each_name_the_two_others():
    jobs = [job(name, serviceAccountName="x") for name in ("c", "a", "b")]
    assert judged(k8s(ACCOUNT, "x"), *jobs) == [
        (f"Job a: service account tpu-rl/x is also the account of Job b, Job c: {SHARED}", urn(JOB, "a")),
        (f"Job b: service account tpu-rl/x is also the account of Job a, Job c: {SHARED}", urn(JOB, "b")),
        (f"Job c: service account tpu-rl/x is also the account of Job a, Job b: {SHARED}", urn(JOB, "c")),
    ]


def test_one_workload_with_an_account_of_its_own_is_not_sharing_it():
    assert (
        judged(k8s(ACCOUNT, "x"), k8s(ACCOUNT, "y"), job("a", serviceAccountName="x"), job("b", serviceAccountName="y"))
        == []
    )


# ---------------------------------------------------------------------------------------------
# The claims the stack declares


STATIC = k8s(CLASS, "static", {"provisioner": "kubernetes.io/no-provisioner"}, namespace=None)
DYNAMIC = k8s(CLASS, "fast", {"provisioner": "pd.csi.storage.gke.io"}, namespace=None)
DISK = k8s(VOLUME, "disk", {"spec": {"capacity": {"storage": "1Gi"}}}, namespace=None)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"storageClassName": "fast"}, None),
        ({"volumeName": "disk"}, None),
        ({}, None),
        (
            {"storageClassName": ""},
            f'binds whichever volume without a class the cluster has (storageClassName: ""), the node\'s disk among '
            f"them: {FROM}",
        ),
        (
            {"storageClassName": "static"},
            "claims from StorageClass static, whose volumes are made beforehand (kubernetes.io/no-provisioner: local "
            "volumes among them): claim from a class with a provisioner",
        ),
        (
            {"storageClassName": "local"},
            "claims from StorageClass local, which the stack does not declare (a class of local volumes binds the "
            f"node's disk): {FROM}",
        ),
        (
            {"volumeName": "node-disk"},
            f"binds PersistentVolume node-disk, which the stack does not declare: declare the volume, or {FROM}",
        ),
    ],
)
def test_a_claim_the_stack_declares_is_judged_on_the_claim(spec, problem):
    """A declared claim binds only what the stack judges, whether or not a pod mounts it: the refusal is the claim's."""
    claim = k8s(CLAIM, "data", {"spec": spec})
    expected = [] if problem is None else [(f"PersistentVolumeClaim tpu-rl/data {problem}", urn(CLAIM, "data"))]
    assert judged(STATIC, DYNAMIC, DISK, claim) == expected
