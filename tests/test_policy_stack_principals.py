"""``stack-principals`` on the members of the stack's grants, judged through pulumi-policy's own analyzer
(``tests/analyzer.py``) on small stacks built by hand, with no configuration from the engine (the stack's cluster
names its project, so its Workload Identity pool): every member of every grant is judged, each named account one of
the stack's own, the project's GKE agent only on a Cloud KMS key, a Kubernetes service account's principal only from
the stack's own pool; what is not an account at all is ``iam-service-accounts-only``'s. Each finding is the exact line
an operator reads, on the grant it names, its list of what the stack has ending in "none known" or "none declared"
when the stack has nothing to list."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer
from tests.grant_cases import ACCOUNT_IAM, AGENT, BUCKET_IAM, KEY, KEY_IAM, PROJECT, STEP
from tests.principals_stack import ACCOUNT, CLUSTER, KSA, POOL, WORKLOAD_USER, found, judge, resource

pytestmark = pytest.mark.pure

NODE_POOL = "gcp:container/nodePool:NodePool"
BUCKET_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
ROLE = "roles/storage.objectUser"
FOREIGN = "serviceAccount:tpu-rl-prod-export@other-project.iam.gserviceaccount.com"
"""Another project's account of the same name: not one of this stack's."""
PERSON = "user:alice@example.com"
EXPORT_ACCOUNT = f"projects/{PROJECT}/serviceAccounts/tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"


def cluster(name: str = "tpu-rl-prod", project: str = PROJECT) -> analyzer.Resource:
    return resource(CLUSTER, name, name=name, project=project, location="us-east5")


def principals() -> list[analyzer.Resource]:
    """The stack's export account and its Kubernetes service account in the default namespace."""
    return [
        resource(ACCOUNT, "export-sa", accountId="tpu-rl-prod-export", project=PROJECT),
        resource(KSA, "export-ksa", metadata={"name": "tpu-rl-prod-export", "namespace": "tpu-rl"}),
    ]


def not_ours(name: str, member: str, role: Any = ROLE) -> str:
    return (
        f"{name} grants {role} to {member}, which is not one of this stack's accounts: another stack's or a person's "
        "account would reach this stack's resources"
    )


def other_pool(name: str, pool: str, pools: str) -> str:
    return (
        f"{name} lets tpu-rl/tpu-rl-prod-export of the identity pool {pool} act as a Google account: only the stack's "
        f"own project's pool ({pools}) holds its Kubernetes service accounts; another project's cluster would take the "
        "identity"
    )


GRANT_CASES = [
    # (id, grant, the messages of its findings, in order)
    ("own-account", resource(BUCKET_IAM, "g", role=ROLE, member=STEP), []),
    ("another-projects-account", resource(BUCKET_IAM, "g", role=ROLE, member=FOREIGN), [not_ours("g", FOREIGN)]),
    ("a-person", resource(BUCKET_IAM, "g", role=ROLE, member=PERSON), []),
    ("a-number", resource(BUCKET_IAM, "g", role=ROLE, member=7), []),
    ("no-role", resource(BUCKET_IAM, "g", member=FOREIGN), [not_ours("g", FOREIGN, None)]),
    ("agent-on-the-key", resource(KEY_IAM, "k", cryptoKeyId=KEY, role=ROLE, member=AGENT), []),
    ("agent-on-a-bucket", resource(BUCKET_IAM, "g", role=ROLE, member=AGENT), [not_ours("g", AGENT)]),
    (
        "another-on-the-key",
        resource(KEY_IAM, "k", cryptoKeyId=KEY, role=ROLE, member=FOREIGN),
        [not_ours("k", FOREIGN)],
    ),
    (
        "after-a-person",
        resource(BUCKET_BINDING, "b", role=ROLE, members=[PERSON, 7, FOREIGN]),
        [not_ours("b", FOREIGN)],
    ),
    (
        "after-an-own-account",
        resource(BUCKET_BINDING, "b", role=ROLE, members=[STEP, FOREIGN, AGENT]),
        [not_ours("b", FOREIGN), not_ours("b", AGENT)],
    ),
    (  # members on a key's IAMMember: a shape the provider does not send, every member of which is still judged
        "after-the-agent-on-the-key",
        resource(KEY_IAM, "k", cryptoKeyId=KEY, role=ROLE, members=[AGENT, FOREIGN]),
        [not_ours("k", FOREIGN)],
    ),
]


@pytest.mark.parametrize(("case", "grant", "expected"), GRANT_CASES, ids=[c[0] for c in GRANT_CASES])
def test_every_member_of_a_grant_is_one_of_the_stacks_accounts(
    case: str, grant: analyzer.Resource, expected: list[str]
) -> None:
    """Each account a grant names is judged, those after one that is the stack's, the key's GKE agent or no account
    at all among them, each finding on the grant; a person or a value that is not text is no finding here (it is
    ``iam-service-accounts-only``'s), and the GKE agent is allowed on a Cloud KMS key only."""
    assert found(cluster(), *principals(), grant) == [(grant.urn, message) for message in expected]


def test_a_workload_principal_comes_from_the_stacks_own_pool_only() -> None:
    """The pool the finding names beside the stack's own, each once, sorted and comma-separated; "none known" when the
    stack names no project (no cluster, no ``gcp:project``), where every pool is another's."""
    member = "serviceAccount:other-project.svc.id.goog[tpu-rl/tpu-rl-prod-export]"
    grant = resource(ACCOUNT_IAM, "wi", serviceAccountId=EXPORT_ACCOUNT, role=WORKLOAD_USER, member=member)
    pool = "other-project.svc.id.goog"
    assert found(cluster(), *principals(), grant) == [(grant.urn, other_pool("wi", pool, POOL))]
    two = (cluster(), cluster("tpu-rl-b", "b-project"))
    assert found(*two, *principals(), grant) == [(grant.urn, other_pool("wi", pool, f"b-project.svc.id.goog, {POOL}"))]
    assert found(*principals(), grant) == [(grant.urn, other_pool("wi", pool, "none known"))]
    own = resource(
        ACCOUNT_IAM,
        "wi",
        serviceAccountId=EXPORT_ACCOUNT,
        role=WORKLOAD_USER,
        member=f"serviceAccount:{POOL}[tpu-rl/tpu-rl-prod-export]",
    )
    assert found(cluster(), *principals(), own) == []


def test_a_member_not_known_at_up_is_never_passed() -> None:
    """A grant's member the engine does not know is read as such: at `pulumi up` it cannot be judged, never taken for
    a value that is not an account."""
    grant = resource(BUCKET_IAM, "g", role=ROLE, member=Unknown())
    assert [(f.level, f.message) for f in judge(cluster(), *principals(), grant)] == [
        (
            "mandatory",
            "cannot judge BucketIAMMember g: .member: not known at `pulumi up`; give it a value the program knows",
        )
    ]


def test_nodes_of_a_stack_that_declares_no_node_account() -> None:
    """A stack with no node account of its own says so where the finding lists them."""
    account = STEP.removeprefix("serviceAccount:")
    pool = resource(NODE_POOL, "tpu-pool", cluster="tpu-rl-prod", nodeConfig={"serviceAccount": account})
    assert found(*principals(), pool) == [
        (
            pool.urn,
            f"tpu-pool's nodes run as {account}, which is not one of this stack's node accounts (none declared): every "
            "pod on them would act with its roles through the kubelet",
        )
    ]
