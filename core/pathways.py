"""The Pathways head's size: the one home of its containers' resources (xpk's), which the training
JobSet's head pod carries (``workloads.build.manifests``) and the cpu-np rule checks a machine against
(``core.config.rules``)."""

from __future__ import annotations

from typing import Any

from core.requests import container_requests

HEAD_RESOURCES: dict[str, dict[str, dict[str, str]]] = {
    "proxy": {"limits": {"cpu": "16", "memory": "100Gi"}},
    "rm": {"limits": {"cpu": "8", "memory": "32Gi"}},
    "workload": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"cpu": "24", "memory": "100Gi"}},
}
"""Part of the head -> its ``resources``, as xpk sets them (the proxy and the resource manager are native
sidecars: their limits are their requests, and they run beside the workload container)."""


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
