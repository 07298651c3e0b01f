"""What the local cluster holds before any workflow: its nodes as GKE names and shapes them, and the JobSet and
Kueue releases' own CRDs and webhook configurations (read from their Go modules, so the same files the built
controllers were released with), pointed at the controllers on loopback. Plain functions of plain values."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.machines import machine_shape
from core.names import (
    CPU_POOL,
    CPU_TAINT_KEY,
    CPU_TAINT_VALUE,
    NODEPOOL_LABEL,
    SYSTEM_POOL,
    TPU_ACCELERATOR_LABEL,
    TPU_TAINT_KEY,
    TPU_TAINT_VALUE,
    TPU_TOPOLOGY_LABEL,
)
from core.settings import Settings
from core.tpu import CATALOGUE, TpuVersionName

KWOK_NODE = ("kwok.x-k8s.io/node", "fake")
"""The annotation that hands a node to kwok (``--manage-nodes-with-annotation-selector``)."""
TPU_POOL = "tpu-np"


@dataclass(frozen=True)
class Shape:
    """The cluster's pools: a system node, CPU nodes and one TPU slice, as the default stack's config has them."""

    tpu_version: TpuVersionName = "v6e"
    tpu_machine: str = ""
    topology: str = ""
    cpu_machine: str = "n4-standard-64"
    cpu_nodes: int = 2
    system_machine: str = "e2-standard-8"

    @classmethod
    def of(cls, settings: Settings) -> Shape:
        """The pools of a stack's configuration."""
        return cls(
            tpu_version=settings.tpu.version,
            tpu_machine=settings.tpu.machine_type,
            topology=settings.tpu.topology,
            cpu_machine=settings.cpu_pool.machine_type,
            system_machine=settings.system_pool.machine_type,
        )

    @property
    def tpu(self) -> tuple[str, int, str, str]:
        """The slice: its machine type, chips per host, topology and GKE accelerator label."""
        version = CATALOGUE[self.tpu_version]
        machine = version.machine(self.tpu_machine or version.default_machine_type)
        assert machine is not None, self.tpu_machine
        return machine.name, machine.chips_per_vm, self.topology or machine.default_topology, version.gke_accelerator


def _chips(topology: str) -> int:
    chips = 1
    for side in topology.split("x"):
        chips *= int(side)
    return chips


def _node(
    name: str, pool: str, machine: str, labels: dict[str, str], taints: list[dict[str, str]], extra: dict[str, str]
) -> dict[str, Any]:
    shape = machine_shape(machine)
    cpu, memory = (shape.vcpus, int(shape.memory_gib)) if shape else (180, 720)
    capacity = {"cpu": str(cpu), "memory": f"{memory}Gi", "pods": "110", "ephemeral-storage": "500Gi", **extra}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE[0]: KWOK_NODE[1], "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": machine,
                "type": "kwok",
                NODEPOOL_LABEL: pool,
                **labels,
            },
        },
        "spec": {"taints": taints},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def nodes(shape: Shape) -> list[dict[str, Any]]:
    """One system node, ``cpu_nodes`` CPU nodes (tainted as the program's CPU pool is) and the slice's hosts, with
    GKE's TPU labels, taint and ``google.com/tpu`` capacity."""
    machine, chips_per_host, topology, accelerator = shape.tpu
    out = [_node("system-0", SYSTEM_POOL, shape.system_machine, {}, [], {})]
    cpu_taint = {"key": CPU_TAINT_KEY, "value": CPU_TAINT_VALUE, "effect": "NoSchedule"}
    out += [_node(f"cpu-{i}", CPU_POOL, shape.cpu_machine, {}, [cpu_taint], {}) for i in range(shape.cpu_nodes)]
    tpu_labels = {TPU_ACCELERATOR_LABEL: accelerator, TPU_TOPOLOGY_LABEL: topology}
    tpu_taint = {"key": TPU_TAINT_KEY, "value": TPU_TAINT_VALUE, "effect": "NoSchedule"}
    hosts = _chips(topology) // chips_per_host
    out += [
        _node(f"tpu-{i}", TPU_POOL, machine, tpu_labels, [tpu_taint], {"google.com/tpu": str(chips_per_host)})
        for i in range(hosts)
    ]
    return out


def _documents(path: Path) -> Iterator[dict[str, Any]]:
    yield from (d for d in yaml.safe_load_all(path.read_text()) if d)


def _loopback(client_config: dict[str, Any], port: int, ca: bytes) -> dict[str, Any]:
    """A webhook's service reference as the controller's loopback URL, trusted through the local CA."""
    path = client_config["service"].get("path", "/")
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca).decode()}


def crds(module_dir: Path, port: int, ca: bytes) -> list[dict[str, Any]]:
    """A controller release's CRDs as its kustomization (``config/components/crd``) makes them: its bases, with the
    conversion webhooks its patches turn on pointed at the controller on loopback."""
    folder = module_dir / "config/components/crd"
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    out = {d["metadata"]["name"]: d for r in kustomization["resources"] for d in _documents(folder / r)}
    for patch in kustomization.get("patches") or []:
        for doc in _documents(folder / patch["path"]):
            webhook = ((doc.get("spec") or {}).get("conversion") or {}).get("webhook")
            if webhook and doc["metadata"]["name"] in out:
                webhook = {**webhook, "clientConfig": _loopback(webhook["clientConfig"], port, ca)}
                out[doc["metadata"]["name"]]["spec"]["conversion"] = {"strategy": "Webhook", "webhook": webhook}
    return list(out.values())


def webhooks(module_dir: Path, prefix: str, port: int, ca: bytes) -> list[dict[str, Any]]:
    """A controller release's webhook configurations (``config/components/webhook/manifests.yaml``), each
    webhook's service reference turned into the controller's loopback URL with the local CA, names prefixed as the
    release's kustomization prefixes them."""
    out = []
    for doc in _documents(module_dir / "config/components/webhook/manifests.yaml"):
        doc["metadata"]["name"] = f"{prefix}-{doc['metadata']['name']}"
        for hook in doc.get("webhooks", []):
            hook["clientConfig"] = _loopback(hook["clientConfig"], port, ca)
        out.append(doc)
    return out


LOST_LABEL = "tpu-rl.local/lost"
"""Set on a node, kwok stops its heartbeats, as when its kubelet is gone (``parts.kwok_config``)."""
EXIT_ANNOTATION = "tpu-rl.local/exit-code"
"""Set on a running pod, kwok ends it (``pod_exit_stage``): its containers terminate with this code (the one named
by ``CONTAINER_ANNOTATION`` alone, the others with 0), the pod ``Succeeded`` for 0 and ``Failed`` otherwise."""
REASON_ANNOTATION = "tpu-rl.local/reason"
"""The terminated state's reason (``OOMKilled``); else ``Completed`` for 0 and ``Error``, as the kubelet writes."""
CONTAINER_ANNOTATION = "tpu-rl.local/container"
DISRUPTED_ANNOTATION = "tpu-rl.local/disrupted"
"""Set (to a reason, ``PreemptionByScheduler``), the ended pod also carries ``DisruptionTarget``, as Kubernetes
marks a pod it stops from outside."""


def pod_exit_stage() -> dict[str, Any]:
    """The kwok stage that plays a container's exit, as the kubelet reports it, when a test annotates the pod."""
    annotation = f'.metadata.annotations["{EXIT_ANNOTATION}"]'
    template = f"""{{{{ $now := Now }}}}
{{{{ $code := index .metadata.annotations "{EXIT_ANNOTATION}" }}}}
{{{{ $only := or (index .metadata.annotations "{CONTAINER_ANNOTATION}") "" }}}}
{{{{ $reason := or (index .metadata.annotations "{REASON_ANNOTATION}") (and (eq $code "0") "Completed") "Error" }}}}
containerStatuses:
{{{{ range $index, $item := .spec.containers }}}}
{{{{ $mine := or (eq $only "") (eq $only $item.name) }}}}
- image: {{{{ $item.image | Quote }}}}
  name: {{{{ $item.name | Quote }}}}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{{{ if $mine }}}}{{{{ $code }}}}{{{{ else }}}}0{{{{ end }}}}
      finishedAt: {{{{ $now | Quote }}}}
      reason: {{{{ if $mine }}}}{{{{ $reason | Quote }}}}{{{{ else }}}}"Completed"{{{{ end }}}}
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
conditions:
- type: Ready
  status: "False"
  lastTransitionTime: {{{{ $now | Quote }}}}
{{{{ with index .metadata.annotations "{DISRUPTED_ANNOTATION}" }}}}
- type: DisruptionTarget
  status: "True"
  reason: {{{{ . | Quote }}}}
  lastTransitionTime: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: {{{{ if eq $code "0" }}}}Succeeded{{{{ else }}}}Failed{{{{ end }}}}
"""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "tpu-rl-pod-exit"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {"key": annotation, "operator": "Exists"},
                ]
            },
            "weight": 10000,
            "delay": {"durationMilliseconds": 0},
            "next": {"delete": False, "statusTemplate": template},
        },
    }


def pod_stop_stage() -> dict[str, Any]:
    """The kwok stage that plays a kubelet stopping a running pod it is told to delete (an eviction, a drain, a
    preemption): its containers get SIGTERM and exit 143, the pod (``restartPolicy: Never``, as every step's) ends
    ``Failed``, and only then does kwok's own ``pod-delete`` stage remove it (``parts.kwok_config`` holds that stage
    back from running pods). Without it a deleted pod vanishes unended, and the Job controller counts no failure."""
    template = """{{ $now := Now }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 143
      finishedAt: {{ $now | Quote }}
      reason: "Error"
      startedAt: {{ $now | Quote }}
{{ end }}
conditions:
- type: Ready
  status: "False"
  lastTransitionTime: {{ $now | Quote }}
phase: Failed
"""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "tpu-rl-pod-stop"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                ]
            },
            "next": {"statusTemplate": template},
        },
    }
