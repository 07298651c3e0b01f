"""What the program's pods can reach beyond their work: a Kubernetes API token only where an API use is bound (the
training head, which reads its namespace's pods by its Role), and from the evaluation, of the node's link-local range,
only the GKE metadata server's and the DNS cache's ports. Over every plan the registration pin covers
(``tests/example_stacks.py`` ``STACKS``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from infra.k8s.manifests import EVALUATION_EGRESS, METADATA_SERVER, NODE_LOCAL_DNS, POD_READER_RULES
from tests.conftest import JOBSET, one, plan_of
from tests.example_stacks import STACKS
from workloads.specs.step_manifests import HEAD_JOB

pytestmark = pytest.mark.program

SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def pod_templates(plan: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(step, replicated Job, pod spec) of every pod template the plan's JobSets carry."""
    for resource in plan.find(JOBSET):
        step = resource["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"]
        for job in resource["inputs"]["spec"]["replicatedJobs"]:
            yield step, job["name"], job["template"]["spec"]["template"]["spec"]


def mounts_token(pod: Mapping[str, Any], accounts: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the kubelet mounts an API token in ``pod``: the pod's ``automountServiceAccountToken`` if it sets one,
    else its account's (``default`` when it names none), and a token when neither says no (Kubernetes' default)."""
    if "automountServiceAccountToken" in pod:
        return pod["automountServiceAccountToken"] is not False
    account = accounts.get(pod.get("serviceAccountName") or "default", {})
    return account.get("automountServiceAccountToken") is not False


def accounts_of(plan: Any) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["metadata"]["name"]: r["inputs"] for r in plan.find(SERVICE_ACCOUNT)}


def pod_readers(plan: Any) -> set[str]:
    """The service accounts a RoleBinding of the plan binds to a Role that only reads pods (``POD_READER_RULES``)."""
    roles = {r["inputs"]["metadata"]["name"]: r["inputs"]["rules"] for r in plan.find(ROLE)}
    return {
        subject["name"]
        for binding in plan.find(ROLE_BINDING)
        if binding["inputs"]["roleRef"]["kind"] == "Role"
        and roles.get(binding["inputs"]["roleRef"]["name"]) == POD_READER_RULES
        for subject in binding["inputs"]["subjects"]
        if subject["kind"] == "ServiceAccount"
    }


@pytest.mark.parametrize("variant", STACKS)
def test_only_the_training_head_mounts_an_api_token_and_its_account_reads_pods_only(variant):
    plan = plan_of(*STACKS[variant])
    accounts, readers = accounts_of(plan), pod_readers(plan)
    mounting = {(step, job) for step, job, pod in pod_templates(plan) if mounts_token(pod, accounts)}
    assert mounting == {("train", HEAD_JOB)}, "a token only where an API use is bound"
    for step, job, pod in pod_templates(plan):
        account = pod.get("serviceAccountName")
        if (step, job) == ("train", HEAD_JOB):
            assert account in accounts and account in readers, "the head's own account, bound to read pods"
        elif account is None:
            assert pod["automountServiceAccountToken"] is False, f"{step}/{job}: default's token refused on the pod"
        else:
            assert accounts[account]["automountServiceAccountToken"] is False, f"{step}/{job}: its own KSA says no"


@pytest.mark.parametrize(
    ("pod", "accounts", "mounted"),
    [
        ({}, {}, True),
        ({"automountServiceAccountToken": False}, {}, False),
        ({"serviceAccountName": "x"}, {"x": {"automountServiceAccountToken": False}}, False),
        ({"serviceAccountName": "x"}, {"x": {}}, True),
        (
            {"serviceAccountName": "x", "automountServiceAccountToken": True},
            {"x": {"automountServiceAccountToken": False}},
            True,
        ),
        ({"serviceAccountName": "undeclared"}, {}, True),
    ],
    ids=["default", "pod-says-no", "account-says-no", "account-silent", "pod-overrides-account", "undeclared"],
)
def test_the_token_reading_follows_kubernetes(pod, accounts, mounted):
    """The check itself: the pod's setting wins over its account's, and silence mounts a token."""
    assert mounts_token(pod, accounts) is mounted


# ---------------------------------------------------------------------------------------------
# The evaluation's egress


def allows(egress: list[dict[str, Any]], address: str, protocol: str, port: int) -> bool:
    """Whether a NetworkPolicy's egress rules let a pod reach ``address`` on ``protocol``/``port`` (Kubernetes: any rule
    whose peers and ports both match; a rule without ports allows every port; only ``ipBlock`` peers name addresses)."""
    ip = ipaddress.ip_address(address)
    for rule in egress:
        ports = rule.get("ports")
        if ports is not None and not any(p.get("protocol", "TCP") == protocol and p["port"] == port for p in ports):
            continue
        for peer in rule.get("to", []):
            block = peer.get("ipBlock")
            if block is None:
                continue
            inside = ip in ipaddress.ip_network(block["cidr"])
            if inside and not any(ip in ipaddress.ip_network(cidr) for cidr in block.get("except", [])):
                return True
    return False


REACHABLE = [("169.254.169.254", "TCP", 80), ("169.254.169.252", "TCP", 988), ("169.254.20.10", "UDP", 53)]
REACHABLE += [("169.254.20.10", "TCP", 53), ("142.250.1.128", "TCP", 443)]
UNREACHABLE = [
    ("169.254.169.254", "TCP", 81),
    ("169.254.169.254", "TCP", 443),
    ("169.254.169.254", "UDP", 80),
    ("169.254.169.254", "TCP", 988),
    ("169.254.169.252", "TCP", 80),
    ("169.254.169.253", "TCP", 80),
    ("169.254.20.10", "TCP", 80),
    ("169.254.20.11", "UDP", 53),
    ("169.254.0.1", "TCP", 443),
    ("10.0.0.10", "TCP", 443),
    ("142.250.1.128", "TCP", 80),
]


def test_the_evaluation_reaches_the_link_local_range_only_on_the_ports_it_uses():
    plan = plan_of("prod", "tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true")
    egress = one(plan, NETWORK_POLICY, "network-policy-evaluation-egress")["inputs"]["spec"]["egress"]
    assert egress == EVALUATION_EGRESS
    assert [p for p in REACHABLE if not allows(egress, *p)] == []
    assert [p for p in UNREACHABLE if allows(egress, *p)] == []
    assert all(rule.get("ports") for rule in egress), "no rule opens every port"
    link_local = ipaddress.ip_network("169.254.0.0/16")
    blocks = [peer["ipBlock"] for rule in egress for peer in rule["to"] if "ipBlock" in peer]
    named = {str(ipaddress.ip_network(b["cidr"]).network_address) for b in blocks if b["cidr"] != "0.0.0.0/0"}
    assert named == {*METADATA_SERVER, *NODE_LOCAL_DNS}
    assert all(ipaddress.ip_network(b["cidr"]).prefixlen == 32 for b in blocks if b["cidr"] != "0.0.0.0/0")
    assert all(ipaddress.ip_address(a) in link_local for a in named)


def test_the_reachability_check_sees_an_open_range():
    """The check itself: the rule the evaluation used to have (the whole link-local range, any port) reaches every
    port of the metadata server."""
    wide = [{"to": [{"ipBlock": {"cidr": "169.254.0.0/16"}}]}]
    assert allows(wide, "169.254.169.254", "TCP", 443) and allows(wide, "169.254.0.1", "UDP", 9)
    assert not allows(
        [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16"]}}]}], "169.254.0.1", "TCP", 1
    )
