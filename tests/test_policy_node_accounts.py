"""``stack-principals`` on the accounts nodes run as: the cluster's default nodes (when it declares a ``nodeConfig``)
and every node pool run as one of the stack's own node accounts (``<clusterName>-sys-np``, ``-cpu-np``, ``-tpu-np``);
a step's account, another stack's or another project's on a node would reach every pod it runs through the kubelet.
Unset, the account is the Compute Engine default, which ``gke-private-cluster`` judges, not this rule. Judged through
pulumi-policy's own analyzer (``tests/analyzer.py``) on small stacks built by hand, with no configuration from the
engine (the stack's cluster names its project and cluster)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
PRINCIPALS = analyzer.pack_policy("stack-principals")
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
ACCOUNT = "gcp:serviceaccount/account:Account"
PROJECT = "my-tpu-dev-project"


def email(account_id: str) -> str:
    return f"{account_id}@{PROJECT}.iam.gserviceaccount.com"


SYSTEM_NODES = email("tpu-rl-dev-sys-np")
TPU_NODES = email("tpu-rl-dev-tpu-np")
STEP = email("tpu-rl-dev-convert")
"""A step's account of the stack: its own, but never a node's."""


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::tpu-rl::{type_}::{name}"


def cluster(node: Any = None) -> analyzer.Resource:
    """The stack's cluster, its default nodes' ``nodeConfig`` given or none (a cluster whose pools are its own)."""
    props: dict[str, Any] = {"name": "tpu-rl-dev", "project": PROJECT, "location": "us-east5"}
    if node is not None:
        props["nodeConfig"] = node
    return analyzer.Resource(CLUSTER, "cluster", urn(CLUSTER, "cluster"), props)


def pool(name: str, node: Any = None) -> analyzer.Resource:
    props: dict[str, Any] = {"cluster": "tpu-rl-dev", "project": PROJECT, "location": "us-east5"}
    if node is not None:
        props["nodeConfig"] = node
    return analyzer.Resource(NODE_POOL, name, urn(NODE_POOL, name), props)


def accounts() -> list[analyzer.Resource]:
    """The stack's node accounts and one step's account."""
    ids = ("tpu-rl-dev-sys-np", "tpu-rl-dev-tpu-np", "tpu-rl-dev-convert")
    return [analyzer.Resource(ACCOUNT, i, urn(ACCOUNT, i), {"accountId": i, "project": PROJECT}) for i in ids]


def judge(*resources: analyzer.Resource, preview: bool = False) -> list[analyzer.Finding]:
    pack = analyzer.Pack({"all": "mandatory"}, dry_run=preview, policies=[PRINCIPALS], stack="dev", stack_config={})
    return pack.analyze_stack([*accounts(), *resources])


def refused(name: str, account: str) -> str:
    return (
        f"{name}'s nodes run as {account}, which is not one of this stack's node accounts ({SYSTEM_NODES}, "
        f"{TPU_NODES}): every pod on them would act with its roles through the kubelet"
    )


STACKS = [
    ([cluster(), pool("tpu-pool", {"serviceAccount": TPU_NODES})], []),
    ([cluster({"serviceAccount": SYSTEM_NODES}), pool("tpu-pool", {"serviceAccount": TPU_NODES})], []),
    ([cluster({"serviceAccount": STEP})], [(urn(CLUSTER, "cluster"), refused("cluster", STEP))]),
    (
        [cluster(), pool("tpu-pool", {"serviceAccount": STEP})],
        [(urn(NODE_POOL, "tpu-pool"), refused("tpu-pool", STEP))],
    ),
    (
        [cluster(), pool("cpu-pool", {"machineType": "n2-standard-8"}), pool("tpu-pool", {"serviceAccount": STEP})],
        [(urn(NODE_POOL, "tpu-pool"), refused("tpu-pool", STEP))],
    ),
    (
        [cluster({"machineType": "e2-small"}), pool("tpu-pool", {"serviceAccount": email("tpu-rl-dev-tpu-np-x")})],
        [(urn(NODE_POOL, "tpu-pool"), refused("tpu-pool", email("tpu-rl-dev-tpu-np-x")))],
    ),
]


@pytest.mark.parametrize(
    ("resources", "expected"),
    STACKS,
    ids=["node-accounts", "cluster-nodes", "cluster-step", "pool-step", "after-unset", "after-cluster-unset"],
)
def test_the_clusters_nodes_and_every_pool_run_as_a_node_account(
    resources: list[analyzer.Resource], expected: list[tuple[str, str]]
) -> None:
    """Each finding on the resource whose nodes it names. A cluster with no ``nodeConfig`` (its nodes are its pools')
    or a ``nodeConfig`` with no account (the Compute Engine default's, ``gke-private-cluster``) is no finding here,
    and the resources after it are still judged."""
    found = judge(*resources)
    assert {f.level for f in found} <= {"mandatory"} and not any(f.unjudged for f in found)
    assert [(f.urn, f.message) for f in found] == expected


def test_a_node_account_not_known_at_preview_is_judged_at_up() -> None:
    """At a preview an unknown account is the advisory naming it, with no finding it would make read as a text; at
    `pulumi up` it cannot be judged."""
    unknown = pool("tpu-pool", {"serviceAccount": Unknown()})
    found = judge(cluster(), unknown, preview=True)
    assert [(f.level, f.unjudged) for f in found] == [("advisory", True)]
    assert found[0].message.endswith(
        ": NodePool tpu-pool: .nodeConfig.serviceAccount not known until what they come from exists; judged at "
        "`pulumi up`"
    )
    assert [f.message for f in judge(cluster(), unknown)] == [
        "cannot judge NodePool tpu-pool: .nodeConfig.serviceAccount: not known at `pulumi up`; give it a value the "
        "program knows"
    ]
