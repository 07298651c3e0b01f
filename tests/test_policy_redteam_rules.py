"""The rules a red-team run of the pack found open, each an allow-list inside its rule: the control plane and the nodes
(``no-open-control-plane``, ``gke-private-cluster``, ``stack-principals``), firewalls (``no-exposed-services``), the
pods' profiles and fields (``least-privilege-pods``), secret material anywhere in an object
(``no-secrets-in-workloads``), the charts' namespaces and values (``reviewed-helm-charts``), the queue's namespaces
and the steps' controller (``kueue-queue-fits``), the idle cost of kept TPU nodes and the count of kept others
(``tpu-budget``) and RBAC rules that escalate (``no-broad-rbac``).

Each refusal at ``pulumi up`` is a mandatory finding of its rule, and at a preview where the hostile value is unknown
an advisory that names it (judged at ``up``); each has a near miss that passes. Run on the program's own plans
(``tests.conftest.plan_of``, cached) with the stack's policy config and configuration, as the engine sends them."""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from pulumi_policy import ResourceValidationPolicy

from tests import analyzer
from tests.conftest import plan_of
from tools.plan.offline import UNKNOWN, Plan

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
BY_NAME = {p.name: p for p in policies.POLICIES}
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
RELEASE = "kubernetes:helm.sh/v3:Release"
P = "my-tpu-prod-project"
TOKEN = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"

Change = Callable[[list[dict[str, Any]], Callable[[Any], Any]], None]


@functools.cache
def _program(stack: str) -> tuple[dict[str, Any], ...]:
    plan = plan_of(stack)
    return tuple({**r, "inputs": analyzer.inputs(plan, r)} for r in plan.resources)


def judge(stack: str, policy: str, change: Change | None, *, preview: bool) -> list[analyzer.Finding]:
    """The findings of one policy on the stack's plan with ``change`` made (each value it passes through ``v`` is
    unknown at a preview), as the engine sends the plan to the pack."""
    resources = [copy.deepcopy(r) for r in _program(stack)]
    if change is not None:
        change(resources, (lambda value: UNKNOWN) if preview else (lambda value: value))
    plan = Plan(stack=stack, resources=resources, outputs={})
    rule = BY_NAME[policy]
    pack = analyzer.Pack(
        analyzer.policy_config_file(stack),
        dry_run=preview,
        policies=[rule],
        stack=stack,
        stack_config=analyzer.engine_config(stack),
    )
    if isinstance(rule, ResourceValidationPolicy):
        return [f for r in analyzer.resources(plan, preview=preview, stack_view=False) for f in pack.analyze(r)]
    return pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))


@functools.cache
def _baseline(stack: str, policy: str, preview: bool) -> frozenset[tuple[str, str]]:
    return frozenset((f.level, f.message) for f in judge(stack, policy, None, preview=preview))


def new(stack: str, policy: str, change: Change, *, preview: bool = False) -> list[analyzer.Finding]:
    base = _baseline(stack, policy, preview)
    return [f for f in judge(stack, policy, change, preview=preview) if (f.level, f.message) not in base]


def one(resources: list[dict[str, Any]], type_: str, name: str | None = None) -> dict[str, Any]:
    return next(r for r in resources if r["type"] == type_ and name in (None, r["name"]))["inputs"]


def step(resources: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return next(
        r["inputs"]
        for r in resources
        if r["type"] == JOBSET and r["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"] == component
    )


def pod(resources: list[dict[str, Any]], component: str = "convert", job: int = 0) -> dict[str, Any]:
    return step(resources, component)["spec"]["replicatedJobs"][job]["template"]["spec"]["template"]["spec"]


def add(resources: list[dict[str, Any]], type_: str, name: str, inputs: dict[str, Any]) -> None:
    options = {"protect": False, "ignoreChanges": [], "deleteBeforeReplace": False, "customTimeouts": None}
    resources.append({"type": type_, "name": name, "inputs": inputs, "options": {**options, "parent": None}})


def k8s(resources: list[dict[str, Any]], type_: str, name: str, body: dict[str, Any], ns: str = "tpu-rl") -> None:
    group_version, kind = type_.removeprefix("kubernetes:").rsplit(":", 1)
    meta = {"name": name, "namespace": ns}
    add(
        resources,
        type_,
        name,
        {"apiVersion": group_version.removeprefix("core/"), "kind": kind, "metadata": meta, **body},
    )


def firewall(ranges: Any, direction: str = "INGRESS", **more: Any) -> Change:
    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        rule = {"name": "x", "project": P, "network": "vpc-id", "direction": direction, "allows": [{"protocol": "all"}]}
        add(resources, "gcp:compute/firewall:Firewall", "x", {**rule, **more, "sourceRanges": [v(r) for r in ranges]})

    return change


def _set(where: Callable[[list[dict[str, Any]]], dict[str, Any]], key: str, value: Any) -> Change:
    """Sets ``key`` of what ``where`` finds to ``value`` (unknown at a preview)."""

    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        where(resources)[key] = v(value)

    return change


def _role_rule(resources: list[str], verbs: list[str]) -> Change:
    def change(found: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        role = one(found, "kubernetes:rbac.authorization.k8s.io/v1:Role")
        role["rules"].append({"apiGroups": [""], "resources": resources, "verbs": [v(verb) for verb in verbs]})

    return change


def _kueue_config(edit: Callable[[str], str]) -> Change:
    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        config = one(resources, RELEASE, "kueue")["values"]["managerConfig"]
        config["controllerManagerConfigYaml"] = v(edit(config["controllerManagerConfigYaml"]))

    return change


def _cluster(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return one(resources, CLUSTER)


def _private_cluster(key: str) -> Change:
    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        cluster = _cluster(resources)
        cluster.pop("masterAuthorizedNetworksConfig")
        cluster["privateClusterConfig"][key] = v(True)

    return change


def _container(key: str, value: Any) -> Change:
    return _set(lambda r: pod(r)["containers"][0], key, value)


def _pod_context(value: Any) -> Change:
    return _set(lambda r: pod(r)["securityContext"], "seccompProfile", value)


def _template_annotation(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
    step(resources, "convert")["spec"]["replicatedJobs"][0]["template"]["metadata"] = {"annotations": {"n": v(TOKEN)}}


def _config_map(value: str) -> Change:
    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        k8s(resources, "kubernetes:core/v1:ConfigMap", "notes", {"data": {"notes": v(value)}})

    return change


def _secret(type_: str) -> Change:
    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        k8s(resources, "kubernetes:core/v1:Secret", "t", {"type": v(type_), "stringData": {"k": "x"}})

    return change


def _jobset_namespace(namespace: str) -> Change:
    return _set(lambda r: one(r, RELEASE, "jobset"), "namespace", namespace)


def _queue_selector(selector: Any) -> Change:
    return _set(
        lambda r: one(r, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")["spec"], "namespaceSelector", selector
    )


def _managed_by(controller: str) -> Change:
    return _set(lambda r: step(r, "convert")["spec"], "managedBy", controller)


def _min_nodes(count: float) -> Change:
    return _set(lambda r: one(r, NODE_POOL, "tpu-pool-0")["autoscaling"], "minNodeCount", count)


def _static_cpu_pool(count: float) -> Change:
    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        pool = one(resources, NODE_POOL, "cpu-pool")
        pool.pop("autoscaling")
        pool["nodeCount"] = v(count)

    return change


def _kubelet(value: str) -> Change:
    return _set(
        lambda r: one(r, NODE_POOL, "cpu-pool")["nodeConfig"]["kubeletConfig"],
        "insecureKubeletReadonlyPortEnabled",
        value,
    )


def _node_account(email: str) -> Change:
    return _set(lambda r: one(r, NODE_POOL, "tpu-pool-0")["nodeConfig"], "serviceAccount", email)


def _pod(key: str, value: Any) -> Change:
    return _set(pod, key, value)


def _probe(key: str, words: list[str]) -> Change:
    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        hook = {"exec": {"command": [v(w) for w in words]}}
        pod(resources)["containers"][0][key] = {"postStart": hook} if key == "lifecycle" else hook

    return change


COMPUTE = "123456789012-compute@developer.gserviceaccount.com"
REFUSED: list[tuple[str, str, str, Change, str]] = [
    # (case, stack, policy, change, words of the finding)
    (
        "no-authorized-networks",
        "prod",
        "no-open-control-plane",
        lambda r, v: _cluster(r).__setitem__("masterAuthorizedNetworksConfig", v(None)),
        "has no masterAuthorizedNetworks",
    ),
    (
        "no-cidr-blocks",
        "prod",
        "no-open-control-plane",
        lambda r, v: _cluster(r).__setitem__("masterAuthorizedNetworksConfig", {"cidrBlocks": v([])}),
        "authorizes no network",
    ),
    (
        "dns-endpoint-external",
        "prod",
        "no-open-control-plane",
        lambda r, v: _cluster(r).__setitem__(
            "controlPlaneEndpointsConfig", {"dnsEndpointConfig": {"allowExternalTraffic": v(True)}}
        ),
        "DNS endpoint",
    ),
    (
        "client-certificate",
        "prod",
        "gke-private-cluster",
        lambda r, v: _cluster(r).__setitem__(
            "masterAuth", {"clientCertificateConfig": {"issueClientCertificate": v(True)}}
        ),
        "issues a client certificate",
    ),
    ("kubelet-read-only-port", "prod", "gke-private-cluster", _kubelet("TRUE"), "read-only port 10255"),
    ("kubelet-read-only-port-any-case", "prod", "gke-private-cluster", _kubelet(" true"), "read-only port 10255"),
    ("node-pool-compute-default", "prod", "stack-principals", _node_account(COMPUTE), "not one of this stack's node"),
    (
        "node-pool-not-a-node-account",
        "prod",
        "stack-principals",
        _node_account(f"tpu-rl-prod-convert@{P}.iam.gserviceaccount.com"),
        "not one of this stack's node accounts",
    ),
    (
        "node-pool-other-project",
        "prod",
        "stack-principals",
        _node_account("tpu-rl-prod-tpu-np@evil.iam.gserviceaccount.com"),
        "not one of this stack's node accounts",
    ),
    ("firewall-internet", "prod", "no-exposed-services", firewall(["0.0.0.0/0"]), "allows ingress from 0.0.0.0/0"),
    ("firewall-just-outside-rfc1918", "prod", "no-exposed-services", firewall(["172.32.0.0/16"]), "172.32.0.0/16"),
    ("firewall-wider-than-rfc1918", "prod", "no-exposed-services", firewall(["10.0.0.0/7"]), "10.0.0.0/7"),
    ("firewall-ipv6", "prod", "no-exposed-services", firewall(["::/0"]), "::/0"),
    ("rbac-create-pods", "prod", "no-broad-rbac", _role_rule(["pods"], ["create"]), "on pods: a pod it creates"),
    ("rbac-exec", "prod", "no-broad-rbac", _role_rule(["pods/exec"], ["get"]), "on pods/exec"),
    ("rbac-secrets", "prod", "no-broad-rbac", _role_rule(["secrets"], ["list"]), "on secrets"),
    ("rbac-mint-tokens", "prod", "no-broad-rbac", _role_rule(["serviceaccounts/token"], ["create"]), "mints a token"),
    ("seccomp-unconfined", "prod", "least-privilege-pods", _pod_context({"type": "Unconfined"}), "seccomp profile"),
    (
        "seccomp-localhost-container",
        "prod",
        "least-privilege-pods",
        _set(lambda r: pod(r)["containers"][0]["securityContext"], "seccompProfile", {"type": "Localhost"}),
        "Localhost",
    ),
    (
        "apparmor-unconfined",
        "prod",
        "least-privilege-pods",
        _set(lambda r: pod(r)["containers"][0]["securityContext"], "appArmorProfile", {"type": "Unconfined"}),
        "AppArmor",
    ),
    (
        "priority-class",
        "prod",
        "least-privilege-pods",
        _pod("priorityClassName", "system-node-critical"),
        "priority class",
    ),
    ("node-name", "prod", "least-privilege-pods", _pod("nodeName", "gke-node"), "past the scheduler"),
    ("host-aliases", "prod", "least-privilege-pods", _pod("hostAliases", [{"ip": "203.0.113.7"}]), "hostAliases"),
    ("dns-policy-none", "prod", "least-privilege-pods", _pod("dnsPolicy", "None"), "dnsPolicy None"),
    ("dns-config", "prod", "least-privilege-pods", _pod("dnsConfig", {"nameservers": ["203.0.113.7"]}), "dnsConfig"),
    ("share-process-namespace", "prod", "least-privilege-pods", _pod("shareProcessNamespace", True), "one process"),
    (
        "sysctls",
        "prod",
        "least-privilege-pods",
        _set(lambda r: pod(r)["securityContext"], "sysctls", [{"name": "kernel.core_pattern", "value": "|x"}]),
        "sysctls",
    ),
    (
        "host-port",
        "prod",
        "least-privilege-pods",
        _container("ports", [{"containerPort": 22, "hostPort": 22}]),
        "host port",
    ),
    (
        "token-in-probe",
        "prod",
        "no-secrets-in-workloads",
        _probe("livenessProbe", ["sh", "-c", f"T={TOKEN}"]),
        "livenessProbe.exec.command contains secret material",
    ),
    (
        "token-in-hook",
        "prod",
        "no-secrets-in-workloads",
        _probe("lifecycle", ["echo", TOKEN]),
        "lifecycle.postStart.exec.command contains",
    ),
    ("token-in-template-annotation", "prod", "no-secrets-in-workloads", _template_annotation, "annotation n contains"),
    ("token-in-unmounted-config-map", "prod", "no-secrets-in-workloads", _config_map(f"token {TOKEN}"), "data notes"),
    (
        "service-account-token-secret",
        "prod",
        "no-secrets-in-workloads",
        _secret("kubernetes.io/service-account-token"),
        "never expires",
    ),
    ("jobset-in-kube-system", "prod", "reviewed-helm-charts", _jobset_namespace("kube-system"), "not jobset-system"),
    (
        "kueue-controller-elsewhere",
        "prod",
        "reviewed-helm-charts",
        _set(
            lambda r: one(r, RELEASE, "kueue")["values"]["controllerManager"],
            "nodeSelector",
            {"cloud.google.com/gke-nodepool": "tpu-v6e-4x8-0"},
        ),
        "differ from what tpu-rl sets",
    ),
    (
        "kueue-manages-every-job",
        "prod",
        "reviewed-helm-charts",
        _kueue_config(lambda y: y + "manageJobsWithoutQueueName: true\n"),
        "manageJobsWithoutQueueName differ",
    ),
    (
        "kueue-timeout-not-a-duration",
        "prod",
        "reviewed-helm-charts",
        _kueue_config(lambda y: y.replace("timeout: 30m", "timeout: forever")),
        "waitForPodsReady.timeout differ",
    ),
    ("queue-every-namespace", "prod", "kueue-queue-fits", _queue_selector({}), "not the stack's namespace only"),
    (
        "queue-by-expression",
        "prod",
        "kueue-queue-fits",
        _queue_selector({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "Exists"}]}),
        "not the stack's namespace only",
    ),
    (
        "jobset-other-controller",
        "prod",
        "kueue-queue-fits",
        _managed_by("evil.example.com/c"),
        "not the JobSet controller",
    ),
    ("tpu-pool-kept-nodes", "dev", "tpu-budget", _min_nodes(2.0), "kept nodes (minNodeCount) bill $207.36"),
    (
        "cpu-pool-static",
        "dev",
        "tpu-budget",
        _static_cpu_pool(1000.0),
        "keep 1001 nodes with nothing running (cpu-pool 1000, system-pool 1), above maxKeptNodes 2",
    ),
    (
        "cpu-pool-kept-over-the-bound",
        "dev",
        "tpu-budget",
        _set(lambda r: one(r, NODE_POOL, "cpu-pool")["autoscaling"], "minNodeCount", 2.0),
        "keep 3 nodes with nothing running (cpu-pool 2, system-pool 1), above maxKeptNodes 2",
    ),
]

PASSES: list[tuple[str, str, str, Change]] = [
    ("private-endpoint-without-networks", "prod", "no-open-control-plane", _private_cluster("enablePrivateEndpoint")),
    (
        "dns-endpoint-internal",
        "prod",
        "no-open-control-plane",
        lambda r, v: _cluster(r).__setitem__(
            "controlPlaneEndpointsConfig", {"dnsEndpointConfig": {"allowExternalTraffic": False}}
        ),
    ),
    ("kubelet-read-only-port-closed", "prod", "gke-private-cluster", _kubelet("FALSE")),
    (
        "node-pool-another-node-account",
        "prod",
        "stack-principals",
        _node_account(f"tpu-rl-prod-cpu-np@{P}.iam.gserviceaccount.com"),
    ),
    ("firewall-private", "prod", "no-exposed-services", firewall(["10.0.0.0/8", "172.31.255.0/24", "192.168.0.0/16"])),
    ("firewall-health-checks", "prod", "no-exposed-services", firewall(["35.191.0.0/16", "130.211.0.0/22"])),
    ("firewall-egress-anywhere", "prod", "no-exposed-services", firewall(["0.0.0.0/0"], direction="EGRESS")),
    ("firewall-by-tag", "prod", "no-exposed-services", firewall([], sourceTags=["nodes"])),
    ("rbac-read-pods", "prod", "no-broad-rbac", _role_rule(["pods"], ["get", "list", "watch"])),
    ("rbac-read-service-accounts", "prod", "no-broad-rbac", _role_rule(["serviceaccounts"], ["get"])),
    ("seccomp-runtime-default", "prod", "least-privilege-pods", _pod_context({"type": "RuntimeDefault"})),
    ("dns-policy-cluster-first", "prod", "least-privilege-pods", _pod("dnsPolicy", "ClusterFirst")),
    ("share-process-namespace-off", "prod", "least-privilege-pods", _pod("shareProcessNamespace", False)),
    ("container-port", "prod", "least-privilege-pods", _container("ports", [{"containerPort": 22}])),
    ("text-in-probe", "prod", "no-secrets-in-workloads", _probe("livenessProbe", ["sh", "-c", "test -f /tmp/ok"])),
    ("text-in-config-map", "prod", "no-secrets-in-workloads", _config_map("pip install hf_transfer; HF_HUB_ENABLE=1")),
    ("opaque-secret", "prod", "no-secrets-in-workloads", _secret("Opaque")),
    ("jobset-in-its-namespace", "prod", "reviewed-helm-charts", _jobset_namespace("jobset-system")),
    (
        "kueue-another-timeout",
        "prod",
        "reviewed-helm-charts",
        _kueue_config(lambda y: y.replace("timeout: 30m", "timeout: 1h15m")),
    ),
    (
        "queue-the-stacks-namespace",
        "prod",
        "kueue-queue-fits",
        _queue_selector({"matchLabels": {"kubernetes.io/metadata.name": "tpu-rl"}}),
    ),
    ("jobset-own-controller", "prod", "kueue-queue-fits", _managed_by("jobset.sigs.k8s.io/jobset-controller")),
    ("tpu-pool-scales-to-zero", "dev", "tpu-budget", _min_nodes(0.0)),
    ("cpu-pool-static-at-the-bound", "dev", "tpu-budget", _static_cpu_pool(1.0)),  # 1 + the system pool's 1 = 2
]


@pytest.mark.parametrize(("case", "stack", "policy", "change", "words"), REFUSED, ids=[c[0] for c in REFUSED])
def test_the_refusal_at_up(case, stack, policy, change, words):
    found = new(stack, policy, change)
    assert found and all(f.level == "mandatory" and not f.unjudged for f in found), found
    assert any(words in f.message for f in found), [f.message for f in found]


@pytest.mark.parametrize(("case", "stack", "policy", "change", "words"), REFUSED, ids=[c[0] for c in REFUSED])
def test_the_refusal_is_advisory_while_its_value_is_unknown(case, stack, policy, change, words):
    found = new(stack, policy, change, preview=True)
    assert found and all(f.level == "advisory" and f.unjudged for f in found), found


@pytest.mark.parametrize(("case", "stack", "policy", "change"), PASSES, ids=[c[0] for c in PASSES])
def test_the_near_miss_passes(case, stack, policy, change):
    assert new(stack, policy, change) == []


@pytest.mark.parametrize("account", [COMPUTE, " default ", None])
def test_nodes_never_run_as_the_compute_default_account(account):
    """Unset, ``serviceAccount`` is the Compute Engine default account: refused by ``gke-private-cluster`` at `up`
    (at a preview, where the stack's accounts' emails are unknown, ``stack-principals`` names it)."""

    def change(resources: list[dict[str, Any]], v: Callable[[Any], Any]) -> None:
        node = one(resources, NODE_POOL, "tpu-pool-0")["nodeConfig"]
        node.pop("serviceAccount")
        if account is not None:
            node["serviceAccount"] = v(account)

    (found,) = new("prod", "gke-private-cluster", change)
    assert found.level == "mandatory" and "Compute Engine default account" in found.message, found


MINE = sorted({case[2] for case in REFUSED})


@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_the_programs_own_plans_draw_no_finding_of_these_rules(stack, preview):
    """The example stacks' plans pass every rule here (the whole pack on the first preview: ``tests/test_policy.py``
    ``test_the_example_stacks_pass_the_pack_as_the_engine_runs_it``)."""
    for policy in MINE:
        assert [m for level, m in _baseline(stack, policy, preview) if level == "mandatory"] == [], policy


@pytest.mark.parametrize(("pods_ready", "recovery"), [(1800, 16200), (60, 3600), (5400, 1)])
def test_the_charts_the_pack_expects_are_the_programs(pods_ready, recovery):
    """The namespaces and values ``reviewed-helm-charts`` allows are the ones the program installs, for any timeouts
    the configuration chooses; one field changed is named."""
    from infra.k8s import kueue
    from infra.k8s.manifests import JOBSET_NAMESPACE
    from infra.k8s.platform import JOBSET_CHART

    helm = policies.helm
    settings = SimpleNamespace(kueue=SimpleNamespace(pods_ready_timeout=pods_ready, recovery_timeout=recovery))
    namespace, values = helm.INSTALLED[kueue.CHART]
    assert namespace == kueue.NAMESPACE and helm.INSTALLED[JOBSET_CHART] == (JOBSET_NAMESPACE, {})
    written = kueue.helm_values(settings)  # type: ignore[arg-type]
    assert list(helm._differs(written, values, "")) == []
    config = written["managerConfig"]["controllerManagerConfigYaml"]
    written["managerConfig"]["controllerManagerConfigYaml"] = config.replace("Eviction", "Creation")
    assert list(helm._differs(written, values, "")) == [
        "managerConfig.controllerManagerConfigYaml.waitForPodsReady.requeuingStrategy.timestamp"
    ]
