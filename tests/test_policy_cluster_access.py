"""``gke-private-cluster`` on the cluster resource itself and on a node pool, each field it judges: who reaches the
cluster without IAM (a client certificate, basic authentication), the cluster's default nodes (their metadata mode,
the Compute Engine default account), the kubelet's read-only port (at ``nodePoolDefaults.nodeConfigDefaults``, the
cluster's ``nodeConfig.kubeletConfig`` and a pool's), legacy ABAC, private nodes, Workload Identity and shielded
nodes. The program's own plans never set most of these, so each refusal is shown here on small hand-written props,
with its exact message, and its near miss passes. A value the engine does not know yet is not judged at a preview
(the advisory that names it) and is a finding of its own at ``pulumi up``. The check is called as the engine calls
it (``tests/policy_args.py``); one test runs it through pulumi-policy's analyzer to show where the findings land."""

from __future__ import annotations

import importlib
from typing import Any, cast

import pytest
from pulumi.output import Unknown
from pulumi_policy import ResourceValidationArgs, ResourceValidationPolicy
from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE, UnknownValueError

from policy.tpu_rl_policies.resources import DEPLOYMENT
from tests import analyzer
from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
POLICY = cast(ResourceValidationPolicy, analyzer.pack_policy("gke-private-cluster"))
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
NODES = "tpu-rl-dev-tpu-np@my-tpu-dev-project.iam.gserviceaccount.com"
PORT = "the kubelet's unauthenticated read-only port 10255 (pods, their specs and env)"
UNSET = object()

LEGACY_ABAC = "legacy ABAC grants every service account broad access to the API: set enableLegacyAbac false"
PUBLIC_NODES = "nodes must be private (privateClusterConfig.enablePrivateNodes); egress goes through Cloud NAT"
NO_WORKLOAD_IDENTITY = "Workload Identity must be enabled (workloadIdentityConfig.workloadPool = PROJECT.svc.id.goog)"
UNSHIELDED = "shielded nodes must be enabled (enableShieldedNodes: true)"
CLIENT_CERTIFICATE = (
    "the cluster issues a client certificate (masterAuth.clientCertificateConfig.issueClientCertificate): a "
    "credential no IAM revokes; set it false"
)
BASIC_AUTH = "masterAuth sets basic authentication (a static password to the API server): remove it"


def default_account(what: str, account: str) -> str:
    return (
        f"{what} run as the Compute Engine default account ({account}), usually Editor on the project: set "
        "nodeConfig.serviceAccount to the stack's node account"
    )


def cluster_mode(mode: str) -> str:
    return f"the cluster's default node metadata mode is {mode}; set it GKE_METADATA or leave it unset"


def cluster_port(where: str) -> str:
    return f"the cluster's {where} opens {PORT}: set insecureKubeletReadonlyPortEnabled FALSE"


def pool_mode(mode: str) -> str:
    return (
        f"node pool metadata mode {mode}: pods could read the node's own credentials from the metadata server; set "
        "nodeConfig.workloadMetadataConfig.mode GKE_METADATA"
    )


def pool_port(name: str) -> str:
    return f"node pool {name} opens {PORT}: set nodeConfig.kubeletConfig.insecureKubeletReadonlyPortEnabled FALSE"


def cannot_judge(path: str) -> str:
    return f"cannot judge {path}: not known at `pulumi up`; give it a value the program knows"


def not_known(path: str, withheld: str = "") -> str:
    held = f"; reading them as unset it would report: {withheld}" if withheld else ""
    return f"{path} not known until what they come from exists; judged at `pulumi up`{held}"


@pytest.fixture
def deployment(monkeypatch):
    """Whether the engine runs a preview (``DEPLOYMENT.dry_run``), ``pulumi up`` unless a test says; restored after."""

    def set_to(dry_run: bool) -> None:
        monkeypatch.setattr(DEPLOYMENT, "dry_run", dry_run)

    set_to(False)
    return set_to


def cluster(**props: Any) -> dict[str, Any]:
    """A cluster that passes (private nodes, Workload Identity, shielded nodes, no default nodes of its own), with
    ``props`` over it (``UNSET`` leaves a field out)."""
    base = {
        "name": "tpu-rl-dev",
        "privateClusterConfig": {"enablePrivateNodes": True},
        "workloadIdentityConfig": {"workloadPool": "my-tpu-dev-project.svc.id.goog"},
        "enableShieldedNodes": True,
        **props,
    }
    return {key: value for key, value in base.items() if value is not UNSET}


def pool_node(**fields: Any) -> dict[str, Any]:
    """A node pool's ``nodeConfig`` that passes, with ``fields`` over it (``UNSET`` leaves a field out)."""
    base = {
        "serviceAccount": NODES,
        "workloadMetadataConfig": {"mode": "GKE_METADATA"},
        "kubeletConfig": {"insecureKubeletReadonlyPortEnabled": "FALSE"},
        **fields,
    }
    return {key: value for key, value in base.items() if value is not UNSET}


def findings(type_: str, props: dict[str, Any], name: str = "res") -> list[tuple[str, str | None]]:
    """What the policy reports on the resource ``name`` of ``type_`` with ``props``, as the engine calls it."""
    report = Reports()
    args = ResourceValidationArgs(type_, props, f"urn:pulumi:dev::tpu-rl::{type_}::{name}", name, OPTIONS, None)
    POLICY.validate(args, report)
    return report.calls


def messages(type_: str, props: dict[str, Any], name: str = "res") -> list[str]:
    calls = findings(type_, props, name)
    assert all(urn is None for _, urn in calls), "a resource validation's finding is on the resource judged"
    return [message for message, _ in calls]


def withheld_at_preview(type_: str, props: dict[str, Any]) -> tuple[list[str], str]:
    """At a preview: what the policy reports, and the message of the advisory it raises (it must raise one)."""
    report = Reports()
    args = ResourceValidationArgs(type_, props, f"urn:pulumi:dev::tpu-rl::{type_}::res", "res", OPTIONS, None)
    with pytest.raises(UnknownValueError) as raised:
        POLICY.validate(args, report)
    return [message for message, _ in report.calls], raised.value.message


# ---------------------------------------------------------------------------------------------
# The cluster


CLUSTERS = [
    ({}, []),
    ({"enableLegacyAbac": True}, [LEGACY_ABAC]),
    ({"enableLegacyAbac": False}, []),
    ({"privateClusterConfig": {"enablePrivateNodes": False}}, [PUBLIC_NODES]),
    ({"privateClusterConfig": UNSET}, [PUBLIC_NODES]),
    ({"workloadIdentityConfig": {}}, [NO_WORKLOAD_IDENTITY]),
    ({"enableShieldedNodes": False}, [UNSHIELDED]),
    ({"enableShieldedNodes": UNSET}, []),
    ({"masterAuth": {"clientCertificateConfig": {"issueClientCertificate": True}}}, [CLIENT_CERTIFICATE]),
    ({"masterAuth": {"clientCertificateConfig": {"issueClientCertificate": False}}}, []),
    ({"masterAuth": {"username": "admin"}}, [BASIC_AUTH]),
    ({"masterAuth": {"password": "hunter2"}}, [BASIC_AUTH]),
    ({"masterAuth": {"username": "admin", "password": "hunter2"}}, [BASIC_AUTH]),
    ({"masterAuth": {"username": "", "password": ""}}, []),
    ({"masterAuth": {"username": None, "password": None}}, []),
    ({"nodeConfig": {"serviceAccount": NODES}}, []),
    ({"nodeConfig": {}}, [default_account("the cluster's default nodes", "serviceAccount unset")]),
    ({"nodeConfig": {"serviceAccount": "default"}}, [default_account("the cluster's default nodes", "default")]),
    (
        {"nodeConfig": {"serviceAccount": " 123456789-compute@developer.gserviceaccount.com"}},
        [default_account("the cluster's default nodes", " 123456789-compute@developer.gserviceaccount.com")],
    ),
    ({"nodeConfig": {"serviceAccount": NODES, "workloadMetadataConfig": {"mode": "GKE_METADATA"}}}, []),
    ({"nodeConfig": {"serviceAccount": NODES, "workloadMetadataConfig": {}}}, []),
    (
        {"nodeConfig": {"serviceAccount": NODES, "workloadMetadataConfig": {"mode": "GCE_METADATA"}}},
        [cluster_mode("GCE_METADATA")],
    ),
    (
        {"nodeConfig": {"serviceAccount": NODES, "kubeletConfig": {"insecureKubeletReadonlyPortEnabled": "TRUE"}}},
        [cluster_port("nodeConfig.kubeletConfig")],
    ),
    (
        {"nodeConfig": {"serviceAccount": NODES, "kubeletConfig": {"insecureKubeletReadonlyPortEnabled": " true"}}},
        [cluster_port("nodeConfig.kubeletConfig")],
    ),
    ({"nodeConfig": {"serviceAccount": NODES, "kubeletConfig": {"insecureKubeletReadonlyPortEnabled": "FALSE"}}}, []),
    ({"nodeConfig": {"serviceAccount": NODES, "kubeletConfig": {}}}, []),
    (
        {"nodePoolDefaults": {"nodeConfigDefaults": {"insecureKubeletReadonlyPortEnabled": "TRUE"}}},
        [cluster_port("nodePoolDefaults.nodeConfigDefaults")],
    ),
    ({"nodePoolDefaults": {"nodeConfigDefaults": {"insecureKubeletReadonlyPortEnabled": "false"}}}, []),
    ({"nodePoolDefaults": {"nodeConfigDefaults": {}}}, []),
]


@pytest.mark.parametrize(
    ("props", "expected"),
    CLUSTERS,
    ids=[
        "passes",
        "legacy-abac",
        "legacy-abac-off",
        "public-nodes",
        "no-private-config",
        "no-workload-pool",
        "unshielded",
        "shielded-unset",
        "client-certificate",
        "client-certificate-off",
        "basic-auth-username",
        "basic-auth-password",
        "basic-auth-both",
        "basic-auth-empty",
        "basic-auth-null",
        "default-nodes-own-account",
        "default-nodes-account-unset",
        "default-nodes-account-default",
        "default-nodes-compute-default-email",
        "default-nodes-gke-metadata",
        "default-nodes-mode-unset",
        "default-nodes-gce-metadata",
        "default-nodes-readonly-port-true",
        "default-nodes-readonly-port-true-spaced",
        "default-nodes-readonly-port-false",
        "default-nodes-readonly-port-unset",
        "pool-defaults-readonly-port-true",
        "pool-defaults-readonly-port-false",
        "pool-defaults-readonly-port-unset",
    ],
)
def test_the_cluster_reaches_its_nodes_and_api_only_through_iam(deployment, props, expected):
    """Each field of the cluster on its own: its finding, worded for the field, or none on the near miss. A cluster
    with no ``nodeConfig`` has no default nodes to judge (its nodes are its pools')."""
    assert messages(CLUSTER, cluster(**props)) == expected


def test_every_finding_on_the_cluster_is_reported_in_order(deployment):
    props = cluster(
        enableLegacyAbac=True,
        privateClusterConfig={"enablePrivateNodes": False},
        workloadIdentityConfig={"workloadPool": ""},
        enableShieldedNodes=False,
        masterAuth={"clientCertificateConfig": {"issueClientCertificate": True}, "password": "hunter2"},
        nodeConfig={
            "workloadMetadataConfig": {"mode": "GCE_METADATA"},
            "kubeletConfig": {"insecureKubeletReadonlyPortEnabled": "TRUE"},
        },
        nodePoolDefaults={"nodeConfigDefaults": {"insecureKubeletReadonlyPortEnabled": "TRUE"}},
    )
    assert messages(CLUSTER, props) == [
        cluster_mode("GCE_METADATA"),
        LEGACY_ABAC,
        PUBLIC_NODES,
        NO_WORKLOAD_IDENTITY,
        UNSHIELDED,
        CLIENT_CERTIFICATE,
        BASIC_AUTH,
        default_account("the cluster's default nodes", "serviceAccount unset"),
        cluster_port("nodePoolDefaults.nodeConfigDefaults"),
        cluster_port("nodeConfig.kubeletConfig"),
    ]


def test_another_resource_type_is_not_judged(deployment):
    assert messages("gcp:compute/network:Network", cluster(enableLegacyAbac=True, nodeConfig={})) == []


# ---------------------------------------------------------------------------------------------
# A node pool


POOLS = [
    (pool_node(), []),
    (pool_node(workloadMetadataConfig=UNSET), [pool_mode("(unset)")]),
    (pool_node(workloadMetadataConfig={"mode": "GCE_METADATA"}), [pool_mode("GCE_METADATA")]),
    (pool_node(serviceAccount=UNSET), [default_account("node pool tpu-rl-dev-tpu's nodes", "serviceAccount unset")]),
    (pool_node(serviceAccount="DEFAULT"), [default_account("node pool tpu-rl-dev-tpu's nodes", "DEFAULT")]),
    (pool_node(kubeletConfig=UNSET), [pool_port("tpu-rl-dev-tpu")]),
    (pool_node(kubeletConfig={"insecureKubeletReadonlyPortEnabled": None}), [pool_port("tpu-rl-dev-tpu")]),
    (pool_node(kubeletConfig={"insecureKubeletReadonlyPortEnabled": "TRUE"}), [pool_port("tpu-rl-dev-tpu")]),
    (pool_node(kubeletConfig={"insecureKubeletReadonlyPortEnabled": "no"}), [pool_port("tpu-rl-dev-tpu")]),
    (pool_node(kubeletConfig={"insecureKubeletReadonlyPortEnabled": " false "}), []),
    (
        {},
        [
            pool_mode("(unset)"),
            default_account("node pool tpu-rl-dev-tpu's nodes", "serviceAccount unset"),
            pool_port("tpu-rl-dev-tpu"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("node", "expected"),
    POOLS,
    ids=[
        "passes",
        "mode-unset",
        "gce-metadata",
        "account-unset",
        "account-default",
        "readonly-port-unset",
        "readonly-port-null",
        "readonly-port-true",
        "readonly-port-not-false",
        "readonly-port-false-spaced",
        "node-config-empty",
    ],
)
def test_a_node_pool_uses_the_metadata_server_its_own_account_and_closes_the_readonly_port(deployment, node, expected):
    """A pool's nodes are named by the pool's GKE name (not its Pulumi resource name). A pool's read-only port must be
    set ``FALSE`` (the program sets it on every pool: unset or null reads as open), where the cluster's unset passes."""
    assert messages(NODE_POOL, {"name": "tpu-rl-dev-tpu", "nodeConfig": node}, name="tpu-pool") == expected


def test_a_node_pool_with_no_gke_name_is_named_by_its_resource_name(deployment):
    assert messages(NODE_POOL, {"nodeConfig": pool_node(serviceAccount=UNSET, kubeletConfig=UNSET)}, "tpu-pool") == [
        default_account("node pool tpu-pool's nodes", "serviceAccount unset"),
        pool_port("tpu-pool"),
    ]


# ---------------------------------------------------------------------------------------------
# Values not known yet


UNKNOWNS = [
    (CLUSTER, cluster(nodeConfig=UNKNOWN_OBJECT_VALUE), ".nodeConfig"),
    (
        CLUSTER,
        cluster(nodeConfig={"serviceAccount": NODES, "workloadMetadataConfig": {"mode": UNKNOWN_STRING_VALUE}}),
        ".nodeConfig.workloadMetadataConfig.mode",
    ),
    (CLUSTER, cluster(masterAuth={"username": UNKNOWN_STRING_VALUE}), ".masterAuth.username"),
    (CLUSTER, cluster(masterAuth={"password": UNKNOWN_STRING_VALUE}), ".masterAuth.password"),
    (
        CLUSTER,
        cluster(nodePoolDefaults={"nodeConfigDefaults": {"insecureKubeletReadonlyPortEnabled": UNKNOWN_STRING_VALUE}}),
        ".nodePoolDefaults.nodeConfigDefaults.insecureKubeletReadonlyPortEnabled",
    ),
    (
        CLUSTER,
        cluster(
            nodeConfig={
                "serviceAccount": NODES,
                "kubeletConfig": {"insecureKubeletReadonlyPortEnabled": UNKNOWN_STRING_VALUE},
            }
        ),
        ".nodeConfig.kubeletConfig.insecureKubeletReadonlyPortEnabled",
    ),
    (
        NODE_POOL,
        {"nodeConfig": pool_node(kubeletConfig={"insecureKubeletReadonlyPortEnabled": UNKNOWN_STRING_VALUE})},
        ".nodeConfig.kubeletConfig.insecureKubeletReadonlyPortEnabled",
    ),
    (
        NODE_POOL,
        {"nodeConfig": pool_node(workloadMetadataConfig={"mode": UNKNOWN_STRING_VALUE})},
        ".nodeConfig.workloadMetadataConfig.mode",
    ),
]
UNKNOWN_IDS = [
    "cluster-node-config",
    "cluster-metadata-mode",
    "basic-auth-username",
    "basic-auth-password",
    "pool-defaults-readonly-port",
    "cluster-readonly-port",
    "pool-readonly-port",
    "pool-metadata-mode",
]


@pytest.mark.parametrize(("type_", "props", "path"), UNKNOWNS, ids=UNKNOWN_IDS)
def test_a_value_not_known_at_a_preview_is_judged_at_up(deployment, type_, props, path):
    """At a preview the policy reports nothing on a value it cannot see and names it (the advisory "judged at
    `pulumi up`"), reading it as neither set nor unset; at ``pulumi up`` it is a finding of its own, and the only one
    (an unknown account, password or port is never taken for an open one)."""
    deployment(True)
    assert withheld_at_preview(type_, props) == ([], not_known(path))
    deployment(False)
    assert messages(type_, props) == [cannot_judge(path)]


def test_a_finding_after_an_unknown_value_waits_for_up(deployment):
    """At a preview, a finding the check reports after it read an unknown value of the resource may rest on it: it is
    named in the advisory, not reported; at ``pulumi up`` it is reported with the unknown value's own finding."""
    props = cluster(masterAuth={"username": UNKNOWN_STRING_VALUE}, nodeConfig={})
    unset = default_account("the cluster's default nodes", "serviceAccount unset")
    deployment(True)
    assert withheld_at_preview(CLUSTER, props) == ([], not_known(".masterAuth.username", unset))
    deployment(False)
    assert messages(CLUSTER, props) == [unset, cannot_judge(".masterAuth.username")]


def test_a_node_account_not_known_yet_is_left_to_stack_principals(deployment):
    """An unknown ``serviceAccount`` is not the Compute Engine default: not judged here, at a preview or at up."""
    for dry_run in (True, False):
        deployment(dry_run)
        assert messages(NODE_POOL, {"nodeConfig": pool_node(serviceAccount=UNKNOWN_STRING_VALUE)}) == []
        assert messages(CLUSTER, cluster(nodeConfig={"serviceAccount": UNKNOWN_STRING_VALUE})) == []


# ---------------------------------------------------------------------------------------------
# Through the analyzer


def test_the_findings_land_on_the_cluster_and_the_pool_that_have_them():
    """Through pulumi-policy's analyzer, as the engine runs the pack (a resource's findings are those of the request
    that sends it): each finding is mandatory, on the resource it names only; at a preview an unknown value is the
    advisory on that resource."""
    cluster_urn = f"urn:pulumi:dev::tpu-rl::{CLUSTER}::cluster"
    open_pool = pool_node(kubeletConfig={"insecureKubeletReadonlyPortEnabled": None})
    stack = [
        analyzer.Resource(CLUSTER, "cluster", cluster_urn, cluster(masterAuth={"username": "admin"})),
        analyzer.Resource(
            NODE_POOL,
            "cpu-pool",
            f"urn:pulumi:dev::tpu-rl::{NODE_POOL}::cpu-pool",
            {"name": "tpu-rl-dev-cpu", "nodeConfig": pool_node()},
        ),
        analyzer.Resource(
            NODE_POOL,
            "tpu-pool",
            f"urn:pulumi:dev::tpu-rl::{NODE_POOL}::tpu-pool",
            {"name": "tpu-rl-dev-tpu", "nodeConfig": open_pool},
        ),
    ]
    up = analyzer.Pack({"all": "mandatory"}, policies=[POLICY], stack="dev", stack_config={})
    found = {r.name: [(f.policy, f.level, f.message, f.unjudged) for f in up.analyze(r)] for r in stack}
    assert found == {
        "cluster": [("gke-private-cluster", "mandatory", BASIC_AUTH, False)],
        "cpu-pool": [],
        "tpu-pool": [("gke-private-cluster", "mandatory", pool_port("tpu-rl-dev-tpu"), False)],
    }
    preview = analyzer.Pack({"all": "mandatory"}, dry_run=True, policies=[POLICY], stack="dev", stack_config={})
    unknown = analyzer.Resource(CLUSTER, "cluster", cluster_urn, cluster(masterAuth={"password": Unknown()}))
    (advisory,) = preview.analyze(unknown)
    assert (advisory.level, advisory.unjudged) == ("advisory", True)
    assert advisory.message == (
        "can't run policy 'gke-private-cluster' from policy pack 'tpu-rl-guardrails@v0.0.1' during preview: "
        + not_known(".masterAuth.password")
    )
