"""``no-open-control-plane`` on the doors a GKE control plane has besides its authorized networks, judged through
pulumi-policy's own analyzer (``tests/analyzer.py``: the policy config as the engine reconciles it, every schema
default filled in) one cluster at a time:

- a public endpoint (``privateClusterConfig.enablePrivateEndpoint`` not true) with no ``masterAuthorizedNetworksConfig``
  or one that authorizes no network takes any address on the internet; a private endpoint needs none;
- the DNS endpoint with external traffic allowed bypasses the authorized networks;
- the endpoint's privacy, the authorized networks' config or its blocks not known yet are named as not known, never
  read as unset (which would report an open endpoint that the program may well close): at ``pulumi up`` the one
  finding naming the value, at a preview the advisory that it is judged at ``pulumi up``.

Each finding is the exact line an operator reads, mandatory, on the cluster the engine asks about (a resource policy's
finding carries no URN of its own: the engine puts it on that resource)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
CONTROL_PLANE = analyzer.pack_policy("no-open-control-plane")
CLUSTER = "gcp:container/cluster:Cluster"
URN = f"urn:pulumi:prod::tpu-rl::{CLUSTER}::cluster"
DEPLOY_FROM = {"cidrBlocks": [{"cidrBlock": "8.8.8.0/28", "displayName": "office"}]}
"""A public /28: far narrower than /16 and than the share the schema allows."""
PUBLIC = {"enablePrivateEndpoint": False}
UNSET = object()


def cluster(**props: Any) -> analyzer.Resource:
    """The cluster with a public endpoint and one narrow authorized network, ``props`` changed (``UNSET``: left out)."""
    inputs = {"privateClusterConfig": PUBLIC, "masterAuthorizedNetworksConfig": DEPLOY_FROM, **props}
    inputs = {key: value for key, value in inputs.items() if value is not UNSET}
    return analyzer.Resource(CLUSTER, "cluster", URN, inputs)


def judge(resource: analyzer.Resource, preview: bool = False) -> list[analyzer.Finding]:
    return analyzer.Pack({"all": "mandatory"}, dry_run=preview, policies=[CONTROL_PLANE]).analyze(resource)


def found(resource: analyzer.Resource) -> list[str]:
    return analyzer.found_at_up(CONTROL_PLANE, resource)


def open_endpoint(shown: str) -> str:
    return (
        f"the control plane's public endpoint {shown}: any address on the internet reaches the API server; set "
        "tpu-rl:authorizedNetworks to the networks you deploy from"
    )


NO_CONFIG = open_endpoint("has no masterAuthorizedNetworksConfig")
NO_BLOCKS = open_endpoint("authorizes no network (no cidrBlocks)")
DNS = (
    "the control plane's DNS endpoint allows external traffic (controlPlaneEndpointsConfig.dnsEndpointConfig."
    "allowExternalTraffic), which no authorized network limits: set it false"
)


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, []),
        ({"masterAuthorizedNetworksConfig": UNSET}, [NO_CONFIG]),
        ({"masterAuthorizedNetworksConfig": None}, [NO_CONFIG]),
        ({"masterAuthorizedNetworksConfig": {}}, [NO_BLOCKS]),
        ({"masterAuthorizedNetworksConfig": {"cidrBlocks": []}}, [NO_BLOCKS]),
        ({"masterAuthorizedNetworksConfig": {"cidrBlocks": None}}, [NO_BLOCKS]),
        ({"privateClusterConfig": UNSET, "masterAuthorizedNetworksConfig": UNSET}, [NO_CONFIG]),
        ({"privateClusterConfig": {}, "masterAuthorizedNetworksConfig": {}}, [NO_BLOCKS]),
        ({"privateClusterConfig": {"enablePrivateEndpoint": True}, "masterAuthorizedNetworksConfig": UNSET}, []),
        ({"privateClusterConfig": {"enablePrivateEndpoint": True}, "masterAuthorizedNetworksConfig": {}}, []),
    ],
    ids=[
        "narrow-network",
        "no-config",
        "config-null",
        "config-empty",
        "no-blocks",
        "blocks-null",
        "no-private-config-no-config",
        "private-endpoint-unset-no-blocks",
        "private-endpoint-no-config",
        "private-endpoint-no-blocks",
    ],
)
def test_a_public_endpoint_needs_an_authorized_network(props, expected):
    """A public endpoint (private endpoint unset or false) with no authorized networks config, or one with no block,
    is open to the internet, each said in its own words; a private endpoint needs none."""
    assert found(cluster(**props)) == expected


@pytest.mark.parametrize(
    ("dns", "expected"),
    [
        ({"allowExternalTraffic": True}, [DNS]),
        ({"allowExternalTraffic": "yes"}, [DNS]),
        ({"allowExternalTraffic": False}, []),
        ({"allowExternalTraffic": None}, []),
        ({}, []),
    ],
    ids=["allowed", "malformed", "false", "null", "unset"],
)
def test_the_dns_endpoint_takes_no_external_traffic(dns, expected):
    """The DNS endpoint with external traffic allowed (set to anything but false) is a door the authorized networks
    do not guard, refused even where they are narrow."""
    assert found(cluster(controlPlaneEndpointsConfig={"dnsEndpointConfig": dns})) == expected


def test_the_open_endpoint_is_named_before_the_dns_endpoint():
    resource = cluster(
        masterAuthorizedNetworksConfig=UNSET,
        controlPlaneEndpointsConfig={"dnsEndpointConfig": {"allowExternalTraffic": True}},
    )
    assert found(resource) == [NO_CONFIG]


UNKNOWN_CASES = [
    # (id, the cluster's props, the one value not known)
    (
        "private-endpoint",
        {"privateClusterConfig": {"enablePrivateEndpoint": Unknown()}, "masterAuthorizedNetworksConfig": UNSET},
        ".privateClusterConfig.enablePrivateEndpoint",
    ),
    ("authorized-networks", {"masterAuthorizedNetworksConfig": Unknown()}, ".masterAuthorizedNetworksConfig"),
    (
        "cidr-blocks",
        {"masterAuthorizedNetworksConfig": {"cidrBlocks": Unknown()}},
        ".masterAuthorizedNetworksConfig.cidrBlocks",
    ),
]


@pytest.mark.parametrize(("props", "unknown"), [c[1:] for c in UNKNOWN_CASES], ids=[c[0] for c in UNKNOWN_CASES])
def test_an_endpoint_not_known_at_pulumi_up_is_named_not_judged_open(props, unknown):
    """At ``pulumi up`` the one finding names the value not known; the endpoint is not reported open on a guess."""
    assert found(cluster(**props)) == [
        f"cannot judge {unknown}: not known at `pulumi up`; give it a value the program knows"
    ]


@pytest.mark.parametrize(("props", "unknown"), [c[1:] for c in UNKNOWN_CASES], ids=[c[0] for c in UNKNOWN_CASES])
def test_an_endpoint_not_known_at_a_preview_is_judged_at_pulumi_up(props, unknown):
    """At a preview, the advisory that the value is judged at ``pulumi up``, with no finding withheld: nothing was
    read as unset."""
    resource = cluster(**props)
    (finding,) = judge(resource, preview=True)
    assert (finding.level, finding.unjudged, finding.urn) == ("advisory", True, resource.urn)
    assert finding.message == (
        "can't run policy 'no-open-control-plane' from policy pack 'tpu-rl-guardrails@v0.0.1' during preview: "
        f"{unknown} not known until what they come from exists; judged at `pulumi up`"
    )
