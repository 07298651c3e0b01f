"""``stack-principals`` on Workload Identity bindings: ``roles/iam.workloadIdentityUser`` on a Google service account
granted to a Kubernetes service account's principal (``serviceAccount:<project>.svc.id.goog[<namespace>/<name>]``).
The Kubernetes service account is one the stack makes in its namespace, and it is named as the account it is bound to
(``serviceAccountId``, ``projects/<project>/serviceAccounts/<email>``: its last ``/`` part), so no pod of another
cluster or stack in the project can take the identity. An account the stack does not make is
``grant-targets``' to judge, not this rule's. Judged through pulumi-policy's own analyzer (``tests/analyzer.py``) on
small stacks built by hand; each finding is the exact line an operator reads, on the binding it names."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer
from tests.grant_cases import ACCOUNT_IAM, PROJECT
from tests.principals_stack import ACCOUNT, CLUSTER, KSA, POOL, WORKLOAD_USER, found, judge, resource

pytestmark = pytest.mark.pure

ACCOUNT_BINDING = "gcp:serviceaccount/iAMBinding:IAMBinding"
EXPORT = "tpu-rl-prod-export"
CONVERT = "tpu-rl-prod-convert"


def email(account_id: str, project: str = PROJECT) -> str:
    return f"{account_id}@{project}.iam.gserviceaccount.com"


def path(account_id: str, project: str = PROJECT) -> str:
    """A service account's ``serviceAccountId`` as the program writes it."""
    return f"projects/{project}/serviceAccounts/{email(account_id, project)}"


def principal(namespace: str, ksa: str, pool: str = POOL) -> str:
    return f"serviceAccount:{pool}[{namespace}/{ksa}]"


def stack() -> list[analyzer.Resource]:
    """The stack's cluster (naming its project, so its pool), two steps' accounts and their Kubernetes service
    accounts in the stack's namespace, and one Kubernetes service account it makes in another namespace."""
    return [
        resource(CLUSTER, "cluster", name="tpu-rl-prod", project=PROJECT, location="us-east5"),
        *(resource(ACCOUNT, f"{a}-sa", accountId=a, project=PROJECT) for a in (EXPORT, CONVERT)),
        *(resource(KSA, f"{a}-ksa", metadata={"name": a, "namespace": "tpu-rl"}) for a in (EXPORT, CONVERT)),
        resource(KSA, "elsewhere-ksa", metadata={"name": EXPORT, "namespace": "default"}),
    ]


def binding(bound: Any, member: Any, name: str = "wi", type_: str = ACCOUNT_IAM) -> analyzer.Resource:
    key = "members" if isinstance(member, list) else "member"
    return resource(type_, name, serviceAccountId=bound, role=WORKLOAD_USER, **{key: member})


def not_made(name: str, namespace: str, ksa: str) -> str:
    return (
        f"{name} lets {namespace}/{ksa} act as a Google account, but this stack makes no such Kubernetes service "
        "account: a pod of another cluster in the project could take the identity"
    )


def named_as_another(name: str, namespace: str, ksa: str, account: str) -> str:
    return (
        f"{name} binds {namespace}/{ksa} to the account {account}: a Kubernetes service account is named as the "
        "account it acts as, which IAM keeps unique in the project, so no stack's pod can take another stack's "
        "identity (core.names.step_ksa)"
    )


def other_pool(name: str, namespace: str, ksa: str, pool: str) -> str:
    return (
        f"{name} lets {namespace}/{ksa} of the identity pool {pool} act as a Google account: only the stack's own "
        f"project's pool ({POOL}) holds its Kubernetes service accounts; another project's cluster would take the "
        "identity"
    )


BINDING_CASES = [
    # (id, the account bound, the member, the messages of the binding's findings)
    ("own-name", path(EXPORT), principal("tpu-rl", EXPORT), []),
    ("own-name-by-email", email(EXPORT), principal("tpu-rl", EXPORT), []),
    (
        "another-steps-name",
        path(EXPORT),
        principal("tpu-rl", CONVERT),
        [named_as_another("wi", "tpu-rl", CONVERT, EXPORT)],
    ),
    (
        "another-steps-name-by-email",
        email(CONVERT),
        principal("tpu-rl", EXPORT),
        [named_as_another("wi", "tpu-rl", EXPORT, CONVERT)],
    ),
    (
        "a-name-not-made",
        path(EXPORT),
        principal("tpu-rl", "tpu-rl-prod-evaluate"),
        [not_made("wi", "tpu-rl", "tpu-rl-prod-evaluate")],
    ),
    ("made-in-another-namespace", path(EXPORT), principal("default", EXPORT), [not_made("wi", "default", EXPORT)]),
    # an account the stack does not make is grant-targets' to judge: no name is compared with it
    ("an-account-not-the-stacks", path(CONVERT, "other-project"), principal("tpu-rl", EXPORT), []),
]


@pytest.mark.parametrize(("case", "bound", "member", "expected"), BINDING_CASES, ids=[c[0] for c in BINDING_CASES])
def test_a_kubernetes_service_account_is_the_stacks_and_named_as_its_account(
    case: str, bound: str, member: str, expected: list[str]
) -> None:
    """The account bound is the last ``/`` part of ``serviceAccountId``: of its path, or all of a bare email (which the
    provider refuses, read the same rather than as a malformed shape); its name is the account id of the stack's
    account with that email. A Kubernetes service account of the same name in another namespace is not the stack's."""
    grant = binding(bound, member)
    assert found(*stack(), grant) == [(grant.urn, message) for message in expected]


def test_every_member_of_a_binding_is_judged_after_a_finding() -> None:
    """A finding on one principal of a binding (another project's pool, a Kubernetes service account the stack does
    not make, one named as another account) leaves the principals after it judged, each finding in order."""
    members = [
        principal("tpu-rl", EXPORT, "other-project.svc.id.goog"),
        principal("tpu-rl", "tpu-rl-prod-evaluate"),
        principal("tpu-rl", CONVERT),
        principal("tpu-rl", "tpu-rl-prod-publish"),
    ]
    grant = binding(path(EXPORT), members, "wis", ACCOUNT_BINDING)
    assert found(*stack(), grant) == [
        (grant.urn, other_pool("wis", "tpu-rl", EXPORT, "other-project.svc.id.goog")),
        (grant.urn, not_made("wis", "tpu-rl", "tpu-rl-prod-evaluate")),
        (grant.urn, named_as_another("wis", "tpu-rl", CONVERT, EXPORT)),
        (grant.urn, not_made("wis", "tpu-rl", "tpu-rl-prod-publish")),
    ]


@pytest.mark.parametrize("ksa", [EXPORT, CONVERT])
def test_an_account_known_by_its_email_alone_is_bound_to_no_kubernetes_service_account(ksa: str) -> None:
    """An account whose ``accountId`` the engine does not send (its ``email`` alone; the program always sets one) is
    of no kind the stack makes (as ``grant-targets`` holds it): no Kubernetes service account is named as it, not even
    one named as its email's first part, and the finding names it by its email."""
    own = [r for r in stack() if r.name != f"{EXPORT}-sa"]
    grant = binding(path(EXPORT), principal("tpu-rl", ksa))
    assert found(*own, resource(ACCOUNT, f"{EXPORT}-sa", email=email(EXPORT)), grant) == [
        (grant.urn, named_as_another("wi", "tpu-rl", ksa, email(EXPORT)))
    ]


def test_an_account_bound_not_known_at_up_is_never_read_as_text() -> None:
    """At `pulumi up` an unknown ``serviceAccountId`` cannot be judged: no name is compared with it (not even with an
    account whose email reads as an unknown's text), and the binding's members after one it leaves unjudged are still
    judged against the stack's Kubernetes service accounts."""
    hostile = resource(ACCOUNT, "placeholder-sa", accountId="placeholder", email="(not known during preview)")
    members = [principal("tpu-rl", EXPORT), principal("tpu-rl", "tpu-rl-prod-evaluate")]
    grant = binding(Unknown(), members, "wis", ACCOUNT_BINDING)
    assert [(f.level, f.urn, f.message) for f in judge(*stack(), hostile, grant)] == [
        ("mandatory", grant.urn, not_made("wis", "tpu-rl", "tpu-rl-prod-evaluate")),
        (
            "mandatory",
            "",
            "cannot judge IAMBinding wis: .serviceAccountId: not known at `pulumi up`; give it a value the program "
            "knows",
        ),
    ]
