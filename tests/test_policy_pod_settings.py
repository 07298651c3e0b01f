"""``least-privilege-pods`` on what no step sets in a pod (``workloads._pod_settings``): each field that moves the pod
past the scheduler, the cluster's DNS or its own process namespace is named with why and the fix; a DNS policy, a
profile (field or legacy annotation) and a host port are judged on their value; a value the engine does not know yet
is noted, not judged. And the Pathways head keeps the host network only in a JobSet whose workers ask for TPU chips
as a quantity (``_least_privilege_pods``): a malformed request exempts no pod."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from policy.tpu_rl_policies.pods import Pod
from policy.tpu_rl_policies.properties import Unseen
from policy.tpu_rl_policies.resources import JOBSET
from policy.tpu_rl_policies.workloads import _least_privilege_pods, _pod_settings
from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

WHERE = "spec.template"
HOST_PORT = "reachable past the cluster's network policies; remove hostPort"


def found(spec: dict[str, Any], metadata: dict[str, Any] | None = None) -> list[str | None]:
    report = Reports()
    _pod_settings(Pod(WHERE, spec, metadata or {}), report)
    assert all(urn is None for _, urn in report.calls)  # on the resource judged
    return [message for message, _ in report.calls]


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("nodeName", "n1", "is bound to a node past the scheduler and Kueue's quota"),
        (
            "priorityClassName",
            "system-node-critical",
            "takes a priority class (system-* ones preempt the cluster's own pods)",
        ),
        ("priority", 1000, "sets a priority of its own"),
        (
            "hostAliases",
            [{"ip": "10.0.0.1", "hostnames": ["huggingface.co"]}],
            "maps host names to addresses of its own (the Hub's or Cloud Storage's to another server)",
        ),
        ("dnsConfig", {"nameservers": ["8.8.8.8"]}, "names resolvers or search domains of its own"),
        (
            "shareProcessNamespace",
            True,
            "shares one process namespace across its containers (each reads the others' env)",
        ),
    ],
    ids=["node-name", "priority-class", "priority", "host-aliases", "dns-config", "share-process-namespace"],
)
def test_a_field_no_step_sets_is_named_with_why_and_the_fix(key, value, why):
    assert found({key: value}) == [f"pod {WHERE} {why} ({key}): no step sets it; remove it"]


@pytest.mark.parametrize("value", [None, False, "", [], {}], ids=["none", "false", "empty-text", "empty-list", "empty"])
def test_a_field_set_to_nothing_passes(value):
    assert found({"nodeName": value, "priority": value, "shareProcessNamespace": value}) == []


def test_a_field_not_known_yet_is_not_judged():
    assert found({"nodeName": Unseen("spec.template.spec.nodeName"), "priority": Unseen("priority")}) == []


@pytest.mark.parametrize(
    ("dns", "expected"),
    [
        (
            "Default",
            [f"pod {WHERE} sets dnsPolicy Default: its names resolve outside the cluster's DNS; use ClusterFirst"],
        ),
        ("ClusterFirst", []),
        ("ClusterFirstWithHostNet", []),
        (Unseen("spec.template.spec.dnsPolicy"), []),
    ],
    ids=["default", "cluster-first", "cluster-first-host-net", "not-known-yet"],
)
def test_a_dns_policy_is_the_clusters_dns(dns, expected):
    assert found({"dnsPolicy": dns}) == expected


def test_a_pod_seccomp_profile_is_named_on_the_pod():
    assert found({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}) == [
        f"pod {WHERE} sets the seccomp profile Unconfined: set seccompProfile.type RuntimeDefault, or leave it unset"
    ]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "container.apparmor.security.beta.kubernetes.io/main",
            "unconfined",
            [
                f"pod {WHERE} annotation container.apparmor.security.beta.kubernetes.io/main sets the profile "
                "unconfined: remove it, or set runtime/default"
            ],
        ),
        (
            "seccomp.security.alpha.kubernetes.io/pod",
            "localhost/x",
            [
                f"pod {WHERE} annotation seccomp.security.alpha.kubernetes.io/pod sets the profile localhost/x: remove "
                "it, or set runtime/default"
            ],
        ),
        ("seccomp.security.alpha.kubernetes.io/pod", "runtime/default", []),
        ("seccomp.security.alpha.kubernetes.io/pod", "docker/default", []),
        ("seccomp.security.alpha.kubernetes.io/pod", Unseen("metadata.annotations"), []),
        ("example.com/note", "unconfined", []),
        ("example.com/note", "runtime/default", []),
    ],
    ids=[
        "apparmor-unconfined",
        "seccomp-localhost",
        "runtime-default",
        "docker-default",
        "not-known-yet",
        "other-annotation",
        "other-annotation-default",
    ],
)
def test_a_profile_annotation_is_the_runtimes_default(key, value, expected):
    assert found({}, {"annotations": {key: value}}) == expected


def test_annotations_are_read_from_the_pod_metadata_only():
    profile = {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
    assert found({}, {"labels": profile}) == []


def ports(host_network: Any, *pairs: tuple[Any, Any]) -> dict[str, Any]:
    listed = [{"hostPort": host, "containerPort": container} for host, container in pairs]
    return {"hostNetwork": host_network, "containers": [{"name": "main", "ports": listed}]}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ports(True, (8471, 8471)), []),
        (
            ports(True, (8471, 8472)),
            [f"pod {WHERE}: container main opens host port 8471: a port of the node, {HOST_PORT}"],
        ),
        (
            ports(False, (8471, 8471)),
            [f"pod {WHERE}: container main opens host port 8471: a port of the node, {HOST_PORT}"],
        ),
        (ports(None, (80, 80)), [f"pod {WHERE}: container main opens host port 80: a port of the node, {HOST_PORT}"]),
        (ports(True, (None, 8471), (0, 8471)), []),
    ],
    ids=["host-network-same-port", "host-network-other-port", "no-host-network", "host-network-unset", "no-host-port"],
)
def test_a_host_port_is_the_host_networks_own_container_port_only(spec, expected):
    assert found(spec) == expected


def jobset(tpu_chips: Any) -> dict[str, Any]:
    def job(name: str, pod: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "template": {"spec": {"template": {"spec": pod}}}}

    worker = {
        "hostNetwork": True,
        "containers": [{"name": "w", "resources": {"limits": {"google.com/tpu": tpu_chips}}}],
    }
    head = {"hostNetwork": True, "containers": [{"name": "h"}]}
    spec = {"coordinator": {"replicatedJob": "head"}, "replicatedJobs": [job("head", head), job("worker", worker)]}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "train"}, "spec": spec}


def least_privilege(props: dict[str, Any]) -> list[str | None]:
    report = Reports()
    urn = "urn:pulumi:dev::tpu-rl::kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::train"
    _least_privilege_pods(ResourceValidationArgs(JOBSET, props, urn, "train", OPTIONS, None), props, report)
    assert all(urn is None for _, urn in report.calls)  # on the resource judged
    return [message for message, _ in report.calls]


@pytest.mark.parametrize(
    ("chips", "expected"),
    [
        ("4", []),
        (
            "four",
            [
                "pod head uses the node's network (hostNetwork: true): only the Pathways head and the TPU workers do",
                "pod worker uses the node's network (hostNetwork: true): only the Pathways head and the TPU workers do",
            ],
        ),
    ],
    ids=["tpu-workers", "malformed-chips"],
)
def test_the_pathways_head_keeps_the_host_network_only_beside_workers_that_ask_for_chips(chips, expected):
    assert least_privilege(jobset(chips)) == expected
