"""Manifests of the platform's Kubernetes objects (plain dicts, no Pulumi)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.controllers import JOBSET_SCHEMA_FIELDS
from core.names import COMPONENT_LABEL, HF_SECRET, HF_SECRET_KEY, SCRATCH_STORAGE_CLASS, WORKLOAD_IDENTITY_ANNOTATION
from core.pathways import PORTS
from core.printed_commands import ANY_STACK, helm, kubectl, make_target
from core.steps import STEPS, TPU_HOLDER

POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/audit": "baseline",
    "pod-security.kubernetes.io/audit-version": "latest",
}
"""Pod Security Admission, stated rather than left to the cluster's default: the Pathways head and workers
run on the host network and the workers mount the node's ``/tmp`` (as xpk, pathways-job and Cluster
Toolkit run them), which ``baseline`` forbids, so the namespace enforces ``privileged``; every pod beyond
``baseline`` (the head and the TPU workers) is recorded in the audit log. No container is privileged."""


def platform_labels(cluster_name: str) -> dict[str, str]:
    """The labels of every object of the Kubernetes platform: the project's name and the stack's cluster."""
    return {"app.kubernetes.io/name": "tpu-rl", "app.kubernetes.io/instance": cluster_name}


def namespace_manifest(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """The workflow's namespace, with its Pod Security Admission levels (``POD_SECURITY``)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {**labels, **POD_SECURITY}}}


def service_account_manifest(
    namespace: str, name: str, labels: dict[str, str], gsa_email: Any | None
) -> dict[str, Any]:
    """The workload's KSA, bound to its Google service account by Workload Identity (``gsa_email`` None: on an
    existing cluster without it, the pods run as their node's identity). Its pods get no Kubernetes API
    token (``automountServiceAccountToken: false``; a CPU step's pod does not set it, so the account's default holds):
    the steps never call the API server, and Workload Identity does not need the token in the pod (the GKE metadata
    server identifies the pod and asks for its account's token itself)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if gsa_email is not None:
        metadata["annotations"] = {WORKLOAD_IDENTITY_ANNOTATION: gsa_email}
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata, "automountServiceAccountToken": False}


POD_READER_RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
"""What the training head may do with the API server: read the pods of its namespace, to wait for its slice's
workers and judge a lost slice by them (``workloads/container/slice_state.py``). No watch, no other resource, no
write; a Role, so no other namespace."""


def head_access(namespace: str, account: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The training head's Kubernetes service account (``core.names.head_ksa``), a Role that reads its namespace's
    pods (``POD_READER_RULES``) and the binding of the one to the other. The account maps to no Google account: the
    head runs on the host network, as its node's (``infra.gcp.identities``). Its pod mounts the account's token
    (``automountServiceAccountToken`` on the pod: ``workloads.specs.step_manifests``); the account mounts none."""
    meta = {"namespace": namespace, "labels": labels}
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, **meta},
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": account, **meta},
            "rules": [dict(rule) for rule in POD_READER_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": account, **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    ]


def token_secret_manifest(namespace: str, labels: dict[str, str], token: Any, name: str = HF_SECRET) -> dict[str, Any]:
    """A Hugging Face token's Secret (the read token's, or the write token's); containers read it through
    ``secretKeyRef`` only."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "type": "Opaque",
        "stringData": {HF_SECRET_KEY: token},
    }


def scratch_storage_class(disk_type: str, labels: dict[str, str]) -> dict[str, Any]:
    """The CPU steps' scratch disks, of the type cpu-np's machine family takes (PD or Hyperdisk).

    GKE's ``standard-rwo`` is PD-balanced, which N4/C4 nodes cannot attach.
    """
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": SCRATCH_STORAGE_CLASS, "labels": labels},
        "provisioner": "pd.csi.storage.gke.io",
        "parameters": {"type": disk_type},
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }


def network_policies(namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """Default-deny ingress for every pod of the workflow namespace, and the Pathways ports between the
    training's own pods.

    The conversion and the export take no connections at all. The Pathways head and workers run with
    ``hostNetwork``, where Kubernetes treats their traffic as the node's and a NetworkPolicy does not reach
    it (the VPC firewall of ``infra.gcp.network`` does); the second policy states the ports they use so
    the policy still holds for them should they ever run on the pod network.
    """
    training = {"matchLabels": {"app.kubernetes.io/name": "tpu-rl", COMPONENT_LABEL: TPU_HOLDER}}
    storage_only = {
        "matchLabels": {"app.kubernetes.io/name": "tpu-rl"},
        "matchExpressions": [
            {
                "key": COMPONENT_LABEL,
                "operator": "In",
                "values": [name for name, facts in STEPS.items() if facts.storage_only],
            }
        ],
    }
    meta = {"namespace": namespace, "labels": labels}
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny-ingress", **meta},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "pathways-between-training-pods", **meta},
            "spec": {
                "podSelector": training,
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [{"podSelector": training}],
                        "ports": [{"protocol": "TCP", "port": port} for port in PORTS],
                    }
                ],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "evaluation-egress", **meta},
            "spec": {"podSelector": storage_only, "policyTypes": ["Egress"], "egress": EVALUATION_EGRESS},
        },
    ]


METADATA_SERVER: dict[str, tuple[dict[str, Any], ...]] = {
    "169.254.169.254": ({"protocol": "TCP", "port": 80},),
    "169.254.169.252": ({"protocol": "TCP", "port": 988},),
}
"""The GKE metadata server, where a pod's Google client libraries get its Workload Identity token: pods ask
``169.254.169.254`` on port 80, and the node serves it at ``169.254.169.252`` on port 988. A policy that limits a pod's
egress must allow both (GKE, "Control communication between Pods and Services using network policies",
``kubernetes-engine/docs/how-to/network-policy``, with Workload Identity Federation for GKE): GKE Dataplane V2, which
this cluster runs (``ADVANCED_DATAPATH``), judges the address the pod asks; an iptables dataplane judges the one the
node redirects it to. TCP only: the server speaks HTTP."""
NODE_LOCAL_DNS: dict[str, tuple[dict[str, Any], ...]] = {
    "169.254.20.10": ({"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}),
}
"""NodeLocal DNSCache, where a pod's DNS queries go when the add-on runs (GKE, "Set up NodeLocal DNSCache",
``kubernetes-engine/docs/how-to/nodelocal-dns-cache``: on by default on Standard clusters from 1.33.1; the cache listens
on the link-local ``169.254.20.10``, Kubernetes ``cluster/addons/dns/nodelocaldns``): DNS only."""
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
"""The addresses of the cluster (pods, Services, nodes) and of the VPC: what the evaluation never needs to reach."""
LINK_LOCAL = "169.254.0.0/16"
"""The node's link-local services: reached only at the addresses and ports above, never by the HTTPS rule."""
EVALUATION_EGRESS: list[dict[str, Any]] = [
    # Names: the cluster's DNS pods (NodeLocal DNSCache answers at a link-local address, below).
    {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    },
    # The node's link-local services, each at its address and on its ports only (METADATA_SERVER, NODE_LOCAL_DNS).
    *(
        {"to": [{"ipBlock": {"cidr": f"{address}/32"}}], "ports": [dict(port) for port in ports]}
        for address, ports in (*METADATA_SERVER.items(), *NODE_LOCAL_DNS.items())
    ),
    # Cloud Storage over HTTPS, at Google's public addresses (through Private Google Access or Cloud NAT).
    {
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [*PRIVATE_RANGES, LINK_LOCAL]}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    },
]
"""What the evaluation reaches: names, its token, Cloud Storage over HTTPS. It reads the verified export and writes
its record, with the Hub switched off (``HF_HUB_OFFLINE=1``); it runs the exported model, so it gets no way to the
cluster's other pods (the Pathways ports, the steps), the nodes or the VPC, no port but 443 outside, and of the
link-local range only the metadata server's HTTP and the DNS cache's port 53 (not the range's other services, not
their other ports). A NetworkPolicy names addresses, not hosts: the Hub's HTTPS stays reachable (the step's Hub switch
is off, and it holds no Hub token)."""


# ---------------------------------------------------------------------------------------------
# The JobSet CRD on an upgrade of the chart

JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
"""The CRD the JobSet chart ships in ``crds/`` (``charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml`` at v0.10.1
and v0.12.0; ``templates/`` holds none)."""
JOBSET_CRD_VERSION = "v1alpha2"
SHOWN = 3
"""The missing fields a refusal names (then "and N more")."""


EMBEDDED = frozenset({"template", "templates"})
"""Properties that embed another API's object (a replicated Job's ``template``, a volume claim policy's
``templates``): their schemas are Kubernetes', not JobSet's, and are not followed."""


def _paths(schema: Mapping[str, Any], at: str) -> set[str]:
    found: set[str] = set()
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return found
    for name, child in properties.items():
        path = f"{at}.{name}"
        found.add(path)
        if name in EMBEDDED or not isinstance(child, Mapping):
            continue
        items = child.get("items")
        found |= _paths(items, f"{path}[]") if isinstance(items, Mapping) else _paths(child, path)
    return found


def jobset_crd_fields(crd: Mapping[str, Any]) -> frozenset[str]:
    """JobSet's own fields a JobSet CRD serves at ``v1alpha2``, as paths (``spec.volumeClaimPolicies``,
    ``status.replicatedJobsStatus[].jobRestarts``), ``spec`` and ``status`` alike, the objects of other APIs they
    embed left out (``EMBEDDED``); empty: a shape it cannot read. A status field counts: an older CRD prunes what
    the newer controller writes there (JobSet 0.12.0's ``jobRestarts``, which 0.11.1's CRD lacks)."""
    for version in crd.get("spec", {}).get("versions") or []:
        if isinstance(version, Mapping) and version.get("name") == JOBSET_CRD_VERSION:
            schema = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
            if not isinstance(schema, Mapping):
                return frozenset()
            return frozenset(
                path
                for part in ("spec", "status")
                if isinstance(schema.get(part), Mapping)
                for path in _paths(schema[part], part)
            )
    return frozenset()


def _outermost(paths: list[str]) -> list[str]:
    """The paths whose parent is not among them: ``spec.volumeClaimPolicies``, not each field inside it."""
    within = set(paths)
    return [p for p in paths if p.rsplit(".", 1)[0].removesuffix("[]") not in within]


def jobset_crd_problem(crd: Mapping[str, Any] | None, version: str, context: str, stack: str) -> str | None:
    """Why the cluster's JobSet CRD cannot serve chart ``version`` (None: it can, or there is none yet and
    the chart's install creates it); the fix names the cluster by its kubeconfig ``context``.

    Helm installs a chart's ``crds/`` on install only, skipping a CRD that exists, and never on an upgrade
    (helm v3.20.2 ``pkg/action/install.go`` ``installCRDs``: "CRD %s is already present. Skipping.";
    ``pkg/action/upgrade.go`` renders without CRDs); pulumi-kubernetes' Release upgrades through that action
    (v4.32.0 ``helm_release.go`` ``helmUpdate``: ``action.NewUpgrade``). So a new ``workflow.jobsetVersion``
    on an existing cluster would run the new controller on the old schema, whose pruning drops the new
    fields. The fix is one command, and ``up`` stops before the release changes until it has run."""
    if crd is None:
        return None
    missing = _outermost(sorted(JOBSET_SCHEMA_FIELDS[version] - jobset_crd_fields(crd)))
    if not missing:
        return None
    fields = ", ".join(missing[:SHOWN]) + (f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else "")
    return (
        f"the cluster's JobSet CRD {JOBSET_CRD} predates JobSet {version} (it has no {fields}): Helm installs a "
        "chart's CRDs only when it first installs the chart, never on an upgrade. Apply the new CRD, then run "
        f"`{make_target('up', stack)}` again: helm show crds {JOBSET_CHART} --version {version} | "
        f"{kubectl(context, 'apply', '--server-side', '--force-conflicts', '-f', '-')}"
    )


# ---------------------------------------------------------------------------------------------
# A Helm release an interrupted install, upgrade or uninstall left pending

PENDING_FIXES = {
    "pending-install": "uninstall",
    "pending-upgrade": "rollback",
    "pending-rollback": "rollback",
    "uninstalling": "uninstall",
}
"""What clears each pending status of a release's newest revision (helm v3.20.2 ``pkg/release/status.go``): a killed
first install has nothing to go back to (uninstall; its ``crds/`` stay); a killed upgrade or rollback goes back to
the revision before it (``pkg/action/rollback.go`` checks no pending status); a killed uninstall is run again."""


JOBSET_NAMESPACE = "jobset-system"
"""Where the JobSet chart's release (``jobset``) is installed."""
RELEASES_IN_STATE = "TPU_RL_RELEASES_IN_STATE"
"""The environment variable through which ``make up`` tells the program which Helm releases the stack's state holds
(``tools.state releases``, from ``pulumi stack export``): their names, comma-separated; empty: none; unset: unknown
(a `pulumi up` run by hand), and nothing is compared with the state."""


def releases_in_state(value: str | None) -> frozenset[str] | None:
    """The release names of ``RELEASES_IN_STATE``'s value (None: unset, unknown)."""
    if value is None:
        return None
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def helm_release_problem(
    name: str,
    namespace: str,
    newest: tuple[int, str] | None,
    *,
    in_state: frozenset[str] | None = None,
    stack: str = ANY_STACK,
    protected: bool = False,
    context: str,
) -> str | None:
    """Why the next install or upgrade of the Helm release ``name`` cannot run (None: it can), from its newest
    revision and status (``infra.k8s.live.ClusterReader.helm_release``) and, when known, the names of the releases
    the stack's state holds (``in_state``, ``releases_in_state``; None: unknown, not compared). The fix names the
    stack's cluster by its kubeconfig ``context`` (``core.printed_commands.helm``).

    A runner killed while Helm installed, upgraded or rolled back a release leaves its newest revision pending, and
    Helm then refuses every later operation: an install with "cannot re-use a name that is still in use" (helm
    v3.20.2 ``pkg/action/install.go`` ``availableName``: any status but a failed or uninstalled one with
    ``replace``), an upgrade with "another operation (install/upgrade/rollback) is in progress"
    (``pkg/action/upgrade.go`` ``prepareUpgrade``: ``IsPending``). pulumi-kubernetes installs and upgrades
    through those actions (v4.32.0 ``helm_release.go`` ``helmCreate``, ``helmUpdate``) and the engine plans a
    create again for a create that was in flight (``journal.go``: a pending create is not a resource).

    A release Helm's storage holds (in any status but a pending one) that the state does not is a create the
    engine plans and Helm refuses the same way (``helmCreate`` never sets ``replace``: ``client.Replace =
    newRelease.Replace``, an input the program leaves false). The state loses a release that way when a destroy's
    cluster delete fails: the engine drops every object ``deletedWith`` the cluster once the cluster's delete is
    planned (pulumi v3.259.0 ``pkg/resource/deploy/step.go`` ``DeleteStep.Apply``: ``isDeletedWith``), and the
    releases stay installed in the cluster that stays. Finishing the destroy deletes the cluster with them (a
    release with a create pending in the state counts as held: ``tools.state_export.releases_in_state``). A
    ``protected`` cluster (a protected stack's) is not being deleted: its destroy is refused (``make destroy``, and
    the cluster's ``protect`` in the engine), so the line names ``helm uninstall`` of the release instead, after which
    `up` installs it anew. Each release has a destroy guard from its create on
    (``infra.k8s.platform.release_guard``), so a protected stack's destroy drops none; a state written without the
    guards can still hold such a cluster."""
    if newest is None:
        return None
    revision, status = newest
    if status in PENDING_FIXES:
        fix = PENDING_FIXES[status]
        return (
            f"Helm release {namespace}/{name} is {status} (revision {revision}), left by an interrupted helm "
            "operation, and Helm refuses every install or upgrade until it is cleared. Run, then "
            f"`{make_target('up', stack)}` again: "
            f"{helm(context, fix, name, '-n', namespace)}"
        )
    if in_state is None or name in in_state:
        return None
    if protected:
        return (
            f"Helm release {namespace}/{name} is {status} in the cluster (revision {revision}) but not in stack "
            f"{stack}'s state: a destroy dropped it from the state (it is deleted with the cluster) while the "
            f"cluster, protected, stays, and Helm refuses to install it again. Uninstall it, then `make up` again (it "
            f"installs it anew): {helm(context, 'uninstall', name, '-n', namespace)}"
        )
    return (
        f"Helm release {namespace}/{name} is {status} in the cluster (revision {revision}) but not in stack "
        f"{stack}'s state: a destroy whose cluster delete failed dropped it from the state (it is deleted with the "
        "cluster) while it stays installed, and Helm refuses to install it again. Fix what failed the cluster's "
        f"delete, then finish the destroy and `make up` again: make destroy STACK={stack}"
    )
