"""Kueue as the tutorial's cluster has it (plain dicts, no Pulumi): the Helm chart's values and the
stack's queues.

Cluster Toolkit's blueprint installs Kueue 0.17.1 with a ClusterQueue and a LocalQueue
(``../shared/reference/cluster-toolkit.md`` §1.9); here the queues are sized to the stack's pools:

- two ResourceFlavors whose node labels are exactly the pods' node selectors: the TPU slice pool(s)
  (the workers) and ``cpu-np`` (the Pathways head, conversion, export), so Kueue's admission patch
  changes no selector the program applied (Kueue ``podset.Merge``: a different value would be a
  conflict and the workload would never start);
- one ClusterQueue with one resource group, chips, cpu and memory, and the two flavors in it, each with its
  pool's taint: Kueue gives a pod set the first flavor whose taints it tolerates and whose node labels its node
  selector matches (v0.17.8 ``flavorassigner.go`` ``checkFlavorForPodSets``: ``FindMatchingUntoleratedTaint`` on
  the flavor's ``nodeTaints``, then ``flavorSelector`` on the flavor's own label keys), so the TPU workers (they
  tolerate the TPU taint, and ask for chips, cpu and memory) get the TPU flavor and the head and the CPU steps
  (they tolerate cpu-np's) the cpu-np flavor, whatever they ask for. Two groups, one per flavor, would give a pod
  set that asks for chips and cpu both flavors' node labels, and it would never schedule. The TPU flavor's chip
  quota is every slice's chips (one training at a time: a second configuration queues behind the first), its cpu
  and memory the workers' requests; the cpu-np flavor has no chips, and cpu-np's allocatable at its maximum size;
- a LocalQueue in the workflow namespace, which every step's JobSet names (``kueue.x-k8s.io/queue-name``).

The manager configuration replaces the chart's whole default (a Helm value is one string), so it
repeats the chart's defaults we rely on (``charts/kueue/values.yaml`` at v0.17.1, the same at v0.17.8) and adds
``waitForPodsReady``: an admitted step whose pods are not all Ready within the timeout (``podsReadyTimeout``
after admission, ``recoveryTimeout`` after a running step's pods, once all Ready, stop being Ready: a JobSet
restart, a node repair; a restart before they were all Ready stays on ``podsReadyTimeout`` from the first
admission, ``workload_controller.go`` ``admittedNotReadyWorkload``) is evicted and, with ``backoffLimitCount: 0``,
deactivated at once (``reconcileNotReadyTimeout``, ``triggerDeactivation``), so it stops holding quota and never
re-queues in a loop nobody watches; `pulumi up` reports it and the next `up` runs the step again (training resumes
from its checkpoint).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import yaml

from core.kueue_manager import configuration
from core.machines import machine_shape
from core.names import (
    CLUSTER_QUEUE,
    CPU_FLAVOR,
    CPU_POOL,
    CPU_TAINT_KEY,
    CPU_TAINT_VALUE,
    LOCAL_QUEUE,
    NODEPOOL_LABEL,
    SYSTEM_POOL,
    TPU_ACCELERATOR_LABEL,
    TPU_FLAVOR,
    TPU_TAINT_KEY,
    TPU_TAINT_VALUE,
    TPU_TOPOLOGY_LABEL,
)
from core.pathways import WORKER_REQUESTS
from core.requests import allocatable, canonical_bytes, canonical_millis, quantity
from core.settings import Settings

API = "kueue.x-k8s.io/v1beta2"
CHART = "oci://registry.k8s.io/kueue/charts/kueue"
NAMESPACE = "kueue-system"
TPU_RESOURCE = "google.com/tpu"


def manager_config(settings: Settings) -> dict[str, Any]:
    """Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``, decoded strictly: no unknown field)."""
    return configuration(settings.kueue.pods_ready_timeout, settings.kueue.recovery_timeout)


def helm_values(settings: Settings) -> dict[str, Any]:
    """The chart's values: the controller on the system pool, and our manager configuration."""
    return {
        "controllerManager": {"nodeSelector": {NODEPOOL_LABEL: SYSTEM_POOL}},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(settings), sort_keys=False)},
    }


def _object(kind: str, name: str, labels: dict[str, str], spec: dict[str, Any], namespace: str | None = None):
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": API, "kind": kind, "metadata": metadata, "spec": spec}


TPU_NODE_TAINT = {"key": TPU_TAINT_KEY, "value": TPU_TAINT_VALUE, "effect": "NoSchedule"}
"""The TPU pools' taint (``infra.gcp.gke_spec`` ``TPU_TAINT``), as Kubernetes writes it."""
CPU_NODE_TAINT = {"key": CPU_TAINT_KEY, "value": CPU_TAINT_VALUE, "effect": "NoSchedule"}
"""cpu-np's taint (``infra.gcp.gke_spec`` ``CPU_TAINT``)."""


def tpu_flavor(settings: Settings, labels: dict[str, str]) -> dict[str, Any]:
    """The TPU slice pool(s): the workers' node selector (accelerator and topology) and the pools' taint."""
    node_labels = {TPU_ACCELERATOR_LABEL: settings.slice.gke_accelerator, TPU_TOPOLOGY_LABEL: settings.slice.topology}
    spec = {"nodeLabels": node_labels, "nodeTaints": [dict(TPU_NODE_TAINT)]}
    return _object("ResourceFlavor", TPU_FLAVOR, labels, spec)


def cpu_flavor(labels: dict[str, str]) -> dict[str, Any]:
    """cpu-np: the node selector of the Pathways head and the CPU steps, and the pool's taint."""
    spec = {"nodeLabels": {NODEPOOL_LABEL: CPU_POOL}, "nodeTaints": [dict(CPU_NODE_TAINT)]}
    return _object("ResourceFlavor", CPU_FLAVOR, labels, spec)


def workers_quota(settings: Settings) -> dict[str, str]:
    """What every TPU worker of a training requests beside its chips (``core.pathways.WORKER_REQUESTS``), in all."""
    workers = settings.slice.hosts * settings.tpu.slices
    return {
        "cpu": canonical_millis(round(quantity(WORKER_REQUESTS["cpu"]) * 1000) * workers),
        "memory": canonical_bytes(int(quantity(WORKER_REQUESTS["memory"])) // 2**20 * workers * 2**20),
    }


def cpu_quota(settings: Settings) -> dict[str, str]:
    """cpu-np's allocatable at its maximum size (whole millicores and MiB), written as the API server writes them."""
    shape = machine_shape(settings.cpu_pool.machine_type)
    if shape is None:  # the config rules refuse an unknown shape while Kueue is installed
        raise ValueError(f"{settings.cpu_pool.machine_type} has no known size")
    node = allocatable(shape)
    nodes = settings.cpu_pool.max_nodes
    return {
        "cpu": canonical_millis(math.floor(node["cpu"] * 1000) * nodes),
        "memory": canonical_bytes(math.floor(node["memory"] / 2**20) * nodes * 2**20),
    }


def cluster_queue(settings: Settings, labels: dict[str, str]) -> dict[str, Any]:
    """Every slice's chips with its workers' cpu and memory, and cpu-np's cpu and memory, for the workflow namespace
    only (the module's docstring)."""
    cpu, workers = cpu_quota(settings), workers_quota(settings)
    return _object(
        "ClusterQueue",
        CLUSTER_QUEUE,
        labels,
        {
            # null would admit no namespace; the workflow's namespace carries its name as a label (Kubernetes
            # sets kubernetes.io/metadata.name on every namespace).
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": settings.namespace}},
            "resourceGroups": [
                {
                    "coveredResources": [TPU_RESOURCE, "cpu", "memory"],
                    "flavors": [
                        {
                            "name": TPU_FLAVOR,
                            "resources": [
                                {"name": TPU_RESOURCE, "nominalQuota": str(settings.total_chips)},
                                {"name": "cpu", "nominalQuota": workers["cpu"]},
                                {"name": "memory", "nominalQuota": workers["memory"]},
                            ],
                        },
                        {
                            "name": CPU_FLAVOR,
                            "resources": [
                                {"name": TPU_RESOURCE, "nominalQuota": "0"},
                                {"name": "cpu", "nominalQuota": cpu["cpu"]},
                                {"name": "memory", "nominalQuota": cpu["memory"]},
                            ],
                        },
                    ],
                },
            ],
        },
    )


def local_queue(settings: Settings, labels: dict[str, str]) -> dict[str, Any]:
    return _object("LocalQueue", LOCAL_QUEUE, labels, {"clusterQueue": CLUSTER_QUEUE}, namespace=settings.namespace)


@dataclass(frozen=True)
class KueueObjects:
    """What the platform installs when Kueue is the stack's (``tpu-rl:kueue.install``): the chart's version and
    values, the flavors and the queues, built here from the settings so the component takes them as they are."""

    version: str
    helm_values: dict[str, Any]
    tpu_flavor: dict[str, Any]
    cpu_flavor: dict[str, Any]
    cluster_queue: dict[str, Any]
    local_queue: dict[str, Any]


def kueue_objects(settings: Settings, labels: dict[str, str]) -> KueueObjects | None:
    """The stack's Kueue (None when the cluster's own Kueue is used: nothing installed)."""
    if not settings.kueue.install:
        return None
    return KueueObjects(
        version=settings.kueue.version,
        helm_values=helm_values(settings),
        tpu_flavor=tpu_flavor(settings, labels),
        cpu_flavor=cpu_flavor(labels),
        cluster_queue=cluster_queue(settings, labels),
        local_queue=local_queue(settings, labels),
    )
