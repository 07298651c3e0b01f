"""What a step's pods say while it waits and after it failed (plain functions of the API's objects).

- **Unschedulable**: a pod whose ``PodScheduled`` condition is ``False`` with reason ``Unschedulable`` (the
  scheduler's ``FitError``, kube-scheduler ``schedule_one.go`` ``handleSchedulingFailure``), explained by
  the newest ``FailedScheduling`` event (the scheduler) and the cluster autoscaler's ``NotTriggerScaleUp``
  (no node group can fit it: max size, selectors; upstream ``EventingScaleUpStatusProcessor``),
  ``FailedScaleUp`` (GKE's autoscaler: ``Node scale up in zones %v associated with this pod failed: %v``,
  e.g. ``GCE out of resources``, ``GCE quota exceeded``) or ``TriggeredScaleUp`` (a node is coming). The
  wait (``workloads.observe.waiting``) fails a step whose pods stay unschedulable for
  ``tpu-rl:workflow.unschedulableTimeout``.
- **OOMKilled**: a container the kernel's OOM killer ended (``state.terminated.reason: OOMKilled``, exit
  137), named in the step's failure with the key that raises its memory.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from core.machines import machine_family
from core.names import CPU_POOL, NODEPOOL_LABEL, TPU_ACCELERATOR_LABEL
from core.printed_commands import kubectl
from core.tpu import Capacity, TpuVersionName
from infra.k8s.live_objects import Event, Pod

AUTOSCALER_REASONS = ("FailedScaleUp", "NotTriggerScaleUp", "TriggeredScaleUp")


@dataclass(frozen=True)
class Stuck:
    """A pod the scheduler cannot place."""

    pod: str
    pool: str
    """The node pool its selector names (``cpu-np``), or ``the TPU slice pool``."""
    message: str
    """The scheduler's reason (the condition's message)."""


def pool_of(pod: Pod) -> str:
    selector = pod.spec.node_selector
    if TPU_ACCELERATOR_LABEL in selector:
        return "the TPU slice pool"
    return selector.get(NODEPOOL_LABEL) or "any pool"


def unschedulable(pods: list[Pod]) -> list[Stuck]:
    """The pods the scheduler has found no node for, by name."""
    stuck = []
    for pod in pods:
        if pod.status.phase != "Pending":
            continue
        for cond in pod.status.conditions:
            if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == "Unschedulable":
                stuck.append(Stuck(pod.metadata.name or "?", pool_of(pod), cond.message))
    return sorted(stuck, key=lambda s: s.pod)


_NEVER = datetime.datetime.min.replace(tzinfo=datetime.UTC)


def newest_reasons(events: list[Event], pod: str) -> dict[str, str]:
    """Reason -> message of the newest scheduler and autoscaler events on ``pod``."""
    found: dict[str, tuple[datetime.datetime, str]] = {}
    for event in events:
        if event.involved_object.kind != "Pod" or event.involved_object.name != pod:
            continue
        reason = event.reason
        if reason != "FailedScheduling" and reason not in AUTOSCALER_REASONS:
            continue
        when = event.when or _NEVER
        if reason not in found or when >= found[reason][0]:
            found[reason] = (when, event.message)
    return {reason: message for reason, (_when_, message) in found.items()}


def pool_fix(pool: str, *, capacity: Capacity, cpu_machine: str, version: TpuVersionName, context: str) -> str:
    """What to do about a pool that cannot take a step's pod (``version``: the slice's TPU version,
    ``tpu-rl:tpu.version``; ``context``: the stack's cluster's kubeconfig context, which the command names)."""
    if pool == CPU_POOL:
        family = machine_family(cpu_machine).upper()
        return (
            f"cpu-np cannot add another {cpu_machine} node: raise tpu-rl:cpuPool.maxNodes, request more {family}_CPUS "
            "quota in the region, or choose another tpu-rl:cpuPool.machineType if the zone is out of it"
        )
    if pool == "the TPU slice pool":
        if capacity == Capacity.RESERVATION:
            return (
                "the slice's nodes are not all up: check the reservation (tpu-rl:tpu.reservation) and "
                f"`{kubectl(context, 'get', 'nodes', '-l', TPU_ACCELERATOR_LABEL)}`"
            )
        return (
            f"GKE cannot get {capacity} TPU {version} capacity in gcp:zone now: try again later, another zone, or "
            "another tpu-rl:tpu.capacity"
        )
    return "check the pod's node selector and tolerations against the node pools"


def explain_unschedulable(stuck: Stuck, reasons: dict[str, str], fix: str) -> str:
    """One sentence: the pod, its pool, the scheduler's and the autoscaler's words (printable since they were
    read: ``infra.k8s.live_objects``), the fix."""
    scheduler = (reasons.get("FailedScheduling") or stuck.message)[:300].rstrip(".")
    parts = [f"pod {stuck.pod[:100]} (pool {stuck.pool}): scheduler: {scheduler}"]
    for reason in AUTOSCALER_REASONS:
        if reason in reasons:
            parts.append(f"autoscaler {reason}: {reasons[reason][:300].rstrip('.')}")
            break
    return "; ".join(parts) + f". {fix}"


def oom_killed(pods: list[Pod]) -> list[tuple[str, str]]:
    """(pod, container) of every container the OOM killer ended (now or in its last restart)."""
    found = []
    for pod in pods:
        name = pod.metadata.name or "?"
        for container in [*pod.status.init_container_statuses, *pod.status.container_statuses]:
            for state in (container.state, container.last_state):
                if state.terminated is not None and state.terminated.reason == "OOMKilled":
                    found.append((name, container.name or "?"))
                    break
    return sorted(set(found))


def image_digests(pods: list[Pod]) -> dict[str, str]:
    """Image reference -> the digest the kubelet ran it as (``status.containerStatuses[].imageID``, e.g.
    ``us-docker.pkg.dev/...@sha256:...``), from the pods' specs and statuses; a container whose status has no
    ``@sha256:`` ID is left out (it never started, or the runtime did not say)."""
    found: dict[str, str] = {}
    for pod in pods:
        images = {c.name: c.image for c in [*pod.spec.init_containers, *pod.spec.containers]}
        for container in [*pod.status.init_container_statuses, *pod.status.container_statuses]:
            image, ran = images.get(container.name), container.image_id
            if image and "@sha256:" in ran:
                found.setdefault(image, ran.removeprefix("docker-pullable://"))
    return dict(sorted(found.items()))
