"""Kueue as the stack installs it, pinned, and every pair that must agree cross-checked: queue names, the
flavors' node labels and the pods' node selectors and pools, the quotas and the pools and pod sets, the
manager configuration and what Kueue 0.17.1 accepts. Pure: builders only (fast enough for mutation runs)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
import yaml

from core.config.values import ConfigError
from core.machines import MachineShape, machine_shape
from core.names import CPU_FLAVOR, CPU_POOL, NODEPOOL_LABEL, QUEUE_LABEL, SYSTEM_POOL, TPU_FLAVOR
from core.requests import allocatable, canonical_bytes, canonical_millis, pod_requests, quantity
from infra.gcp.gke_spec import PoolSite, cpu_pool_args, system_pool_args, tpu_pool_args
from infra.k8s import kueue
from infra.k8s.manifests import namespace_manifest
from tests.lifecycle_walk import settings
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

PROD = settings("prod", [])
DEV = settings("dev", [])
LABELS = {"app.kubernetes.io/name": "tpu-rl"}
STACKS = [
    PROD,
    DEV,
    settings(
        "prod",
        [
            "tpu-rl:tpu.slices=2",
            "tpu-rl:training.iciExpertParallelism=1",
            "tpu-rl:training.rolloutTensorParallelism=32",
        ],
    ),
    settings("prod", ["tpu-rl:cpuPool.maxNodes=9"]),
]


def jobset_pod_sets(jobset: Mapping[str, Any]) -> list[tuple[str, int, dict[str, float]]]:
    """Kueue's pod sets of a JobSet: (replicated Job, pods, requests of one pod); a replicated Job's pods
    are ``replicas x min(parallelism, completions)`` (Kueue ``jobset_controller.go`` ``PodSets``)."""
    sets = []
    for job in jobset["spec"]["replicatedJobs"]:
        spec = job["template"]["spec"]
        parallelism = spec.get("parallelism", 1)
        count = job.get("replicas", 1) * min(parallelism, spec.get("completions", parallelism))
        sets.append((job["name"], count, pod_requests(spec["template"]["spec"])))
    return sets


def total(pod_sets: Iterable[tuple[str, int, dict[str, float]]]) -> dict[str, float]:
    """What a workload asks for in all: every pod set's requests times its pods."""
    found: dict[str, float] = {}
    for _name, count, asked in pod_sets:
        for name, amount in asked.items():
            found[name] = found.get(name, 0.0) + amount * count
    return found


def queue_objects(s):
    return kueue.tpu_flavor(s, LABELS), kueue.cpu_flavor(LABELS), kueue.cluster_queue(s, LABELS)


def pods(step):
    return [job["template"]["spec"]["template"]["spec"] for job in step.manifest["spec"]["replicatedJobs"]]


def shape(machine_type: str) -> MachineShape:
    found = machine_shape(machine_type)
    assert found is not None, f"{machine_type} is not a known machine type"
    return found


def test_the_objects_as_pinned():
    tpu, cpu, cq = queue_objects(PROD)
    assert tpu == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "tpu-rl-tpu-slice", "labels": LABELS},
        "spec": {
            "nodeLabels": {
                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": "4x8",
            },
            "nodeTaints": [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}],
        },
    }
    assert cpu["spec"] == {
        "nodeLabels": {"cloud.google.com/gke-nodepool": "cpu-np"},
        "nodeTaints": [{"key": "tpu-rl/pool", "value": "cpu-np", "effect": "NoSchedule"}],
    }
    # n2-standard-64: 64 - 0.23 cores and 256 GiB - 11.88 GiB - 100 MiB allocatable per node, 4 nodes; 8 workers of
    # 8 cores and 64 GiB each.
    assert cq["spec"] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tpu-rl"}},
        "resourceGroups": [
            {
                "coveredResources": ["google.com/tpu", "cpu", "memory"],
                "flavors": [
                    {
                        "name": "tpu-rl-tpu-slice",
                        "resources": [
                            {"name": "google.com/tpu", "nominalQuota": "32"},
                            {"name": "cpu", "nominalQuota": "64"},  # 8 workers x 8000m, as the API server writes it
                            {"name": "memory", "nominalQuota": "512Gi"},  # 8 x 65536Mi
                        ],
                    },
                    {
                        "name": "tpu-rl-cpu-np",
                        "resources": [
                            {"name": "google.com/tpu", "nominalQuota": "0"},
                            {"name": "cpu", "nominalQuota": "255080m"},  # 4 nodes x 63770m
                            {"name": "memory", "nominalQuota": "999512Mi"},  # 4 x 249878Mi
                        ],
                    },
                ],
            },
        ],
    }
    assert kueue.local_queue(PROD, LABELS) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "tpu-rl", "labels": LABELS, "namespace": "tpu-rl"},
        "spec": {"clusterQueue": "tpu-rl"},
    }


@pytest.mark.parametrize("s", STACKS)
def test_every_step_is_queued_to_the_stacks_local_queue_and_it_to_the_cluster_queue(s):
    local = kueue.local_queue(s, LABELS)
    for step in plan_workflow(s).steps:
        assert step.manifest["metadata"]["labels"][QUEUE_LABEL] == local["metadata"]["name"]
        assert step.manifest["metadata"]["namespace"] == local["metadata"]["namespace"] == s.namespace
        assert "suspend" not in step.manifest["spec"], "Kueue's webhook suspends it; the program never sets it"
        for pod in pods(step):
            assert QUEUE_LABEL not in pod.get("labels", {}), "the JobSet is the workload, not its pods"
    cq = kueue.cluster_queue(s, LABELS)
    assert local["spec"]["clusterQueue"] == cq["metadata"]["name"]
    # The ClusterQueue admits the workflow's namespace: Kubernetes labels every namespace with its name.
    namespace = namespace_manifest(s.namespace, {})
    selector = cq["spec"]["namespaceSelector"]["matchLabels"]
    assert selector == {"kubernetes.io/metadata.name": namespace["metadata"]["name"]}


@pytest.mark.parametrize("s", STACKS)
def test_the_flavors_are_the_pods_node_selectors_and_the_pools_labels(s):
    """Kueue merges an assigned flavor's node labels into the pod template (podset.Merge): equal values keep
    the program's selectors untouched; a different value would fail the workload (FailedToStart)."""
    tpu, cpu, _ = queue_objects(s)
    plan = plan_workflow(s)
    head, worker = pods(plan.train)
    assert (
        worker["nodeSelector"]
        == tpu["spec"]["nodeLabels"]
        == tpu_pool_args(PoolSite.of(s), "p", s.slice, s.tpu, "sa")["node_config"]["labels"]
    )
    for pod in (head, *pods(plan.convert), *pods(plan.export)):
        assert (
            pod["nodeSelector"]
            == cpu["spec"]["nodeLabels"]
            == {NODEPOOL_LABEL: cpu_pool_args(PoolSite.of(s), s.cpu_pool, "sa")["name"]}
        )
    assert cpu_pool_args(PoolSite.of(s), s.cpu_pool, "sa")["name"] == CPU_POOL


def tolerates(pod: dict, taint: dict) -> bool:
    """Whether ``pod`` tolerates ``taint`` (Kubernetes ``Toleration.ToleratesTaint``: an empty effect matches every
    effect; ``Exists`` any value, ``Equal`` (the default) the same value)."""
    for toleration in pod.get("tolerations", []):
        if toleration.get("effect") not in (None, "", taint["effect"]) or toleration.get("key") != taint["key"]:
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value") == taint["value"]:
            return True
    return False


def assigned_flavor(cq: dict, flavors: dict[str, dict], pod: dict) -> str | None:
    """The flavor Kueue 0.17.8 gives a pod set (``flavorassigner.go`` ``checkFlavorForPodSets``): the group's first
    flavor whose ``NoSchedule`` taints the pod tolerates and whose node labels its node selector does not contradict on
    the flavor's own keys (``flavorSelector``); quota aside."""
    (group,) = cq["spec"]["resourceGroups"]
    for entry in group["flavors"]:
        flavor = flavors[entry["name"]]["spec"]
        if not all(tolerates(pod, taint) for taint in flavor.get("nodeTaints", [])):
            continue
        selector = pod.get("nodeSelector", {})
        if all(selector.get(key, value) == value for key, value in flavor["nodeLabels"].items()):
            return str(entry["name"])
    return None


@pytest.mark.parametrize("s", STACKS)
def test_each_pod_set_gets_the_flavor_of_its_own_pool_whatever_it_asks_for(s):
    """One resource group, two tainted flavors: the workers (chips, cpu and memory) get the TPU flavor, the head and
    the CPU steps the cpu-np flavor, and each flavor's node labels are the pod's own node selector (Kueue merges them
    into the template, ``podset.Merge``: a second flavor's labels would contradict them and the pod would never
    schedule, which is why two groups, one per flavor, would not do)."""
    tpu, cpu, cq = queue_objects(s)
    flavors = {tpu["metadata"]["name"]: tpu, cpu["metadata"]["name"]: cpu}
    (group,) = cq["spec"]["resourceGroups"]
    for step in plan_workflow(s).steps:
        for job in step.manifest["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            name = assigned_flavor(cq, flavors, pod)
            want = tpu if job["name"] == "worker" else cpu
            assert name == want["metadata"]["name"], f"{step.step}/{job['name']}"
            assert {k: pod["nodeSelector"][k] for k in want["spec"]["nodeLabels"]} == want["spec"]["nodeLabels"]
        for name, _count, asked in jobset_pod_sets(step.manifest):
            assert set(asked) <= set(group["coveredResources"]), f"{step.step}/{name} asks for an uncovered resource"
    for entry in group["flavors"]:
        assert [r["name"] for r in entry["resources"]] == group["coveredResources"], "Kueue: every flavor, in order"


def _quota(cq, resource, flavor=CPU_FLAVOR):
    for group in cq["spec"]["resourceGroups"]:
        for entry in group["flavors"]:
            for quota in entry["resources"]:
                if entry["name"] == flavor and quota["name"] == resource:
                    return quantity(quota["nominalQuota"])
    raise KeyError(resource)


@pytest.mark.parametrize("s", STACKS)
def test_the_quotas_are_the_pools_and_one_training_fits_exactly(s):
    cq = kueue.cluster_queue(s, LABELS)
    plan = plan_workflow(s)
    training = total(jobset_pod_sets(plan.train.manifest))
    assert _quota(cq, "google.com/tpu", TPU_FLAVOR) == training["google.com/tpu"] == s.total_chips
    workers = next(asked for name, _n, asked in jobset_pod_sets(plan.train.manifest) if name == "worker")
    hosts = s.slice.hosts * s.tpu.slices
    for resource in ("cpu", "memory"):
        assert _quota(cq, resource, TPU_FLAVOR) == workers[resource] * hosts, "the workers' requests fit exactly"
    assert s.total_chips == s.tpu.slices * s.slice.hosts * s.slice.chips_per_vm
    node = allocatable(shape(s.cpu_pool.machine_type))
    assert _quota(cq, "cpu") == pytest.approx(math.floor(node["cpu"] * 1000) / 1000 * s.cpu_pool.max_nodes)
    assert _quota(cq, "memory") == math.floor(node["memory"] / 2**20) * 2**20 * s.cpu_pool.max_nodes
    for step in plan.steps:
        for name, _count, asked in jobset_pod_sets(step.manifest):
            for resource in ("cpu", "memory"):
                if resource in asked:
                    assert asked[resource] <= node[resource], f"{step.step}/{name} cannot fit one cpu-np node"
        needed = total(set_ for set_ in jobset_pod_sets(step.manifest) if set_[0] != "worker")
        for resource, amount in needed.items():
            assert amount <= _quota(cq, resource), f"{step.step} would never be admitted ({resource})"


def test_allocatable_follows_gkes_reservations():
    n2 = allocatable(shape("n2-standard-64"))
    assert n2["cpu"] == pytest.approx(64 - (0.06 + 0.01 + 2 * 0.005 + 60 * 0.0025))
    reserved_gib = 4 * 0.25 + 4 * 0.20 + 8 * 0.10 + 112 * 0.06 + (256 - 128) * 0.02
    assert n2["memory"] == pytest.approx((256 - reserved_gib) * 2**30 - 100 * 2**20)
    small = allocatable(shape("e2-standard-2"))
    assert small["cpu"] == pytest.approx(2 - 0.07)
    assert small["memory"] == pytest.approx((8 - 1 - 0.8) * 2**30 - 100 * 2**20)


def test_pod_requests_follow_the_schedulers_formula():
    """Containers + native sidecars, or an init container with the sidecars started before it if more;
    limits stand in for missing requests (component-helpers PodRequests; Kueue UseLimitsAsMissingRequestsInPod)."""
    head, worker = pods(plan_workflow(PROD).train)
    assert pod_requests(head) == {"cpu": 16 + 8 + 8, "memory": (100 + 32 + 64) * 2**30}
    assert pod_requests(worker) == {"google.com/tpu": 4, "cpu": 8, "memory": 64 * 2**30}
    init_heavy = {
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "setup", "resources": {"requests": {"cpu": "10"}}},
        ],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}],
    }
    assert pod_requests(init_heavy) == {"cpu": 11}, "setup runs beside the sidecar started before it"
    assert quantity("500m") == 0.5 and quantity("2Gi") == 2**31 and quantity("1k") == 1000
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("100GB")


def test_the_manager_configuration():
    config = kueue.manager_config(PROD)
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and config["kind"] == "Configuration"
    # v1beta2 has no `enable` (decoded strictly: an unknown field stops Kueue); the block turns it on. The
    # recovery timeout would default to the timeout (apis/config/v1beta2/defaults.go); it is set to cover a
    # TPU host maintenance event under a running step (up to a few hours, read as 4 h) plus a start.
    assert config["waitForPodsReady"] == {
        "timeout": "30m",
        "recoveryTimeout": "4h30m",
        "blockAdmission": False,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 0},
    }
    assert config["integrations"] == {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}
    assert config["webhook"] == {"port": 9443} and config["health"] == {"healthProbeBindAddress": ":8081"}
    flex = settings("dev", ["tpu-rl:tpu.capacity=flex-start"])
    assert kueue.manager_config(flex)["waitForPodsReady"]["timeout"] == "2h"
    assert kueue.manager_config(flex)["waitForPodsReady"]["recoveryTimeout"] == "6h"
    custom = settings("prod", ["tpu-rl:kueue.podsReadyTimeout=45m"])
    assert kueue.manager_config(custom)["waitForPodsReady"]["timeout"] == "45m"
    assert kueue.manager_config(custom)["waitForPodsReady"]["recoveryTimeout"] == "4h45m", "follows the timeout"
    own = settings("prod", ["tpu-rl:kueue.podsReadyTimeout=45m", "tpu-rl:kueue.recoveryTimeout=5h"])
    assert kueue.manager_config(own)["waitForPodsReady"]["recoveryTimeout"] == "5h"
    values = kueue.helm_values(PROD)
    assert yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"]) == config
    assert values["controllerManager"] == {"nodeSelector": {NODEPOOL_LABEL: SYSTEM_POOL}}
    assert system_pool_args(PoolSite.of(PROD), PROD.system_pool, "sa")["name"] == SYSTEM_POOL, (
        "the controller runs on the system pool"
    )


def test_kueue_settings_and_their_rules():
    assert (PROD.kueue.install, PROD.kueue.queue, PROD.kueue.version) == (True, "tpu-rl", "0.17.8")
    assert (PROD.kueue.pods_ready_timeout, PROD.kueue.admission_timeout) == (1800, 900)
    off = settings("prod", ["tpu-rl:kueue.enabled=false"])
    assert (off.kueue.install, off.kueue.queue) == (False, None)
    assert QUEUE_LABEL not in plan_workflow(off).train.manifest["metadata"]["labels"]
    elsewhere = settings("prod", ["tpu-rl:kueue.enabled=false", "tpu-rl:kueue.queue=team-queue"])
    assert (elsewhere.kueue.install, elsewhere.kueue.queue) == (False, "team-queue")
    assert plan_workflow(elsewhere).train.manifest["metadata"]["labels"][QUEUE_LABEL] == "team-queue"
    with pytest.raises(ConfigError, match='tpu-rl:kueue.queue = "team-queue" is invalid: names a LocalQueue'):
        settings("prod", ["tpu-rl:kueue.queue=team-queue"])
    with pytest.raises(ConfigError, match="tpu-rl:cpuPool.machineType .* has no known size"):
        settings("prod", ["tpu-rl:cpuPool.machineType=n2-custom-64-262144"])
    assert (
        settings("prod", ["tpu-rl:cpuPool.machineType=n2-custom-64-262144", "tpu-rl:kueue.enabled=false"]).kueue.queue
        is None
    )


@pytest.mark.pure
@pytest.mark.parametrize(
    ("millis", "written"),
    [
        (0, "0"),
        (1, "1m"),
        (500, "500m"),
        (1000, "1"),
        (64000, "64"),
        (62500, "62500m"),
        (1500, "1500m"),
        (2_000_000, "2k"),
        (255080, "255080m"),
        (10, "10m"),
        (-3000, "-3"),
    ],
)
def test_a_decimal_quota_is_written_as_the_api_server_writes_it_back(millis, written):
    """apimachinery v0.34.4 ``amount.go`` ``AsCanonicalBytes`` (the local cluster's API server and Kueue's conversion
    webhook agree: tests/test_local_engine.py previews no change of the ClusterQueue after its `up`)."""
    assert canonical_millis(millis) == written
    assert quantity(written) * 1000 == millis


@pytest.mark.pure
@pytest.mark.parametrize(
    ("count", "written"),
    [
        (0, "0"),
        (512, "512"),
        (1023, "1023"),
        (1024, "1Ki"),
        (1536 * 2**20, "1536Mi"),
        (2**39, "512Gi"),
        (999512 * 2**20, "999512Mi"),
        (3 * 2**60, "3Ei"),
        (1025, "1025"),
    ],
)
def test_a_binary_quota_is_written_as_the_api_server_writes_it_back(count, written):
    assert canonical_bytes(count) == written
    assert quantity(written) == count
