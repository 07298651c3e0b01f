"""The CrossGuard pack on the captured dev and prod plans, and on mutated plans it must catch."""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import os
import re
import sys
from typing import Any

import pytest
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
)
from pulumi_policy.proxy import unknown_checking_proxy

from tests.conftest import plan_of
from tests.pure_plan import pure_plan
from tools.plan.offline import ROOT, Plan

pytestmark = pytest.mark.pure  # the policies judge builder output (pure_plan); one test also runs the program

# Imported by its package path (as the mutation run names it); the pack itself runs it as a script.
policies = importlib.import_module("policy.tpu_rl_policies")
BY_NAME = {p.name: p for p in policies.POLICIES}


def stack_config(stack: str) -> dict[str, Any]:
    return json.loads((ROOT / "policy" / "config" / f"{stack}.json").read_text())


def policy_config(stack: str, name: str) -> dict[str, Any]:
    entry = stack_config(stack).get(name, {})
    return {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else {}


def level(stack: str, name: str) -> str:
    config = stack_config(stack)
    entry = config.get(name, config.get("all"))
    return entry["enforcementLevel"] if isinstance(entry, dict) else entry


def _options(resource: dict[str, Any]) -> PolicyResourceOptions:
    o = resource["options"]
    timeouts = o["customTimeouts"] or {}
    return PolicyResourceOptions(
        protect=o["protect"],
        ignore_changes=o["ignoreChanges"],
        delete_before_replace=o["deleteBeforeReplace"],
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0) if not timeouts else PolicyCustomTimeouts(1, 1, 1),
        additional_secret_outputs=[],
        parent=o["parent"],
    )


def _run(result: Any) -> None:
    if asyncio.iscoroutine(result):
        asyncio.new_event_loop().run_until_complete(result)


def violations(plan: Plan, name: str, stack: str = "dev", config: dict[str, Any] | None = None) -> list[str]:
    """Messages the named policy reports on a plan, with the stack's policy config (or ``config``)."""
    policy = BY_NAME[name]
    config = policy_config(VARIANTS.get(stack, (stack,))[0], name) if config is None else config
    found: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append(message)

    if isinstance(policy, ResourceValidationPolicy):
        for r in plan.resources:
            # Props as the analyzer hands them over: read-only Mapping/Sequence proxies.
            props = unknown_checking_proxy(copy.deepcopy(r["inputs"]))
            args = ResourceValidationArgs(r["type"], props, f"urn:{r['name']}", r["name"], _options(r), None, config)
            for validate in policy.validate if isinstance(policy.validate, list) else [policy.validate]:
                _run(validate(args, report))
    else:
        resources = [_policy_resource(r) for r in plan.resources]
        _run(policy.validate(StackValidationArgs(resources, config), report))
    return found


def test_pack_module_imports_without_starting_a_server():
    assert "pulumi_policy" in sys.modules and len(policies.POLICIES) >= 12
    assert "__main__" not in policies.__name__
    for policy in policies.POLICIES:
        assert policy.name and policy.description and policy.severity and policy.remediation_steps
        assert "\n" not in policy.description


# Findings the stack config makes expected (all advisory there); everything else must be clean.
EXPECTED = {
    "dev": {"no-open-control-plane", "bucket-deletion-guard", "model-revision-pinned"},
    "prod": {"model-revision-pinned"},
}


@pytest.mark.parametrize(
    ("stack", "source"),
    [
        pytest.param(st, src, marks=[pytest.mark.program] if src == "program" else [])
        for st in ("dev", "prod")
        for src in ("program", "builders")
    ],
)
def test_every_policy_runs_on_the_example_stacks(stack, source):
    plan = plan_of(stack) if source == "program" else pure_plan(stack)
    for name in BY_NAME:
        found = violations(plan, name, stack)
        if name in EXPECTED[stack]:
            assert found, f"{name} should report the finding {stack} expects"
            assert level(stack, name) == "advisory", f"{name} must be advisory in {stack}"
        else:
            assert found == [], f"{name} on {stack}: {found}"


def test_a_publishing_stack_passes_every_policy_prod_passes():
    """The publish JobSet (its queue, retries, image, pod) and its card and Secret change no verdict."""
    for name in BY_NAME:
        assert violations(base_plan("publishing"), name, "prod") == violations(base_plan("prod"), name, "prod"), name


def test_prod_is_stricter_than_dev():
    order = {"disabled": 0, "advisory": 1, "mandatory": 2}
    for name in BY_NAME:
        assert order[level("prod", name)] >= order[level("dev", name)], name
    assert level("prod", "no-open-control-plane") == "mandatory" and level("dev", "no-open-control-plane") == "advisory"
    assert level("prod", "bucket-deletion-guard") == "mandatory"


STEPS = ("convert", "train", "export", "publish")


def _is(resource: dict, name: str | None) -> bool:
    """A resource by name, or a workflow step by its step (its name is content-addressed)."""
    if name in STEPS:
        return (resource["inputs"].get("metadata") or {}).get("labels", {}).get("app.kubernetes.io/component") == name
    return name is None or resource["name"] == name


# Stack variants some cases need: (example stack whose policy config applies, --set overrides).
VARIANTS = {
    "flex": ("dev", "tpu-rl:tpu.capacity=flex-start"),
    "publishing": ("prod", "tpu-rl:publish.repo=acme/gemma4-grpo"),
}


def base_plan(stack: str) -> Plan:
    return pure_plan(*VARIANTS.get(stack, (stack,)))


def _pod_spec(resource):
    return resource["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _publish_env(name, value):
    def change(resource):
        env = _container(resource)["env"]
        next(e for e in env if e["name"] == name)["value"] = value

    return change


def mutated(stack: str, type_: str, name: str | None, change) -> Plan:
    plan = copy.deepcopy(base_plan(stack))
    targets = [r for r in plan.resources if r["type"] == type_ and _is(r, name)]
    assert targets, (type_, name)
    for resource in targets:
        change(resource)
    return plan


def _head(r):
    return r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _set(path, value):
    def change(resource):
        node = resource["inputs"]
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return change


POOL, CLUSTER, BUCKET = "gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster", "gcp:storage/bucket:Bucket"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"  # not in our stacks; the generic workload policies still cover it
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"


def _container(r, index=0):
    return _head(r)["containers"][index]


def _worker(r):
    return r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]


def _container_set(path, value):
    def change(resource):
        node = _container(resource)
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return change


def _cidrs(*blocks):
    return _set(["masterAuthorizedNetworksConfig", "cidrBlocks"], [{"cidrBlock": c} for c in blocks])


def _env(name, value=None, value_from=None):
    entry = {"name": name, **({"value": value} if value is not None else {"valueFrom": value_from})}
    return lambda r: _container(r)["env"].append(entry)


def _command(text):
    return lambda r: _head(r)["containers"][0]["command"].__setitem__(2, text)


def _both(*changes):
    def change(resource):
        for c in changes:
            c(resource)

    return change


TOKEN = "hf_abcdefghijklmnopqrstuvwxyz"

# (id, policy, stack, resource type, resource or step name, change, words the finding contains). Every
# finding is also compared word for word with tests/data/policy-messages.tsv (reviewed; rewritten by
# `TPU_RL_UPDATE_MESSAGES=1 make test`).
MUTATIONS = [
    (
        "token-in-command",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "train",
        _command(f"python3 x hf_access_token={TOKEN}"),
        "command contains secret material",
    ),
    (
        "token-in-args",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("args", [f"--token={TOKEN}"]),
        "args contains secret material",
    ),
    (
        "env-var-in-command",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "export",
        lambda r: _container(r).__setitem__("args", ["MY_API_KEY=abc"]),
        "args contains secret material",
    ),
    (
        "token-literal-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r)["env"].__setitem__(0, {"name": "HF_TOKEN", "value": TOKEN}),
        "env HF_TOKEN has a literal value",
    ),
    (
        "secret-named-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _env("WANDB_API_KEY", "abc"),
        "env WANDB_API_KEY has a literal value",
    ),
    (
        "token-valued-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _env("EXTRA", TOKEN),
        "env EXTRA has a literal value",
    ),
    (
        "token-from-config-map",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r)["env"].__setitem__(
            0, {"name": "HF_TOKEN", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}
        ),
        "HF_TOKEN must come from a secretKeyRef",
    ),
    (
        "node-count",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeCount"], 4),
        "must equal the slice's 8 hosts",
    ),
    (
        "topology-unformable",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["placementPolicy", "tpuTopology"], "4x5"),
        "cannot form topology 4x5",
    ),
    (
        "topology-from-labels",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _both(
            _set(["placementPolicy"], {}), _set(["nodeConfig", "labels"], {"cloud.google.com/gke-tpu-topology": "4x8"})
        ),
        "needs placementPolicy {type: COMPACT, tpuTopology: 4x8}",
    ),
    (
        "not-compact",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["placementPolicy", "type"], "SPREAD"),
        "needs placementPolicy",
    ),
    (
        "single-host-with-topology",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _both(
            _set(["nodeConfig", "machineType"], "ct6e-standard-8t"),
            _set(["placementPolicy", "tpuTopology"], "2x4"),
            _set(["nodeCount"], 1),
        ),
        "must not set placementPolicy.tpuTopology",
    ),
    (
        "two-zones",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeLocations"], ["us-east5-a", "us-east5-b"]),
        "exactly one zone",
    ),
    ("no-zone", "tpu-node-pool-shape", "prod", POOL, "tpu-pool-0", _set(["nodeLocations"], []), "nodeLocations has 0"),
    (
        "autoscaled-reservation",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(
            ["nodeConfig", "reservationAffinity"], {"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["r"]}
        ),
        "cannot consume a reservation",
    ),
    (
        "autoscaled-part-slice",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling", "maxNodeCount"], 1),
        "one whole slice",
    ),
    (
        "autoscaled-total-max",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling"], {"totalMaxNodeCount": 3}),
        "autoscaling max 3",
    ),
    (
        "autoscaled-min-partial",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling", "minNodeCount"], 1),
        "autoscaling min must be 0 or 2",
    ),
    (
        "static-without-reservation",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "reservationAffinity", "values"], []),
        "needs a SPECIFIC_RESERVATION affinity",
    ),
    (
        "spot-any-reservation",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "reservationAffinity"], {"consumeReservationType": "ANY_RESERVATION"}),
        "set reservationAffinity NO_RESERVATION",
    ),
    (
        "public-nodes",
        "gke-private-cluster",
        "prod",
        CLUSTER,
        None,
        _set(["privateClusterConfig", "enablePrivateNodes"], False),
        "nodes must be private",
    ),
    (
        "no-workload-identity",
        "gke-private-cluster",
        "prod",
        CLUSTER,
        None,
        _set(["workloadIdentityConfig"], {}),
        "Workload Identity",
    ),
    (
        "unshielded",
        "gke-private-cluster",
        "prod",
        CLUSTER,
        None,
        _set(["enableShieldedNodes"], False),
        "shielded nodes",
    ),
    (
        "open-world",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("0.0.0.0/0"),
        "cover 100.0000% of the public IPv4 space",
    ),
    (
        "open-world-in-halves",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("0.0.0.0/1", "128.0.0.0/1"),
        "cover 100.0000%",
    ),
    ("open-world-zero-padded", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("0.0.0.0/00"), "cover 100.0000%"),
    (
        "open-world-netmask",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("0.0.0.0/0.0.0.0"),
        "cover 100.0000%",
    ),
    (
        "wider-than-16",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("203.0.113.0/24", "1.0.0.0/8"),
        "1.0.0.0/8 (1.0.0.0/8) is wider than /16",
    ),
    (
        "host-bits",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("1.2.3.4/15"),
        "1.2.3.4/15 (1.2.0.0/15) is wider than /16",
    ),
    (
        "many-narrow",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("198.51.100.0/24", *(f"{i}.0.0.0/16" for i in range(1, 12))),
        "together cover 0.01",
    ),
    (
        "not-a-cidr",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("office-network"),
        "'office-network' is not an IPv4 CIDR",
    ),
    ("ipv6", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("::/0"), "'::/0' is not an IPv4 CIDR"),
    (
        "google-cloud-ips",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _set(["masterAuthorizedNetworksConfig", "gcpPublicCidrsAccessEnabled"], True),
        "gcpPublicCidrsAccessEnabled",
    ),
    (
        "storage-admin",
        "no-broad-project-iam",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "tpu-container.defaultNodeServiceAccount",
        _set(["role"], "roles/storage.admin"),
        "project-level roles/storage.admin is too broad",
    ),
    (
        "editor",
        "no-broad-project-iam",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "tpu-container.defaultNodeServiceAccount",
        _set(["role"], "roles/editor"),
        "project-level roles/editor",
    ),
    (
        "no-uniform-access",
        "bucket-hardening",
        "prod",
        BUCKET,
        None,
        _set(["uniformBucketLevelAccess"], False),
        "uniform bucket-level access",
    ),
    (
        "public-access",
        "bucket-hardening",
        "prod",
        BUCKET,
        None,
        _set(["publicAccessPrevention"], "inherited"),
        "public access prevention",
    ),
    (
        "no-soft-delete",
        "bucket-hardening",
        "dev",
        BUCKET,
        None,
        _set(["softDeletePolicy"], {}),
        "soft delete or versioning",
    ),
    (
        "zero-soft-delete",
        "bucket-hardening",
        "dev",
        BUCKET,
        None,
        _set(["softDeletePolicy", "retentionDurationSeconds"], 0),
        "soft delete or versioning",
    ),
    ("force-destroy", "bucket-deletion-guard", "prod", BUCKET, None, _set(["forceDestroy"], True), "forceDestroy"),
    (
        "unprotected",
        "bucket-deletion-guard",
        "prod",
        BUCKET,
        None,
        lambda r: r["options"].__setitem__("protect", False),
        "not protected",
    ),
    (
        "jobset-ttl",
        "no-ttl-on-managed-jobs",
        "prod",
        JOBSET,
        "train",
        _set(["spec", "ttlSecondsAfterFinished"], 86400),
        "ttlSecondsAfterFinished",
    ),
    (
        "child-job-ttl",
        "no-ttl-on-managed-jobs",
        "prod",
        JOBSET,
        "train",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__(
            "ttlSecondsAfterFinished", 0
        ),
        "ttlSecondsAfterFinished",
    ),
    (
        "job-ttl",
        "no-ttl-on-managed-jobs",
        "prod",
        JOBSET,
        "export",
        _set(["spec", "ttlSecondsAfterFinished"], 3600),
        "ttlSecondsAfterFinished",
    ),
    (
        "restarts-above-cap",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        _set(["spec", "failurePolicy", "maxRestarts"], 2),
        "maxRestarts 2",
    ),
    (
        "restarts-missing",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        _set(["spec", "failurePolicy"], {}),
        "maxRestarts None",
    ),
    (
        "child-backoff-above-cap",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__("backoffLimit", 257),
        "worker: backoffLimit 257",
    ),
    (
        "job-backoff-missing",
        "bounded-retries",
        "prod",
        JOBSET,
        "convert",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"].pop("backoffLimit"),
        "convert: backoffLimit None",
    ),
    (
        "latest",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "maxtext:latest"),
        "is not pinned",
    ),
    (
        "untagged",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "us-docker.pkg.dev/p/r:1/maxtext"),
        "is not pinned",
    ),
    (
        "pathways-by-tag",
        "pinned-images",
        "prod",
        JOBSET,
        "train",
        lambda r: _head(r)["initContainers"][0].__setitem__(
            "image", "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.11.0"
        ),
        "must be pinned by digest",
    ),
    (
        "bucket-labels",
        "cost-attribution-labels",
        "prod",
        BUCKET,
        None,
        _set(["labels"], {}),
        "missing cost-attribution labels app, stack on labels",
    ),
    (
        "cluster-labels",
        "cost-attribution-labels",
        "prod",
        CLUSTER,
        None,
        _set(["resourceLabels"], {"app": "tpu-rl"}),
        "missing cost-attribution labels stack on resourceLabels",
    ),
    (
        "pool-labels",
        "cost-attribution-labels",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "resourceLabels"], None),
        "on nodeConfig.resourceLabels",
    ),
    (
        "nameless-container-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _head(r)["containers"].append(
            {"image": "busybox:1.36", "env": [{"name": "X_TOKEN", "value": "v"}, {"value": "no name"}]}
        ),
        "container ?: env X_TOKEN has a literal value",
    ),
    (
        "command-and-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _both(
            lambda r: _container(r).__setitem__("args", [f"hf_access_token={TOKEN}"]),
            _env("DB_PASSWORD", "hunter2"),
        ),
        "env DB_PASSWORD has a literal value",
    ),
    (
        "bad-cidr-then-open",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("office", "0.0.0.0/0"),
        "0.0.0.0/0 (0.0.0.0/0) is wider than /16",
    ),
    (
        "no-image",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).pop("image"),
        "image (none) is not pinned",
    ),
    (
        "short-digest",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "us-docker.pkg.dev/p/r/maxtext@sha256:abc"),
        "is not pinned",
    ),
    (
        "nameless-replicated-job",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        lambda r: (
            r["inputs"]["spec"]["replicatedJobs"][1].pop("name"),
            r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__("backoffLimit", 257),
        ),
        "?: backoffLimit 257",
    ),
    (
        "flex-start-reservation",
        "tpu-node-pool-shape",
        "flex",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "reservationAffinity"], {"consumeReservationType": "ANY_RESERVATION"}),
        "spot and flex-start capacity cannot consume a reservation",
    ),
    (
        "static-no-affinity",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        lambda r: r["inputs"]["nodeConfig"].pop("reservationAffinity"),
        "needs a SPECIFIC_RESERVATION affinity",
    ),
    (
        "queue-smaller-than-a-slice",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        lambda r: r["inputs"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].__setitem__(
            "nominalQuota", "16"
        ),
        "asks for 32 google.com/tpu but ClusterQueue tpu-rl offers at most 16",
    ),
    (
        "tpu-flavor-of-another-topology",
        "kueue-queue-fits",
        "prod",
        "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor",
        "kueue-tpu-flavor",
        _set(["spec", "nodeLabels", "cloud.google.com/gke-tpu-topology"], "2x4"),
        "asks for 32 google.com/tpu but ClusterQueue tpu-rl offers at most 0 on a flavor its pods fit",
    ),
    (
        "cpu-not-covered",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        lambda r: r["inputs"]["spec"]["resourceGroups"].pop(1),
        "asks for cpu, which ClusterQueue tpu-rl does not cover",
    ),
    (
        "namespace-not-admitted",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        _set(["spec", "namespaceSelector"], {"matchLabels": {"kubernetes.io/metadata.name": "other"}}),
        "ClusterQueue tpu-rl does not admit namespace tpu-rl",
    ),
    (
        "step-not-queued",
        "kueue-queue-fits",
        "prod",
        JOBSET,
        "export",
        lambda r: r["inputs"]["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name"),
        "names no LocalQueue (kueue.x-k8s.io/queue-name) while the stack has one",
    ),
    # Cluster and CI hardening (issue 20)
    (
        "secrets-in-plain-etcd",
        "secrets-encryption",
        "prod",
        CLUSTER,
        None,
        lambda r: r["inputs"].pop("databaseEncryption"),
        "without application-layer encryption",
    ),
    (
        "secrets-decrypted",
        "secrets-encryption",
        "prod",
        CLUSTER,
        None,
        _set(["databaseEncryption", "state"], "DECRYPTED"),
        "without application-layer encryption",
    ),
    (
        "secrets-key-missing",
        "secrets-encryption",
        "prod",
        CLUSTER,
        None,
        _set(["databaseEncryption", "keyName"], ""),
        "without application-layer encryption",
    ),
    (
        "versioning-off",
        "bucket-deletion-guard",
        "prod",
        BUCKET,
        None,
        lambda r: r["inputs"].pop("versioning"),
        "bucket versioning is off",
    ),
    (
        "versioning-disabled",
        "bucket-deletion-guard",
        "prod",
        BUCKET,
        None,
        _set(["versioning", "enabled"], False),
        "bucket versioning is off",
    ),
    (
        "whole-bucket-object-user",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "workload-bucket-objectUser",
        lambda r: r["inputs"].pop("condition"),
        "roles/storage.objectUser on the whole bucket",
    ),
    (
        "conditionless-reader",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "tpu-bucket-objectViewer",
        _set(["condition", "expression"], ""),
        "roles/storage.objectViewer on the whole bucket",
    ),
    (
        "object-creator-unbounded",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "cpu-bucket-legacyBucketReader",
        _set(["role"], "roles/storage.objectCreator"),
        "roles/storage.objectCreator on the whole bucket",
    ),
    (
        "bucket-admin",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "cpu-bucket-objectUser",
        _set(["role"], "roles/storage.objectAdmin"),
        "bucket-level roles/storage.objectAdmin manages the whole bucket",
    ),
    (
        "public-publish",
        "private-publish",
        "publishing",
        JOBSET,
        "publish",
        _publish_env("TPU_RL_PUBLISH_PRIVATE", "false"),
        "as a public repository",
    ),
    (
        "second-container-public",
        "private-publish",
        "publishing",
        JOBSET,
        "publish",
        lambda r: _pod_spec(r)["containers"].append(
            {
                **copy.deepcopy(_container(r)),
                "name": "again",
                "env": [
                    {"name": "TPU_RL_PUBLISH_REPO", "value": "acme/other"},
                    {"name": "TPU_RL_PUBLISH_PRIVATE", "value": "false"},
                ],
            }
        ),
        "publishes acme/other to the Hugging Face Hub as a public repository",
    ),
    (
        "publish-visibility-unset",
        "private-publish",
        "publishing",
        JOBSET,
        "publish",
        _publish_env("TPU_RL_PUBLISH_PRIVATE", ""),
        "as a public repository",
    ),
    (
        "image-from-docker-hub",
        "trusted-registries",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "docker.io/someone/tpu_post_training:0.2.4"),
        "is not from a trusted registry",
    ),
    (
        "worker-image-lookalike",
        "trusted-registries",
        "prod",
        JOBSET,
        "train",
        lambda r: _worker(r)["containers"][0].__setitem__(
            "image", "us-docker.pkg.dev/cloud-tpu-v2-images-mirror/pathways/server@sha256:" + "0" * 64
        ),
        "is not from a trusted registry",
    ),
    (
        "privileged-head",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _container(r).__setitem__("securityContext", {"privileged": True}),
        "is privileged",
    ),
    (
        "capability-added",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "export",
        _container_set(["securityContext", "capabilities", "add"], ["SYS_ADMIN"]),
        "adds capabilities",
    ),
    (
        "host-path-on-the-head",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _head(r)["volumes"].__setitem__(
            0, {"name": "shared-tmp", "hostPath": {"path": "/tmp", "type": "DirectoryOrCreate"}}
        ),
        "mounts the node's /tmp",
    ),
    (
        "host-path-after-another-volume",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "export",
        lambda r: _head(r)["volumes"].append({"name": "logs", "hostPath": {"path": "/var/log"}}),
        "mounts the node's /var/log",
    ),
    (
        "image-missing-from-a-trusted-registry",
        "trusted-registries",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).pop("image"),
        "image (none) is not from a trusted registry",
    ),
    (
        "worker-mounts-the-root",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _worker(r)["volumes"][0]["hostPath"].__setitem__("path", "/"),
        "mounts the node's /",
    ),
]
POLICY_MESSAGES = ROOT / "tests" / "data" / "policy-messages.tsv"


def read_policy_messages() -> dict[str, list[str]]:
    lines = POLICY_MESSAGES.read_text().splitlines() if POLICY_MESSAGES.exists() else []
    return {case: json.loads(found) for case, found in (line.split("\t", 1) for line in lines if line)}


PINNED = "tpu-rl:model.revision=0123456789abcdef0123456789abcdef01234567"


def test_model_revision_policy_catches_a_moving_ref():
    plan = pure_plan("prod", PINNED)
    assert violations(plan, "model-revision-pinned", "prod") == []
    moved = copy.deepcopy(plan)
    convert = next(r for r in moved.resources if r["type"] == JOBSET and _is(r, "convert"))
    container = _container(convert)
    container["command"][2] = container["command"][2].replace(PINNED.split("=", 1)[1], "main")
    assert violations(moved, "model-revision-pinned", "prod") == [
        "model revision 'main' is a moving ref; pin a commit for reproducible runs "
        "(pulumi config set --path 'tpu-rl:model.revision' <commit>)"
    ]


COMMIT = PINNED.split("=", 1)[1]


@pytest.mark.parametrize(
    ("revision", "found"),
    [(COMMIT, []), ("main", ["model revision 'main' is a moving ref; pin a commit for reproducible runs"])],
    ids=["commit", "branch"],
)
@pytest.mark.parametrize("field", ["command", "args"])
def test_model_revision_policy_reads_argv_form_commands_and_args(revision, found, field):
    """A hand-written Job that passes the revision as one argv word, in `command` or in `args`."""
    plan = copy.deepcopy(pure_plan("prod", PINNED))
    convert = next(r for r in plan.resources if r["type"] == JOBSET and _is(r, "convert"))
    argv = ["python3", "-m", "convert", f"--revision={revision}", "--lazy_load_tensors=true"]
    _container(convert).update({"command": argv[:2], "args": argv[2:]} if field == "args" else {"command": argv})
    assert [v.split(" (pulumi")[0] for v in violations(plan, "model-revision-pinned", "prod")] == found


@pytest.mark.parametrize("field", ["command", "args"])
def test_the_budget_reads_an_argv_form_training_command(field):
    plan = copy.deepcopy(pure_plan("prod"))
    jobset = next(r for r in plan.resources if r["type"] == JOBSET and _is(r, "train"))
    words = ["model_name=gemma4-26b", "num_batches=50", "batch_size=4", "rl.num_generations=4", "max_target_length=640"]
    argv = ["python3", "-m", "maxtext.trainers.post_train.rl.train_rl", *words, "run_name=rl"]
    head = next(c for c in _head(jobset)["containers"] if c["name"] == "workload-container")
    head.update({"command": argv[:3], "args": argv[3:]} if field == "args" else {"command": argv})
    assert policies.command_text(jobset["inputs"]["spec"]).count("num_batches=") == 1, "the only training command"
    estimate = policies.stack_estimate([_policy_resource(r) for r in plan.resources])
    assert estimate == policies.stack_estimate([_policy_resource(r) for r in pure_plan("prod").resources])


@pytest.mark.parametrize(
    ("case", "policy", "stack", "type_", "name", "change", "words"), MUTATIONS, ids=[m[0] for m in MUTATIONS]
)
def test_each_policy_catches_its_mutation(case, policy, stack, type_, name, change, words):
    assert not [v for v in violations(base_plan(stack), policy, stack) if words in v]
    found = violations(mutated(stack, type_, name, change), policy, stack)
    assert any(words in v for v in found), found
    if not os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        assert found == read_policy_messages()[case]


# The accepted side of each boundary: changes that must not be reported.
PASSES = [
    (
        "bind-low-ports",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "export",
        _container_set(["securityContext", "capabilities", "add"], ["NET_BIND_SERVICE"]),
    ),
    (
        "not-privileged",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _container(r).__setitem__("securityContext", {"privileged": False}),
    ),
    (
        "backoff-at-cap",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__("backoffLimit", 256),
    ),
    (
        "restarts-at-dev-cap",
        "bounded-retries",
        "dev",
        JOBSET,
        "train",
        _set(["spec", "failurePolicy", "maxRestarts"], 3),
    ),
    ("prefix-16", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("1.2.0.0/16")),
    ("private-and-wide", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("10.0.0.0/8", "172.16.0.0/12")),
    ("a-host", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("8.8.8.8")),
    (
        "pathways-by-digest",
        "pinned-images",
        "prod",
        JOBSET,
        "train",
        lambda r: _head(r)["initContainers"][0].__setitem__(
            "image", "us-docker.pkg.dev/x/pathways/proxy@sha256:" + "a" * 64
        ),
    ),
    (
        "versioning-instead-of-soft-delete",
        "bucket-hardening",
        "prod",
        BUCKET,
        None,
        _both(_set(["softDeletePolicy"], {}), _set(["versioning"], {"enabled": True})),
    ),
    (
        "narrow-project-role",
        "no-broad-project-iam",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "tpu-container.defaultNodeServiceAccount",
        _set(["role"], "roles/monitoring.metricWriter"),
    ),
    (
        "autoscaled-min-whole-slice",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling", "minNodeCount"], 2),
    ),
    (
        "env-from-secret",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _env("OTHER_TOKEN", value_from={"secretKeyRef": {"name": "s", "key": "k"}}),
    ),
    (
        "extra-labels",
        "cost-attribution-labels",
        "prod",
        BUCKET,
        None,
        _set(["labels"], {"app": "a", "stack": "s", "team": "t"}),
    ),
    (
        "env-without-a-name",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r)["env"].append({"value": "plain"}),
    ),
    (
        "spot-without-affinity",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        lambda r: r["inputs"]["nodeConfig"].pop("reservationAffinity", None),
    ),
    (
        "tag-and-digest",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "r/m:1@sha256:" + "b" * 64),
    ),
    (
        "queue-matches-everything",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        _set(["spec", "namespaceSelector"], {}),
    ),
    (
        "queue-by-expression",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        _set(
            ["spec", "namespaceSelector"],
            {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["tpu-rl"]}]},
        ),
    ),
    (
        "quota-exactly-a-slice-and-a-head",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        lambda r: r["inputs"]["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0].__setitem__(
            "nominalQuota", "32"
        ),
    ),
]


@pytest.mark.parametrize(
    ("policy", "stack", "type_", "name", "change"), [p[1:] for p in PASSES], ids=[p[0] for p in PASSES]
)
def test_the_accepted_side_of_each_boundary_is_not_reported(policy, stack, type_, name, change):
    assert violations(mutated(stack, type_, name, change), policy, stack) == []


def test_the_reviewed_policy_messages_are_the_cases():
    found = {m[0]: violations(mutated(*m[2:6]), m[1], m[2]) for m in MUTATIONS}
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        POLICY_MESSAGES.write_text("".join(f"{case}\t{json.dumps(v)}\n" for case, v in found.items()))
    assert list(read_policy_messages()) == list(found)


def test_no_policy_message_shows_any_part_of_a_secret():
    """PR comments carry policy messages: a secret found in a workload is named by kind, never quoted."""
    secrets = (TOKEN, "KEY=abc")  # the values; an env var's name is not a secret
    for case in [m for m in MUTATIONS if m[1] == "no-secrets-in-workloads"]:
        for message in violations(mutated(*case[2:6]), case[1], case[2]):
            for secret in secrets:
                parts = {secret[i : i + 6] for i in range(len(secret) - 5)}
                assert not any(part in message for part in parts), (case[0], message)


def test_trusted_registries_come_from_the_policy_config():
    mirror = "europe-docker.pkg.dev/my-project/mirror"
    plan = mutated("prod", JOBSET, "convert", lambda r: _container(r).__setitem__("image", f"{mirror}/maxtext:0.2.4"))
    assert violations(plan, "trusted-registries", "prod")
    trusted = [mirror, "us-docker.pkg.dev/cloud-tpu-images", "us-docker.pkg.dev/cloud-tpu-v2-images"]
    assert violations(plan, "trusted-registries", "prod", config={"registries": trusted}) == []
    only_mirror = violations(plan, "trusted-registries", "prod", config={"registries": [mirror]})
    assert only_mirror, "the other steps' images are refused"
    assert not [v for v in only_mirror if f"{mirror}/maxtext" in v], "the mirror's image is trusted"


def test_a_public_repository_needs_the_policy_config_to_list_it():
    private = base_plan("publishing")
    assert violations(private, "private-publish", "prod") == []
    public = pure_plan("prod", "tpu-rl:publish.repo=acme/gemma4-grpo", "tpu-rl:publish.private=false")
    assert violations(public, "private-publish", "prod"), "the stack's say-so alone is not enough"
    assert violations(public, "private-publish", "prod", config={"publicRepos": ["acme/gemma4-grpo"]}) == []
    assert violations(public, "private-publish", "prod", config={"publicRepos": ["acme/other"]})
    assert policy_config("prod", "private-publish") == {} and level("prod", "private-publish") == "mandatory"


def test_secrets_encryption_is_required_only_where_the_policy_config_says_so():
    dev = base_plan("dev")
    assert dev.one(CLUSTER)["inputs"]["databaseEncryption"] == {"state": "DECRYPTED"}
    assert violations(dev, "secrets-encryption", "dev") == []
    assert violations(dev, "secrets-encryption", "dev", config={"required": True})
    assert violations(dev, "secrets-encryption", "dev", config={}) == [], "not required unless the config says so"
    assert policy_config("prod", "secrets-encryption") == {"required": True}
    assert level("prod", "secrets-encryption") == "mandatory"


def test_every_policy_has_a_mutation():
    covered = {m[1] for m in MUTATIONS} | {"model-revision-pinned", "tpu-budget"}  # tested below
    assert covered == set(BY_NAME)


def test_budget_gate():
    prod = pure_plan("prod")
    assert policies.stack_estimate([_policy_resource(r) for r in prod.resources])["totalUsd"] == pytest.approx(
        231.84, abs=0.01
    )
    assert violations(pure_plan("prod", "tpu-rl:training.numBatches=2000"), "tpu-budget", "prod")[0].startswith(
        "estimated TPU cost of one run is $"
    )
    found = violations(
        pure_plan("dev", "tpu-rl:tpu.capacity=on-demand", "tpu-rl:training.numBatches=500"), "tpu-budget"
    )
    assert found and "above maxEstimatedUsd $100.00" in found[0]
    reserved = violations(pure_plan("dev", "tpu-rl:tpu.capacity=reservation", "tpu-rl:tpu.reservation=r"), "tpu-budget")
    assert any("per day until `pulumi destroy`" in v for v in reserved)
    idle = violations(
        pure_plan(
            "dev", "tpu-rl:tpu.capacity=reservation", "tpu-rl:tpu.reservation=r", "tpu-rl:workflow.enabled=false"
        ),
        "tpu-budget",
    )
    assert len(idle) == 1 and "per day until `pulumi destroy`" in idle[0], "provision-only still shows the daily bill"


def test_budget_gate_says_when_it_cannot_judge():
    plan = mutated(
        "prod",
        JOBSET,
        "train",
        lambda r: _head(r)["containers"][0]["command"].__setitem__(2, "exec python3 -m something_else"),
    )
    (found,) = violations(plan, "tpu-budget", "prod")
    assert found.startswith("cannot read model_name= from the training JobSet's command")


def _policy_resource(r):
    props = unknown_checking_proxy(copy.deepcopy(r["inputs"]))
    return PolicyResource(r["type"], props, f"urn:{r['name']}", r["name"], _options(r), None, None, [], {})


def test_pack_entry_point_builds_the_pack(monkeypatch):
    import runpy

    import pulumi_policy

    built = {}

    class FakePack:
        def __init__(self, name, policies, enforcement_level=None, **kwargs):
            built.update(name=name, policies=policies, level=enforcement_level)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", FakePack)
    monkeypatch.syspath_prepend(str(ROOT / "policy"))  # as `python __main__.py` in policy/ (the CLI) puts it
    runpy.run_path(str(ROOT / "policy" / "__main__.py"))
    assert built["name"] == "tpu-rl-guardrails"
    names = [p.name for p in built["policies"]]
    assert len(names) == len(set(names)) == len(policies.POLICIES)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_policy_config_names_only_known_policies(stack):
    config = stack_config(stack)
    assert set(config) - {"all"} <= set(BY_NAME)
    for name, entry in config.items():
        value = entry["enforcementLevel"] if isinstance(entry, dict) else entry
        assert value in ("advisory", "mandatory", "remediate", "disabled"), name


@pytest.mark.parametrize(
    ("blocks", "share"),
    [
        (["0.0.0.0/0"], 1.0),
        (["10.0.0.0/8", "192.168.0.0/16", "203.0.113.0/24"], 0.0),
        (["0.0.0.0/1", "128.0.0.0/1"], 1.0),
        (["8.8.8.0/24", "8.8.8.0/24", "8.8.8.128/25"], 256 / policies.PUBLIC_ADDRESSES),
    ],
)
def test_public_share_counts_overlaps_once_and_ignores_private_space(blocks, share):
    assert policies.public_share([policies.parse_cidr(b) for b in blocks]) == pytest.approx(share)


def test_coverage_limits_at_their_boundaries():
    """At the limit passes, one step beyond fails (prefix /16 and share 0.01% by default)."""

    def found(blocks, **config):
        plan = mutated(
            "prod",
            CLUSTER,
            None,
            _set(["masterAuthorizedNetworksConfig", "cidrBlocks"], [{"cidrBlock": c} for c in blocks]),
        )
        cluster = plan.one(CLUSTER)
        props = unknown_checking_proxy(copy.deepcopy(cluster["inputs"]))
        args = ResourceValidationArgs(
            CLUSTER,
            props,
            "urn",
            "cluster",
            _options(cluster),
            None,
            {"minPrefixLength": 16, "maxPublicShare": 0.0001, **config},
        )
        out: list[str] = []
        BY_NAME["no-open-control-plane"].validate(args, lambda m, urn=None: out.append(m))
        return out

    assert found(["1.2.0.0/16"]) == []
    assert any("wider than /16" in m for m in found(["1.2.0.0/15"]))
    share_of_16 = 65536 / policies.PUBLIC_ADDRESSES
    assert found(["1.2.0.0/16"], maxPublicShare=share_of_16) == []
    assert any("together cover" in m for m in found(["1.2.0.0/16", "1.4.0.1/32"], maxPublicShare=share_of_16))


def _normalised(resource):
    """Inputs without what only a real registration knows (ids, emails)."""
    text = json.dumps(resource["inputs"], sort_keys=True)
    text = re.sub(r'"[a-z0-9-]+@[a-z0-9.-]+"', '"EMAIL"', text)
    text = re.sub(r'serviceAccount:[^"]+', "serviceAccount:EMAIL", text)
    inputs = json.loads(text)
    for key in ("network", "subnetwork", "cluster", "bucket"):
        inputs.pop(key, None)
    (inputs.get("metadata") or {}).pop("annotations", None)
    return inputs


@pytest.mark.program
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_builders_plan_is_what_the_program_registers(stack):
    program = plan_of(stack)
    for resource in pure_plan(stack).resources:
        registered = program.one(resource["type"], resource["name"])
        assert _normalised(resource) == _normalised(registered), resource["name"]
        assert resource["options"]["protect"] == registered["options"]["protect"]


BUDGET_FIX = (
    "use a smaller slice, fewer numBatches or spot/flex-start capacity, or raise the budget in the policy config"
)
IDLE = "per day until `pulumi destroy`: destroy the stack after the run or use autoscaled capacity"
OPEN = "set tpu-rl:authorizedNetworks to the networks you deploy from"


@pytest.mark.parametrize(
    ("overrides", "config", "expected"),
    [
        # prod's run: 231.84 USD, 1,451.52 USD a day idle (test_estimate). At the limits: nothing.
        ((), {"maxEstimatedUsd": 231.84, "maxIdleUsdPerDay": 1451.52}, []),
        (
            (),
            {"maxEstimatedUsd": 231.83, "maxIdleUsdPerDay": 1451.51},
            [
                f"estimated TPU cost of one run is $231.84 (reservation, 32 chips), above maxEstimatedUsd $231.83: "
                f"{BUDGET_FIX}",
                f"the reserved slice bills $1,451.52 {IDLE}",
            ],
        ),
        # Defaults without config: 1,000 USD a run, 5,000 USD a day. 1,000 batches: 29.1667 h x 32 x 1.89.
        (
            ("tpu-rl:training.numBatches=1000",),
            {},
            [
                "estimated TPU cost of one run is $1,764.00 (reservation, 32 chips), above maxEstimatedUsd "
                f"$1,000.00: {BUDGET_FIX}"
            ],
        ),
        (("tpu-rl:tpu.slices=3",), {}, []),  # 96 chips: 4,354.56 USD a day
        (("tpu-rl:tpu.slices=4",), {}, [f"the reserved slice bills $5,806.08 {IDLE}"]),
    ],
)
def test_budget_limits_and_defaults(overrides, config, expected):
    assert violations(pure_plan("prod", *overrides), "tpu-budget", "prod", config) == expected


@pytest.mark.parametrize(
    ("policy", "change", "config", "expected"),
    [
        (
            "no-open-control-plane",
            _cidrs("1.0.0.0/8"),
            {},
            [
                f"authorized network 1.0.0.0/8 (1.0.0.0/8) is wider than /16; {OPEN}",
                "the authorized networks together cover 0.4532% of the public IPv4 space (at most 0.0100% allowed); "
                f"the control plane is open to the internet: {OPEN}",
            ],
        ),
        ("no-open-control-plane", _cidrs("1.0.0.0/8"), {"minPrefixLength": 8, "maxPublicShare": 0.004532}, []),
        (
            "no-open-control-plane",
            _cidrs("1.0.0.0/8"),
            {"minPrefixLength": 9, "maxPublicShare": 0.004531},
            [
                f"authorized network 1.0.0.0/8 (1.0.0.0/8) is wider than /9; {OPEN}",
                "the authorized networks together cover 0.4532% of the public IPv4 space (at most 0.4531% allowed); "
                f"the control plane is open to the internet: {OPEN}",
            ],
        ),
        ("bounded-retries", _set(["spec", "failurePolicy", "maxRestarts"], 3), {}, []),
        (
            "bounded-retries",
            _set(["spec", "failurePolicy", "maxRestarts"], 4),
            {},
            ["failurePolicy.maxRestarts 4 is missing or above 3: lower tpu-rl:workflow.maxRestarts"],
        ),
        (
            "bounded-retries",
            # The workers' own backoffLimit (32) sits on this cap and passes; the head's 33 does not.
            lambda r: r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"].__setitem__("backoffLimit", 33),
            {"maxBackoffLimit": 32, "maxRestarts": 1},
            ["pathways-head: backoffLimit 33 is unbounded or above 32: a TPU slice retries for hours"],
        ),
    ],
)
def test_policy_config_defaults_and_overrides(policy, change, config, expected):
    type_ = CLUSTER if policy == "no-open-control-plane" else JOBSET
    assert violations(mutated("prod", type_, "train" if type_ == JOBSET else None, change), policy, "prod", config) == (
        expected
    )


def test_required_labels_come_from_the_policy_config():
    found = violations(pure_plan("prod"), "cost-attribution-labels", "prod", {"requiredLabels": ["team"]})
    assert sorted(set(found)) == [
        "missing cost-attribution labels team on labels",
        "missing cost-attribution labels team on nodeConfig.resourceLabels",
        "missing cost-attribution labels team on resourceLabels",
    ]


@pytest.mark.parametrize(
    ("overrides", "capacity", "chips"),
    [
        ((), "reservation", 32),
        (("tpu-rl:tpu.capacity=spot", "tpu-rl:tpu.reservation="), "spot", 32),
        (("tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="), "flex-start", 32),
        (("tpu-rl:tpu.capacity=on-demand", "tpu-rl:tpu.reservation="), "on-demand", 32),
        (("tpu-rl:tpu.slices=2",), "reservation", 64),
    ],
    ids=["reservation", "spot", "flex-start", "on-demand", "two-slices"],
)
def test_the_budget_reads_capacity_and_slices_from_the_pools(overrides, capacity, chips):
    plan = pure_plan("prod", *overrides)
    estimate = policies.stack_estimate([_policy_resource(r) for r in plan.resources])
    assert (estimate["capacity"], estimate["chips"]) == (capacity, chips)


def test_a_provision_only_stack_costs_nothing_per_run_but_bills_per_day():
    plan = pure_plan("prod", "tpu-rl:workflow.enabled=false")
    estimate = policies.stack_estimate([_policy_resource(r) for r in plan.resources])
    assert (estimate["totalUsd"], estimate["totalHours"], estimate["idleUsdPerDay"]) == (0.0, 0.0, 1451.52)


def test_a_pool_the_budget_cannot_read_is_skipped_not_the_rest():
    """A pool with an unformable topology (reported by tpu-node-pool-shape) does not hide the next one."""
    plan = copy.deepcopy(pure_plan("prod", "tpu-rl:tpu.slices=2"))
    first = next(r for r in plan.resources if r["name"] == "tpu-pool-0")
    first["inputs"]["placementPolicy"]["tpuTopology"] = "4x5"
    estimate = policies.stack_estimate([_policy_resource(r) for r in plan.resources])
    assert estimate["chips"] == 32


def test_default_backoff_cap_without_config():
    def change(resource):
        resource["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"]["backoffLimit"] = 257

    assert violations(mutated("prod", JOBSET, "train", change), "bounded-retries", "prod", {"maxRestarts": 5}) == [
        "worker: backoffLimit 257 is unbounded or above 256: a TPU slice retries for hours"
    ]


def _as_job(backoff_limit):
    """The convert step as a hand-written batch/v1 Job (its replicated Job's spec) with this backoffLimit."""

    def change(resource):
        spec = copy.deepcopy(resource["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"])
        spec["backoffLimit"] = backoff_limit
        resource["type"] = JOB
        resource["inputs"] = {**resource["inputs"], "apiVersion": "batch/v1", "kind": "Job", "spec": spec}

    return change


@pytest.mark.parametrize(
    ("backoff_limit", "expected"),
    [
        (257, ["Job: backoffLimit 257 is unbounded or above 256: a TPU slice retries for hours"]),
        (None, ["Job: backoffLimit None is unbounded or above 256: a TPU slice retries for hours"]),
        (256, []),  # a Job has no failurePolicy.maxRestarts to miss
    ],
)
def test_a_plain_job_is_judged_by_its_own_backoff_limit(backoff_limit, expected):
    plan = mutated("prod", JOBSET, "convert", _as_job(backoff_limit))
    assert [r["type"] for r in plan.resources].count(JOB) == 1
    assert violations(plan, "bounded-retries", "prod") == expected


# Kueue: which namespaces a ClusterQueue admits, which steps it judges, which flavors count.
NAMESPACE = "kubernetes:core/v1:Namespace"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
NS_NAME = "kubernetes.io/metadata.name"
NEVER = ": Kueue would never admit it; size the ClusterQueue to the pools (tpu-rl:kueue)"
UNQUEUED = (
    " names no LocalQueue (kueue.x-k8s.io/queue-name) while the stack has one: it bypasses Kueue and competes "
    "with queued runs for the slice"
)


def _jobset_name(plan: Plan, step: str) -> str:
    (resource,) = [r for r in plan.resources if r["type"] == JOBSET and _is(r, step)]
    return resource["inputs"]["metadata"]["name"]


def _not_admitted(plan: Plan) -> list[str]:
    """The findings when the ClusterQueue admits none of the steps' namespace (tpu-rl), in plan order."""
    return [
        f"ClusterQueue tpu-rl does not admit namespace tpu-rl (JobSet {_jobset_name(plan, s)}){NEVER}"
        for s in ("convert", "export", "train")
    ]


def _with(plan: Plan, *resources: dict[str, Any]) -> Plan:
    """The plan with more objects (as the program would register them, sorted by type and name)."""
    plan = copy.deepcopy(plan)
    plan.resources = sorted([*plan.resources, *copy.deepcopy(list(resources))], key=lambda r: (r["type"], r["name"]))
    return plan


def _object(type_: str, name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """A Kubernetes object as a plan resource, with default options."""
    options = {
        "protect": False,
        "ignoreChanges": [],
        "deleteBeforeReplace": False,
        "customTimeouts": None,
        "parent": None,
    }
    return {"type": type_, "name": name, "inputs": manifest, "options": options}


def _term(key, operator, *values):
    return {"matchExpressions": [{"key": key, "operator": operator, **({"values": list(values)} if values else {})}]}


@pytest.mark.parametrize(
    ("selector", "admitted"),
    [
        (None, False),  # null selects nothing (Kueue ClusterQueue), {} everything
        ({}, True),
        (_term(NS_NAME, "In", "tpu-rl", "other"), True),
        (_term(NS_NAME, "In", "other"), False),
        (_term("team", "In", "ml"), False),
        (_term(NS_NAME, "NotIn", "other"), True),
        (_term(NS_NAME, "NotIn", "tpu-rl"), False),
        (_term("team", "NotIn", "ml"), True),  # a namespace without the label is not in any value set
        (_term(NS_NAME, "Exists"), True),
        (_term("team", "Exists"), False),
        (_term("team", "DoesNotExist"), True),
        (_term(NS_NAME, "DoesNotExist"), False),
        (_term(NS_NAME, "Gt", "1"), False),  # not a label-selector operator: the selector is invalid
        # Every label and every expression must hold.
        ({"matchLabels": {NS_NAME: "tpu-rl"}, **_term(NS_NAME, "In", "other")}, False),
        ({"matchLabels": {NS_NAME: "tpu-rl"}, **_term(NS_NAME, "NotIn", "other")}, True),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else None,
)
def test_the_namespace_selector_of_the_cluster_queue(selector, admitted):
    plan = mutated("prod", CQ, "kueue-cluster-queue", _set(["spec", "namespaceSelector"], selector))
    assert violations(plan, "kueue-queue-fits", "prod") == ([] if admitted else _not_admitted(plan))


def test_the_namespace_selector_reads_the_labels_of_the_stacks_namespace():
    plan = mutated(
        "prod", CQ, "kueue-cluster-queue", _set(["spec", "namespaceSelector"], {"matchLabels": {"team": "ml"}})
    )

    def namespace(name, labels):
        return _object(
            NAMESPACE, name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )

    labelled = namespace("tpu-rl", {"team": "ml"})
    assert violations(_with(plan, labelled), "kueue-queue-fits", "prod") == []
    assert violations(plan, "kueue-queue-fits", "prod") == _not_admitted(plan), "no Namespace object: no labels"
    for other in (namespace("other", {"team": "ml"}), namespace("tpu-rl", {}), namespace("None", {"team": "ml"})):
        assert violations(_with(plan, other), "kueue-queue-fits", "prod") == _not_admitted(plan), other


def _also(plan: Plan, type_: str, name: str | None, change) -> Plan:
    """``mutated`` on a plan already changed: a copy of it with one more change."""
    plan = copy.deepcopy(plan)
    targets = [r for r in plan.resources if r["type"] == type_ and _is(r, name)]
    assert targets, (type_, name)
    for resource in targets:
        change(resource)
    return plan


def _queue(name: str | None):
    def change(resource):
        labels = resource["inputs"]["metadata"]["labels"]
        if name is None:
            labels.pop("kueue.x-k8s.io/queue-name")
        else:
            labels["kueue.x-k8s.io/queue-name"] = name

    return change


def test_every_step_is_judged_after_one_that_is_not():
    """A step without a queue, or with one the stack does not manage, does not end the check of the rest."""
    export_unqueued = mutated("prod", JOBSET, "export", _queue(None))
    export_finding = f"JobSet {_jobset_name(export_unqueued, 'export')}{UNQUEUED}"

    both = _also(export_unqueued, JOBSET, "convert", _queue(None))
    assert violations(both, "kueue-queue-fits", "prod") == [
        f"JobSet {_jobset_name(both, 'convert')}{UNQUEUED}",
        export_finding,
    ]

    elsewhere = _also(export_unqueued, JOBSET, "convert", _queue("queue-of-another-team"))
    assert violations(elsewhere, "kueue-queue-fits", "prod") == [export_finding]

    orphan = _object(
        LOCAL_QUEUE,
        "orphan-local-queue",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "orphan", "namespace": "tpu-rl"},
            "spec": {"clusterQueue": "not-in-this-stack"},
        },
    )
    dangling = _also(_with(export_unqueued, orphan), JOBSET, "convert", _queue("orphan"))
    assert violations(dangling, "kueue-queue-fits", "prod") == [export_finding]


def _tpu_flavors(*flavors):
    """The ClusterQueue's TPU group with these flavors, in this order."""
    return lambda r: r["inputs"]["spec"]["resourceGroups"][0].__setitem__("flavors", list(flavors))


def _tpu_quota(flavor: str, *entries):
    return {"name": flavor, "resources": list(entries)}


def _workers_get_at_most(plan: Plan, best: str) -> list[str]:
    return [
        f"JobSet {_jobset_name(plan, 'train')} (worker) asks for 32 google.com/tpu but ClusterQueue tpu-rl offers "
        f"at most {best} on a flavor its pods fit{NEVER}"
    ]


def test_a_flavor_the_pods_do_not_fit_is_skipped_not_the_rest():
    """A 2x4 flavor listed before the 4x8 one: the 4x8 workers are admitted on the second."""
    small = _object(
        FLAVOR,
        "kueue-tpu-2x4-flavor",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "tpu-rl-tpu-2x4"},
            "spec": {
                "nodeLabels": {
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                    "cloud.google.com/gke-tpu-topology": "2x4",
                }
            },
        },
    )
    slice_quota = {"name": "google.com/tpu", "nominalQuota": "32"}
    two = mutated(
        "prod",
        CQ,
        "kueue-cluster-queue",
        _tpu_flavors(_tpu_quota("tpu-rl-tpu-2x4", slice_quota), _tpu_quota("tpu-rl-tpu-slice", slice_quota)),
    )
    assert violations(_with(two, small), "kueue-queue-fits", "prod") == []
    only_small = mutated("prod", CQ, "kueue-cluster-queue", _tpu_flavors(_tpu_quota("tpu-rl-tpu-2x4", slice_quota)))
    assert violations(_with(only_small, small), "kueue-queue-fits", "prod") == _workers_get_at_most(only_small, "0")


@pytest.mark.parametrize(
    "entries",
    [(), ({"name": "google.com/tpu"},), ({"name": "cpu", "nominalQuota": "64"},)],
    ids=["no-resources", "no-nominal-quota", "another-resource-only"],
)
def test_a_flavor_without_a_quota_for_the_resource_offers_none(entries):
    plan = mutated("prod", CQ, "kueue-cluster-queue", _tpu_flavors(_tpu_quota("tpu-rl-tpu-slice", *entries)))
    assert violations(plan, "kueue-queue-fits", "prod") == _workers_get_at_most(plan, "0")
