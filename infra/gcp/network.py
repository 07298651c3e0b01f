"""VPC, subnet with pod/service ranges, Cloud NAT for the private nodes, internal firewall."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.pathways import PORTS
from infra.gcp.gke_spec import PODS_CIDR, PODS_RANGE, SERVICES_CIDR, SERVICES_RANGE, SUBNET_CIDR
from infra.options import child_options

FLOW_LOGS = {"aggregation_interval": "INTERVAL_5_SEC", "flow_sampling": 0.5, "metadata": "INCLUDE_ALL_METADATA"}
"""VPC flow logs of the subnet (CIS GCP 3.8): half the flows, Compute Engine's default interval and metadata."""


@dataclass(frozen=True)
class NetworkArgs:
    """What the network component is built from."""

    project: str
    region: str
    """The subnet's region (the cluster's)."""
    network: str
    """The network's, subnet's, router's, NAT's and internal firewall rule's names (``infra.gcp.naming``)."""
    subnet: str
    router: str
    nat: str
    firewall_internal: str


def internal_allows() -> list[dict[str, object]]:
    """What the nodes take from each other beyond GKE's own rules: the Pathways ports (the head and the
    workers listen on their nodes' addresses, ``hostNetwork``) and ICMP (path MTU discovery at MTU 8896).

    GKE creates its own rules for the cluster (``gke-<cluster>-<hash>-vms``: the node range;
    ``-all``: the pod range; ``-master``: the control plane), so this rule narrows nothing GKE opens; it
    names the ports the workflow needs, where the old rule opened every port from the pod range too.
    """
    return [{"protocol": "tcp", "ports": [str(port) for port in PORTS]}, {"protocol": "icmp"}]


class Network(pulumi.ComponentResource):
    """The cluster's network. Private nodes reach Hugging Face and registries through Cloud NAT."""

    network: gcp.compute.Network
    subnet: gcp.compute.Subnetwork

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:gcp:Network", name, None, opts)
        child = child_options(self, opts)
        self.network = gcp.compute.Network(
            "vpc",
            name=args.network,
            project=args.project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            mtu=8896,
            opts=child,
        )
        self.subnet = gcp.compute.Subnetwork(
            "subnet",
            name=args.subnet,
            project=args.project,
            region=args.region,
            network=self.network.id,
            ip_cidr_range=SUBNET_CIDR,
            private_ip_google_access=True,
            log_config=FLOW_LOGS,
            secondary_ip_ranges=[
                {"range_name": PODS_RANGE, "ip_cidr_range": PODS_CIDR},
                {"range_name": SERVICES_RANGE, "ip_cidr_range": SERVICES_CIDR},
            ],
            opts=child,
        )
        router = gcp.compute.Router(
            "router",
            name=args.router,
            project=args.project,
            region=args.region,
            network=self.network.id,
            opts=child,
        )
        gcp.compute.RouterNat(
            "nat",
            name=args.nat,
            project=args.project,
            region=args.region,
            router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config={"enable": True, "filter": "ERRORS_ONLY"},
            opts=child,
        )
        gcp.compute.Firewall(
            "internal",
            name=args.firewall_internal,
            project=args.project,
            network=self.network.id,
            direction="INGRESS",
            source_ranges=[SUBNET_CIDR],
            allows=internal_allows(),
            opts=child,
        )
        self.register_outputs({"network": self.network.id, "subnet": self.subnet.id})
