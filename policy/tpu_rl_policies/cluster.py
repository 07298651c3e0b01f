"""The GKE cluster and its TPU node pools: a pool forms a valid slice (``tpu-node-pool-shape``); the cluster has
private nodes, Workload Identity and shielded nodes, its pools the GKE metadata server (``gke-private-cluster``)."""

from __future__ import annotations

import re
from typing import Any

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, ResourceValidationPolicy, Severity

from core.tpu import resolve_slice

from .properties import _l, _m, _on, unseen
from .resources import CLUSTER, NODE_POOL, Report, _guarded_resource, _machine


def _tpu_pool(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != NODE_POOL:
        return
    node = _m(props.get("nodeConfig"))
    found = _machine(node.get("machineType"))
    if found is None:
        return
    version, machine = found
    placement = _m(props.get("placementPolicy"))
    topology = placement.get("tpuTopology") or _m(node.get("labels")).get("cloud.google.com/gke-tpu-topology")
    topology = topology or machine.single_host_topology
    if topology not in machine.topologies:
        report(
            f"{machine.name} cannot form topology {topology}; valid: {', '.join(machine.topologies)}. "
            "Fix tpu-rl:tpu.topology."
        )
        return
    shape = resolve_slice(version, machine.name, topology)
    if shape.multi_host:
        if placement.get("type") != "COMPACT" or placement.get("tpuTopology") != topology:
            report(f"multi-host slice {topology} needs placementPolicy {{type: COMPACT, tpuTopology: {topology}}}")
    elif placement.get("tpuTopology"):
        report("a single-host TPU pool must not set placementPolicy.tpuTopology (GKE rejects it)")
    zones = _l(props.get("nodeLocations"))
    if len(zones) != 1:
        report(f"a TPU slice lives in exactly one zone; nodeLocations has {len(zones)}: set gcp:zone")
    autoscaling = props.get("autoscaling")
    reservation = _m(node.get("reservationAffinity"))
    affinity = reservation.get("consumeReservationType", "UNSPECIFIED")
    preemptible = bool(node.get("spot") or node.get("flexStart"))
    if autoscaling:
        autoscaling = _m(autoscaling)
        top = autoscaling.get("maxNodeCount", autoscaling.get("totalMaxNodeCount"))
        if top != shape.hosts:
            report(f"autoscaling max {top} must be one whole slice ({shape.hosts} hosts for {topology})")
        if autoscaling.get("minNodeCount", 0) not in (0, shape.hosts):
            report(f"autoscaling min must be 0 or {shape.hosts}: a partial slice cannot run")
        if affinity == "SPECIFIC_RESERVATION":
            report("an autoscaled pool must not consume a specific reservation; use capacity reservation (static)")
    else:
        if props.get("nodeCount") != shape.hosts:
            report(f"nodeCount {props.get('nodeCount')} must equal the slice's {shape.hosts} hosts")
        if affinity != "SPECIFIC_RESERVATION" or not reservation.get("values"):
            report("a static TPU pool (capacity reservation) needs a SPECIFIC_RESERVATION affinity with the name")
    if preemptible and affinity not in ("NO_RESERVATION", "UNSPECIFIED"):
        report("spot and flex-start capacity cannot consume a reservation: set reservationAffinity NO_RESERVATION")


tpu_node_pool_shape = ResourceValidationPolicy(
    name="tpu-node-pool-shape",
    description="TPU pools form a valid slice: topology, node count, COMPACT placement, one zone, capacity mode.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Fix tpu-rl:tpu (machineType, topology, capacity, reservation).",
    validate=_guarded_resource(_tpu_pool),
)


# ---------------------------------------------------------------------------------------------
# Cluster


METADATA_MODE = "GKE_METADATA"
"""The node metadata mode of Workload Identity: pods get their Kubernetes service account's Google identity from
the GKE metadata server, never the node's (GKE ``WorkloadMetadataConfig``)."""


def _control_plane(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type == NODE_POOL:
        mode = _m(_m(props.get("nodeConfig")).get("workloadMetadataConfig")).get("mode")
        if mode != METADATA_MODE:  # an unknown mode is noted and equal or unequal to nothing: no finding
            report(
                f"node pool metadata mode {mode or '(unset)'}: pods could read the node's own credentials from the "
                f"metadata server; set nodeConfig.workloadMetadataConfig.mode {METADATA_MODE}"
            )
        pool_node = _m(props.get("nodeConfig"))
        _nodes(pool_node, f"node pool {props.get('name') or args.name}'s nodes", report)
        if _readonly_port_open(
            _m(pool_node.get("kubeletConfig")).get("insecureKubeletReadonlyPortEnabled"), required=True
        ):
            report(
                f"node pool {props.get('name') or args.name} opens {READONLY_PORT}: set "
                "nodeConfig.kubeletConfig.insecureKubeletReadonlyPortEnabled FALSE"
            )
        return
    if args.resource_type != CLUSTER:
        return
    node = props.get("nodeConfig")
    mode = _m(_m(node).get("workloadMetadataConfig")).get("mode")
    if not unseen(mode) and mode not in (None, METADATA_MODE):
        report(f"the cluster's default node metadata mode is {mode}; set it {METADATA_MODE} or leave it unset")
    if _on(props.get("enableLegacyAbac")):
        report("legacy ABAC grants every service account broad access to the API: set enableLegacyAbac false")
    if not _m(props.get("privateClusterConfig")).get("enablePrivateNodes"):
        report("nodes must be private (privateClusterConfig.enablePrivateNodes); egress goes through Cloud NAT")
    if not _m(props.get("workloadIdentityConfig")).get("workloadPool"):
        report("Workload Identity must be enabled (workloadIdentityConfig.workloadPool = PROJECT.svc.id.goog)")
    if not unseen(props.get("enableShieldedNodes")) and props.get("enableShieldedNodes") is False:
        report("shielded nodes must be enabled (enableShieldedNodes: true)")
    _cluster_access(props, node, report)


def _cluster_access(props: dict[str, Any], node: Any, report: Report) -> None:
    """Who reaches the cluster's nodes and API without IAM: a client certificate, basic authentication, the Compute
    Engine default account on the default nodes, the kubelet's read-only port."""
    auth = _m(props.get("masterAuth"))
    if _on(_m(auth.get("clientCertificateConfig")).get("issueClientCertificate")):
        report(
            "the cluster issues a client certificate (masterAuth.clientCertificateConfig.issueClientCertificate): a "
            "credential no IAM revokes; set it false"
        )
    if any(not unseen(auth.get(key)) and auth.get(key) not in (None, "") for key in ("username", "password")):
        report("masterAuth sets basic authentication (a static password to the API server): remove it")
    _nodes(node, "the cluster's default nodes", report)
    defaults = _m(_m(props.get("nodePoolDefaults")).get("nodeConfigDefaults"))
    for where, value in (
        ("nodePoolDefaults.nodeConfigDefaults", defaults.get("insecureKubeletReadonlyPortEnabled")),
        ("nodeConfig.kubeletConfig", _m(_m(node).get("kubeletConfig")).get("insecureKubeletReadonlyPortEnabled")),
    ):
        if _readonly_port_open(value):
            report(f"the cluster's {where} opens {READONLY_PORT}: set insecureKubeletReadonlyPortEnabled FALSE")


READONLY_PORT = "the kubelet's unauthenticated read-only port 10255 (pods, their specs and env)"
COMPUTE_DEFAULT = re.compile(r"(?i)\s*([0-9]+-compute@developer\.gserviceaccount\.com|default)\s*")
"""The Compute Engine default service account (Editor on the project in most projects), by email or as ``default``."""


def _readonly_port_open(value: Any, *, required: bool = False) -> bool:
    """Whether a kubelet read-only port setting opens it: ``TRUE`` in any spelling, or anything but ``FALSE`` where the
    program sets it (``required``); one not known yet is noted, not judged."""
    if unseen(value):
        return False
    if value is None:
        return required
    return str(value).strip().upper() != "FALSE"


def _nodes(node: Any, what: str, report: Report) -> None:
    """Nodes run as one of the stack's own accounts (which one, ``stack-principals`` judges): never the Compute Engine
    default account, which an unset ``serviceAccount`` means. An account not known yet is not judged here."""
    if node is None or unseen(node):
        return
    account = _m(node).get("serviceAccount")
    if account is None or isinstance(account, str) and COMPUTE_DEFAULT.fullmatch(account):
        report(
            f"{what} run as the Compute Engine default account ({account or 'serviceAccount unset'}), usually Editor "
            "on the project: set nodeConfig.serviceAccount to the stack's node account"
        )


gke_control_plane = ResourceValidationPolicy(
    name="gke-private-cluster",
    description=(
        "GKE clusters have private nodes, Workload Identity and shielded nodes, no legacy ABAC; node pools use the GKE "
        "metadata server."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the cluster settings of infra/gcp/gke_spec.py.",
    validate=_guarded_resource(_control_plane),
)
