"""What the live object of a step says, and what the next `pulumi up` does about it (plain functions).

Pulumi cannot tell a *failed* step from a finished one: an awaited Job or JobSet that ended
Failed was created, so the next `up` sees no diff. Before registering a step the program reads
its live object:

- it ended Failed: its UID becomes the step's ``replacement_trigger`` and is recorded in the new
  object's ``tpu-rl/retry-of`` annotation, so Pulumi replaces it (a retry, resuming from the
  checkpoints in the same output path); a completed retry keeps the same marker, so the
  following `up` is a no-op;
- it is still running (a Ctrl-C, a dropped connection or a Pulumi timeout interrupted the last
  `up`): nothing changes, and the engine's update of a resource with init errors re-attaches
  to it (``pkg/resource/deploy/step_generator.go``: "generate an empty update step to attempt
  to continue awaiting initialization"; the provider's ``await.Update`` awaits it again);
- it does not exist: it is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RETRY_ANNOTATION = "tpu-rl/retry-of"


@dataclass(frozen=True)
class LiveStep:
    """The parts of a live Job or JobSet the program decides on."""

    state: str
    """absent | running | succeeded | failed."""
    name: str = ""
    uid: str = ""
    retry_of: str = ""
    reason: str = ""
    message: str = ""
    deadline_seconds: int | None = None
    max_restarts: int | None = None


ABSENT = LiveStep("absent")


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The object's condition of type `kind` when it is True."""
    for entry in status.get("conditions") or []:
        if isinstance(entry, dict) and entry.get("type") == kind and entry.get("status") == "True":
            return entry
    return None


def live_step(obj: dict[str, Any] | None) -> LiveStep:
    """Interpret a live Job or JobSet (None = it does not exist)."""
    if not obj:
        return ABSENT
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    if obj.get("kind") == "JobSet":
        terminal = status.get("terminalState") or ""
        state = {"Failed": "failed", "Completed": "succeeded"}.get(terminal, "running")
        failed = condition(status, "Failed") or {}
        jobs = spec.get("replicatedJobs") or [{}]
        deadline = ((jobs[0].get("template") or {}).get("spec") or {}).get("activeDeadlineSeconds")
        restarts = (spec.get("failurePolicy") or {}).get("maxRestarts")
    else:
        failed = condition(status, "Failed") or {}
        state = "failed" if failed else "succeeded" if condition(status, "Complete") else "running"
        deadline = spec.get("activeDeadlineSeconds")
        restarts = spec.get("backoffLimit")
    return LiveStep(
        state=state,
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        retry_of=str(annotations.get(RETRY_ANNOTATION) or ""),
        reason=str(failed.get("reason") or ""),
        message=str(failed.get("message") or ""),
        deadline_seconds=deadline if isinstance(deadline, int) else None,
        max_restarts=restarts if isinstance(restarts, int) else None,
    )


def retry_marker(live: LiveStep) -> str:
    """UID of a run that ended Failed; otherwise the marker the live run was created with ("" if none)."""
    if live.state == "failed":
        return live.uid
    return live.retry_of


def carried_over(live: LiveStep, kind: str, deadline: int, max_restarts: int) -> list[str]:
    """Operational values a retry of ``live`` would keep although the config changed them.

    Pulumi sets every ``ignoreChanges`` path of a replacement to the old value
    (``step_generator.go``: ``processIgnoreChanges`` runs before the replacement is planned), so a
    retry keeps the failed run's deadline and restarts.
    """
    if live.state != "failed":
        return []
    differences = []
    if live.deadline_seconds is not None and live.deadline_seconds != deadline:
        differences.append(f"deadline {live.deadline_seconds} s (configured {deadline} s)")
    if kind == "JobSet" and live.max_restarts is not None and live.max_restarts != max_restarts:
        differences.append(f"maxRestarts {live.max_restarts} (configured {max_restarts})")
    return differences


def running_elsewhere(items: list[dict[str, Any]], current: str) -> list[str]:
    """Names of other training runs of this cluster still running (they hold the TPU slice)."""
    names = []
    for item in items:
        live = live_step(item)
        if live.name and live.name != current and live.state == "running":
            names.append(live.name)
    return sorted(names)
