"""``no-exposed-services`` and ``no-broad-rbac`` naming what they judge, through pulumi-policy's own analyzer
(``tests/analyzer.py``) on resources built by hand: a Service is named by its ``metadata.name`` and a firewall rule by
its ``name``, each by its Pulumi resource name when it has none (the two differ here, so a finding naming the wrong
one fails); every finding is the exact line an operator reads. A ``...List`` of RBAC objects is judged item by item as
the kind its type token names, each finding on the list's URN."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from policy.tpu_rl_policies.network import FIREWALL
from tests import analyzer

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
EXPOSED = analyzer.pack_policy("no-exposed-services")
RBAC_POLICY = analyzer.pack_policy("no-broad-rbac")
SERVICE = "kubernetes:core/v1:Service"
CLUSTER_ROLE_LIST = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleList"
OPEN_PORT = [{"protocol": "tcp", "ports": ["22"]}]


def resource(type_: str, name: str, props: dict[str, Any]) -> analyzer.Resource:
    return analyzer.Resource(type_, name, f"urn:pulumi:dev::tpu-rl::{type_}::{name}", props)


def exposed(r: analyzer.Resource) -> list[str]:
    """The message of each ``no-exposed-services`` finding on ``r``, every one mandatory and judged (the engine shows
    a resource policy's finding on the resource it analysed)."""
    findings = analyzer.Pack({"all": "mandatory"}, policies=[EXPOSED]).analyze(r)
    assert all(f.policy == EXPOSED.name and f.level == "mandatory" and not f.unjudged for f in findings), findings
    return [f.message for f in findings]


def service(name: str, metadata: dict[str, Any], **spec: Any) -> analyzer.Resource:
    return resource(SERVICE, name, {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec})


def opens(name: str, kind: str) -> str:
    return (
        f"Service {name} of type {kind} opens its pods beyond the cluster (the Pathways proxy, a step's port): use a "
        "ClusterIP Service"
    )


def external(name: str) -> str:
    return f"Service {name} sets externalIPs: its pods answer on addresses outside the cluster; remove them"


def admits(name: str, source: str) -> str:
    return (
        f"firewall rule {name} allows ingress from {source}, outside the private ranges and Google's health checks: "
        "it opens the VPC's nodes to the internet; admit only the subnet's ranges"
    )


@pytest.mark.parametrize(
    ("metadata", "spec", "expected"),
    [
        ({"name": "pathways", "namespace": "tpu-rl"}, {"type": "LoadBalancer"}, [opens("pathways", "LoadBalancer")]),
        ({"namespace": "tpu-rl"}, {"type": "NodePort"}, [opens("pathways-svc", "NodePort")]),
        ({"name": "", "namespace": "tpu-rl"}, {"type": "NodePort"}, [opens("pathways-svc", "NodePort")]),
        ({"name": "pathways"}, {"externalIPs": ["203.0.113.7"]}, [external("pathways")]),
        ({}, {"type": "ClusterIP", "externalIPs": ["203.0.113.7"]}, [external("pathways-svc")]),
        (
            {"name": "pathways"},
            {"type": "LoadBalancer", "externalIPs": ["203.0.113.7"]},
            [opens("pathways", "LoadBalancer"), external("pathways")],
        ),
        ({"name": "pathways"}, {"type": "ClusterIP", "externalIPs": []}, []),
    ],
    ids=["named", "unnamed", "empty-name", "external-ips", "unnamed-external-ips", "both", "cluster-ip"],
)
def test_an_exposed_service_is_named_by_its_metadata_or_else_its_resource(metadata, spec, expected):
    """The Kubernetes name is what ``kubectl`` shows; the Pulumi resource name ``pathways-svc`` stands in only for a
    Service whose manifest names none (the provider then auto-names it from that resource name)."""
    assert exposed(service("pathways-svc", metadata, **spec)) == expected


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"name": "tpu-rl-dev-ssh"}, "tpu-rl-dev-ssh"),
        ({}, "ssh-rule"),
        ({"name": ""}, "ssh-rule"),
    ],
    ids=["named", "unnamed", "empty-name"],
)
def test_an_open_firewall_rule_is_named_by_its_name_or_else_its_resource(props, expected):
    """A rule's Google Cloud ``name`` is what the console lists; the resource name ``ssh-rule`` stands in when the
    program leaves the provider to auto-name it."""
    rule = {"direction": "INGRESS", "allows": OPEN_PORT, "sourceRanges": ["0.0.0.0/0"], **props}
    assert exposed(resource(FIREWALL, "ssh-rule", rule)) == [admits(expected, "0.0.0.0/0")]


def test_a_list_of_cluster_roles_is_judged_as_cluster_roles_on_the_lists_urn():
    """The kind of each item is the type token's last segment without ``List``; each finding names the item's role and
    lands on the list, the resource an operator changes."""
    wide = {"metadata": {"name": "wide"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]}
    narrow = {"metadata": {"name": "narrow"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    listed = resource(CLUSTER_ROLE_LIST, "roles", {"items": [narrow, wide]})
    pack = analyzer.Pack({"all": "mandatory"}, policies=[RBAC_POLICY], stack="dev", stack_config={})
    findings = pack.analyze_stack([listed])
    assert [(f.urn, f.level, f.message) for f in findings] == [
        (listed.urn, "mandatory", "ClusterRole wide rule 0 grants every verb ('*'): list what it needs")
    ]
