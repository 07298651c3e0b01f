"""What a step's pods say while it waits and after it failed (plain functions of the API's objects).

- **Unschedulable**: a pod whose ``PodScheduled`` condition is ``False`` with reason ``Unschedulable`` (the
  scheduler's ``FitError``, kube-scheduler ``schedule_one.go`` ``handleSchedulingFailure``), explained by
  the newest ``FailedScheduling`` event (the scheduler) and the cluster autoscaler's ``NotTriggerScaleUp``
  (no node group can fit it: max size, selectors; upstream ``EventingScaleUpStatusProcessor``),
  ``FailedScaleUp`` (GKE's autoscaler: ``Node scale up in zones %v associated with this pod failed: %v``,
  e.g. ``GCE out of resources``, ``GCE quota exceeded``) or ``TriggeredScaleUp`` (a node is coming). The
  wait (``workloads.run.waiting``) fails a step whose pods stay unschedulable for
  ``tpu-rl:workflow.unschedulableTimeout``.
- **OOMKilled**: a container the kernel's OOM killer ended (``state.terminated.reason: OOMKilled``, exit
  137), named in the step's failure with the key that raises its memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.machines import machine_family
from core.names import CPU_POOL, NODEPOOL_LABEL, TPU_ACCELERATOR_LABEL
from core.redact import scrub

JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The JobSet controller labels every pod of a JobSet with its name (a step's pods are selected by it)."""
AUTOSCALER_REASONS = ("FailedScaleUp", "NotTriggerScaleUp", "TriggeredScaleUp")


@dataclass(frozen=True)
class Stuck:
    """A pod the scheduler cannot place."""

    pod: str
    pool: str
    """The node pool its selector names (``cpu-np``), or ``the TPU slice pool``."""
    message: str
    """The scheduler's reason (the condition's message)."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def pool_of(pod: dict[str, Any]) -> str:
    selector = _dict(_dict(pod.get("spec")).get("nodeSelector"))
    if TPU_ACCELERATOR_LABEL in selector:
        return "the TPU slice pool"
    return str(selector.get(NODEPOOL_LABEL) or "any pool")


def unschedulable(pods: list[dict[str, Any]]) -> list[Stuck]:
    """The pods the scheduler has found no node for, by name."""
    stuck = []
    for pod in pods:
        status = _dict(pod.get("status"))
        if status.get("phase") != "Pending":
            continue
        for cond in status.get("conditions") or []:
            cond = _dict(cond)
            if (
                cond.get("type") == "PodScheduled"
                and cond.get("status") == "False"
                and cond.get("reason") == ("Unschedulable")
            ):
                name = str(_dict(pod.get("metadata")).get("name") or "?")
                stuck.append(Stuck(name, pool_of(pod), str(cond.get("message") or "")))
    return sorted(stuck, key=lambda s: s.pod)


def _when(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


def newest_reasons(events: list[dict[str, Any]], pod: str) -> dict[str, str]:
    """Reason -> message of the newest scheduler and autoscaler events on ``pod``."""
    found: dict[str, tuple[str, str]] = {}
    for event in events:
        involved = _dict(event.get("involvedObject"))
        reason = str(event.get("reason") or "")
        if involved.get("kind") != "Pod" or involved.get("name") != pod:
            continue
        if reason != "FailedScheduling" and reason not in AUTOSCALER_REASONS:
            continue
        when = _when(event)
        if reason not in found or when >= found[reason][0]:
            found[reason] = (when, str(event.get("message") or ""))
    return {reason: message for reason, (_when_, message) in found.items()}


def pool_fix(pool: str, *, capacity: str, cpu_machine: str) -> str:
    """What to do about a pool that cannot take a step's pod."""
    if pool == CPU_POOL:
        family = machine_family(cpu_machine).upper()
        return (
            f"cpu-np cannot add another {cpu_machine} node: raise tpu-rl:cpuPool.maxNodes, request more {family}_CPUS "
            "quota in the region, or choose another tpu-rl:cpuPool.machineType if the zone is out of it"
        )
    if pool == "the TPU slice pool":
        if capacity == "reservation":
            return (
                "the slice's nodes are not all up: check the reservation (tpu-rl:tpu.reservation) and "
                "`kubectl get nodes -l cloud.google.com/gke-tpu-accelerator`"
            )
        return (
            f"GKE cannot get {capacity} TPU v6e capacity in gcp:zone now: try again later, another zone, or "
            "another tpu-rl:tpu.capacity"
        )
    return "check the pod's node selector and tolerations against the node pools"


def explain_unschedulable(stuck: Stuck, reasons: dict[str, str], fix: str) -> str:
    """One sentence: the pod, its pool, the scheduler's and the autoscaler's words, the fix."""
    scheduler = scrub(reasons.get("FailedScheduling") or stuck.message, limit=300).rstrip(".")
    parts = [f"pod {scrub(stuck.pod, limit=100)} (pool {stuck.pool}): scheduler: {scheduler}"]
    for reason in AUTOSCALER_REASONS:
        if reason in reasons:
            parts.append(f"autoscaler {reason}: {scrub(reasons[reason], limit=300).rstrip('.')}")
            break
    return "; ".join(parts) + f". {fix}"


def oom_killed(pods: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(pod, container) of every container the OOM killer ended (now or in its last restart)."""
    found = []
    for pod in pods:
        name = str(_dict(pod.get("metadata")).get("name") or "?")
        status = _dict(pod.get("status"))
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            container = _dict(container)
            for state in (_dict(container.get("state")), _dict(container.get("lastState"))):
                if _dict(state.get("terminated")).get("reason") == "OOMKilled":
                    found.append((name, str(container.get("name") or "?")))
                    break
    return sorted(set(found))


def image_digests(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Image reference -> the digest the kubelet ran it as (``status.containerStatuses[].imageID``, e.g.
    ``us-docker.pkg.dev/...@sha256:...``), from the pods' specs and statuses; a container whose status has no
    ``@sha256:`` ID is left out (it never started, or the runtime did not say)."""
    found: dict[str, str] = {}
    for pod in pods:
        spec, status = _dict(pod.get("spec")), _dict(pod.get("status"))
        images = {
            c.get("name"): c.get("image")
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            if isinstance(c, dict)
        }
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            if not isinstance(container, dict):
                continue
            image, ran = images.get(container.get("name")), str(container.get("imageID") or "")
            if isinstance(image, str) and "@sha256:" in ran:
                found.setdefault(image, ran.removeprefix("docker-pullable://"))
    return dict(sorted(found.items()))
