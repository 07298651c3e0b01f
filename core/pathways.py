"""The Pathways head's size and the Pathways ports: the one home of its containers' resources (xpk's), which
the training JobSet's head pod carries (``workloads.specs.step_manifests``) and the cpu-np rule checks a machine
against (``core.config.rules``), and of the ports the JobSet, the firewall and the NetworkPolicy use."""

from __future__ import annotations

from typing import Any

from core.requests import container_requests

# Pathways ports (xpk pathways_workload_create.yaml.j2, gcluster pathways_jobset.tmpl). The head and the
# workers run with hostNetwork, so each listens on its node's address.
PROXY_PORT = 29000
"""The proxy serves the JAX client (JAX_BACKEND_TARGET)."""
RESOURCE_MANAGER_PORT = 29001
"""The resource manager serves the proxy and the workers (--resource_manager_address)."""
RESOURCE_MANAGER_EXTRA_PORT = 29002
WORKER_PORT = 29005
WORKER_EXTRA_PORTS = (29006, 8471, 8080)
"""The worker's second port, the TPU runtime's slice builder (8471, between the hosts of a slice) and
megascale (8080, between slices)."""
PORTS = (PROXY_PORT, RESOURCE_MANAGER_PORT, RESOURCE_MANAGER_EXTRA_PORT, WORKER_PORT, *WORKER_EXTRA_PORTS)
"""Every port the head and the workers talk on (the firewall and the NetworkPolicy allow these)."""

HEAD_RESOURCES: dict[str, dict[str, dict[str, str]]] = {
    "proxy": {"limits": {"cpu": "16", "memory": "100Gi"}},
    "rm": {"limits": {"cpu": "8", "memory": "32Gi"}},
    "workload": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"cpu": "24", "memory": "100Gi"}},
}
"""Part of the head -> its ``resources``, as xpk sets them (the proxy and the resource manager are native
sidecars: their limits are their requests, and they run beside the workload container)."""


WORKER_REQUESTS: dict[str, str] = {"cpu": "8", "memory": "64Gi"}
"""What a TPU worker requests beside its host's chips: a floor, not a limit. Without it the pod asks for chips only,
so its QoS class is BestEffort, the first the kubelet evicts under node pressure (Kubernetes "Node-pressure
Eviction"), and neither the scheduler nor Kueue counts what it uses. A ct6e-standard-4t VM has 180 vCPUs and 720 GB:
the floor leaves GKE's DaemonSets room beside it, and no limit caps the Pathways server's host buffers (a checkpoint's
shards pass through them to GCS). xpk, Cluster Toolkit and pathways-job set none."""


def resources(part: str) -> dict[str, Any]:
    """A copy of one head container's ``resources``."""
    return {kind: dict(values) for kind, values in HEAD_RESOURCES[part].items()}


def head_requests() -> dict[str, float]:
    """What the head pod requests in all: cores and bytes (Kubernetes counts a sidecar's limits as its
    requests when it has none)."""
    total: dict[str, float] = {}
    for part in HEAD_RESOURCES:
        for name, amount in container_requests({"resources": HEAD_RESOURCES[part]}).items():
            total[name] = total.get(name, 0.0) + amount
    return total
