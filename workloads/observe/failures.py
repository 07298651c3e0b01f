"""Turn a step that ended Failed into an error naming it, the reason, what its pods say and the logs command."""

from __future__ import annotations

from typing import Any

from core.errors import TpuRlError
from infra.k8s import live_objects
from workloads.observe.live_state import state_of
from workloads.specs.step_specs import Step

DETAIL = "tpu-rl.detail"
"""Key of what the failed step's pods say, added by the program's wait to the status it hands on."""


class StepFailedError(TpuRlError):
    """The step's JobSet ended Failed."""


def memory_limit(manifest: dict[str, Any], container: str) -> str:
    """The memory limit of ``container`` in a step's JobSet (``?`` when it has none)."""
    for rjob in manifest["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        for spec in [*pod.get("initContainers", []), *pod["containers"]]:
            if spec["name"] == container:
                return str(spec.get("resources", {}).get("limits", {}).get("memory") or "?")
    return "?"


def failure_detail(step: Step, oom: list[tuple[str, str]]) -> str:
    """What the failed step's pods say: a container the OOM killer ended, and the key that raises its memory."""
    if not oom:
        return ""
    pod, container = min(oom, key=lambda found: (found[1] != step.container, found))  # its own container first
    limit = memory_limit(step.manifest, container)
    return f"container {container[:63]} of pod {pod[:100]} was OOMKilled at its {limit} limit: {step.memory_fix}"


def check_step_status(kind: str, status: dict[str, Any] | None, namespace: str, name: str, logs_command: str) -> str:
    """Return the state of the status a step ended with (the program's wait's, or as the provider recorded it:
    outside data, parsed here, ``live_objects.jobset_status``); raise ``StepFailedError`` naming the object, the
    reason, what its pods say and the logs command."""
    parsed = live_objects.jobset_status(status, f"{kind} {namespace}/{name}")
    state, reason, message = state_of(parsed)
    if state != "failed":
        return state
    reason = reason[:60] or "Failed"  # the controller's text, printable since it was read
    message = (message[:300] or f"no message in the {kind}'s Failed condition").rstrip(".")
    detail = (status or {}).get(DETAIL)
    also = f"; {detail}" if isinstance(detail, str) and detail else ""
    raise StepFailedError(
        f"{kind} {namespace}/{name} failed ({reason}): {message}{also}. Read the logs with: {logs_command}"
    )
