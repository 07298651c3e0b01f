"""Who can reach the stack over the network: the control plane's authorized networks cover a small share of the
public internet and the control plane has no other open door (``no-open-control-plane``); no Service opens its pods
beyond the cluster and no firewall rule admits the internet (``no-exposed-services``)."""

from __future__ import annotations

import ipaddress
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from core.printed_commands import ANY_STACK, pulumi_config_set

from .pods import kind_of
from .properties import _config, _l, _m, _on, unseen
from .resources import CLUSTER, Report, _guarded_resource

# Ranges that are not public IPv4 (RFC 6890 special-purpose blocks): authorizing them opens nothing to
# the internet, so they do not count towards the public share.
NON_PUBLIC = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/3",
    )
)
PUBLIC_ADDRESSES = 2**32 - sum(n.num_addresses for n in ipaddress.collapse_addresses(NON_PUBLIC))


def parse_cidr(text: Any) -> ipaddress.IPv4Network | None:
    """Any CIDR spelling GKE might take (``a.b.c.d/n``, ``/00``, netmask form, host bits set), normalised."""
    value = str(text).strip()
    address, sep, prefix = value.partition("/")
    if not sep:
        prefix = "32"
    if prefix.isascii() and prefix.isdigit():
        prefix = str(int(prefix))
    try:
        network = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    except ValueError:
        return None
    return network if isinstance(network, ipaddress.IPv4Network) else None


def public_share(networks: list[ipaddress.IPv4Network]) -> float:
    """The share of the public IPv4 space the networks cover together (overlaps counted once)."""
    covered = 0
    for network in ipaddress.collapse_addresses(networks):
        # Two CIDR blocks are either disjoint or one contains the other.
        inside = [p if p.subnet_of(network) else network for p in NON_PUBLIC if p.overlaps(network)]
        private = sum(n.num_addresses for n in ipaddress.collapse_addresses(inside))
        covered += network.num_addresses - private
    return covered / PUBLIC_ADDRESSES


def _endpoint(props: dict[str, Any]) -> str | None:
    """Why the control plane is open beyond the authorized networks (None: it is not): a public endpoint with no
    authorized networks takes any address; the DNS endpoint with external traffic bypasses them."""
    private = _m(props.get("privateClusterConfig")).get("enablePrivateEndpoint")
    config = props.get("masterAuthorizedNetworksConfig")
    blocks = _m(config).get("cidrBlocks")
    if not unseen(private) and private is not True and not unseen(config) and not unseen(blocks) and not blocks:
        shown = "has no masterAuthorizedNetworksConfig" if config is None else "authorizes no network (no cidrBlocks)"
        return (
            f"the control plane's public endpoint {shown}: any address on the internet reaches the API server; set "
            "tpu-rl:authorizedNetworks to the networks you deploy from"
        )
    dns = _m(_m(props.get("controlPlaneEndpointsConfig")).get("dnsEndpointConfig"))
    if _on(dns.get("allowExternalTraffic")):
        return (
            "the control plane's DNS endpoint allows external traffic (controlPlaneEndpointsConfig.dnsEndpointConfig."
            "allowExternalTraffic), which no authorized network limits: set it false"
        )
    return None


def _open_control_plane(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != CLUSTER:
        return
    config = _m(props.get("masterAuthorizedNetworksConfig"))
    endpoint = _endpoint(props)
    if endpoint:
        report(endpoint)
    policy_config = _config(args)
    widest = int(policy_config["minPrefixLength"])
    max_share = float(policy_config["maxPublicShare"])
    fix = "set tpu-rl:authorizedNetworks to the networks you deploy from"
    networks = []
    for block in _l(config.get("cidrBlocks")):
        text = _m(block).get("cidrBlock")
        network = parse_cidr(text)
        if network is None:
            report(f"authorized network {text!r} is not an IPv4 CIDR this policy can judge; {fix}")
            continue
        networks.append(network)
        if network.prefixlen < widest and public_share([network]) > 0:
            report(f"authorized network {text} ({network}) is wider than /{widest}; {fix}")
    share = public_share(networks)
    if share > max_share:
        report(
            f"the authorized networks together cover {share:.4%} of the public IPv4 space (at most "
            f"{max_share:.4%} allowed); the control plane is open to the internet: {fix}"
        )
    if config.get("gcpPublicCidrsAccessEnabled"):
        report("gcpPublicCidrsAccessEnabled lets any Google Cloud IP reach the control plane: disable it")


no_open_control_plane = ResourceValidationPolicy(
    name="no-open-control-plane",
    description="The authorized networks of the GKE control plane cover only a small share of the public internet.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=pulumi_config_set(ANY_STACK, "tpu-rl:authorizedNetworks[0]", "<your-CIDR>"),
    config_schema=PolicyConfigSchema(
        properties={
            "minPrefixLength": {"type": "integer", "default": 16},
            "maxPublicShare": {"type": "number", "default": 0.0001},
        }
    ),
    validate=_guarded_resource(_open_control_plane),
)


FIREWALL = "gcp:compute/firewall:Firewall"
INTERNAL_SOURCES = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "35.191.0.0/16", "130.211.0.0/22")
)
"""The sources an ingress rule may admit: the private ranges (RFC 1918) and Google Cloud's load-balancer health checks
(``35.191.0.0/16``, ``130.211.0.0/22``). tpu-rl's own rule admits the subnet's node and pod ranges."""


def _firewall(props: dict[str, Any], name: Any, report: Report) -> None:
    """An ingress rule that allows traffic admits only internal sources: every ``sourceRanges`` entry inside
    ``INTERNAL_SOURCES``; with no ranges, tags or accounts, Google Cloud admits ``0.0.0.0/0``."""
    direction = props.get("direction")
    if unseen(direction) or str(direction or "INGRESS").upper() != "INGRESS" or not _l(props.get("allows")):
        return
    ranges = props.get("sourceRanges")
    if unseen(ranges):
        return
    sources = [str(r) for r in _l(ranges)]
    if not sources and not _l(props.get("sourceTags")) and not _l(props.get("sourceServiceAccounts")):
        sources = ["0.0.0.0/0 (no source named)"]
    for text in sources:
        try:
            network = ipaddress.ip_network(text.strip(), strict=False)
        except ValueError:
            network = None
        if network is None or not any(
            network.version == inside.version and network.subnet_of(inside)  # type: ignore[arg-type]
            for inside in INTERNAL_SOURCES
        ):
            report(
                f"firewall rule {name} allows ingress from {text}, outside the private ranges and Google's health "
                "checks: it opens the VPC's nodes to the internet; admit only the subnet's ranges"
            )


def _services(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type == FIREWALL:
        _firewall(props, props.get("name") or args.name, report)
        return
    if kind_of(args.resource_type) != "Service":
        return
    spec = _m(props.get("spec"))
    name = _m(props.get("metadata")).get("name") or args.name
    kind = spec.get("type")
    if kind in ("LoadBalancer", "NodePort"):
        report(
            f"Service {name} of type {kind} opens its pods beyond the cluster (the Pathways proxy, a step's port): "
            "use a ClusterIP Service"
        )
    if _l(spec.get("externalIPs")):
        report(f"Service {name} sets externalIPs: its pods answer on addresses outside the cluster; remove them")


no_exposed_services = ResourceValidationPolicy(
    name="no-exposed-services",
    description=(
        "No Service of type LoadBalancer or NodePort, and none with externalIPs; no firewall rule admits ingress from "
        "outside the private ranges."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Use ClusterIP Services; reach the cluster from tpu-rl:authorizedNetworks; admit only the subnet's ranges in "
        "firewall rules (infra/gcp/network.py)."
    ),
    validate=_guarded_resource(_services),
)
