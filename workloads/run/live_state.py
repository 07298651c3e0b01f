"""What the live object of a step says, and what the next `pulumi up` does about it (plain functions).

Pulumi cannot tell a *failed* step from a finished one: an awaited JobSet that ended
Failed was created, so the next `up` sees no diff. Before registering a step the program reads
its live object and passes a *retry marker* as the step's ``replacement_trigger``:

- it ended Failed (or Completed with incomplete output): its UID is the marker, so Pulumi replaces
  it: a retry, resuming from the checkpoints in the same output path. The engine compares the
  stored and the new trigger and replaces when they differ (pulumi ``step_generator.go``,
  ``shouldTriggerReplace``); a replacement takes the program's current inputs (``continueStepsFromDiff``
  re-runs ``Check`` on them), so a retry gets the configured deadline and restarts;
- the retry records the marker in its ``tpu-rl/retry-of`` annotation, so while it runs and after it
  completed the marker stays the same and the following `up` is a no-op;
- a run that failed while no `pulumi up` watched it and was then *adopted* by a create (after an `up`
  killed during the create left a pending create; ``upsertExistingObjects``: pulumi-kubernetes
  ``await.go`` ``Creation`` applies the manifest, with ``retry-of: <its own UID>``, to the existing
  object, and the program's wait sees Failed at once) stored its own UID as the trigger: its marker is
  ``<UID>/adopted``, so the next `up` still retries it;
- it is still running (a Ctrl-C, a dropped connection or a killed runner stopped the last `up` while
  the program waited for it): nothing changes (a SameStep: the engine calls no provider), and the
  program waits for the same run again (``workloads.run.waiting``);
- it does not exist: it is created;
- Kueue stopped it (its Workload was deactivated: its pods were not Ready within
  ``waitForPodsReady.timeout``): the JobSet stays suspended and never ends on its own, so it counts as
  failed and the next `up` retries it.

A step queued to a LocalQueue (``kueue.x-k8s.io/queue-name``) is suspended by Kueue until its Workload
is admitted. What Kueue says of it (``admission``) is read from the Workload's conditions as Kueue
0.17.1 writes them (``apis/kueue/v1beta2/workload_types.go``; messages from
``pkg/scheduler/flavorassigner/flavorassigner.go`` and ``pkg/controller/core/workload_controller.go``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.names import ADOPTED, RETRY_ANNOTATION

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""Kueue labels a job's Workload with the job's UID (its name carries a hash: select by this label)."""
WAITING_FOR_QUOTA = ("insufficient unused quota", "Pending the preemption", "Preempting")
"""Kueue's words for a workload that fits the queue once others finish."""
NEVER_FITS = (
    r"> maximum capacity",
    r"unavailable in ClusterQueue",
    r"doesn't match node affinity",
    r"untolerated taint",
    r"flavor \S+ not found",
    r"doesn't match ClusterQueue selector",
    r"validation failed",
    r"LimitRange",
)
"""Kueue's words (patterns) for a workload the queue can never admit as configured: quota, flavors, selector.
"ClusterQueue X not found" is not one of them: it passes once Kueue's cache has the queue."""


@dataclass(frozen=True)
class Admission:
    """What Kueue says of a step's Workload."""

    state: str
    """none (no Workload yet) | queued | admitted | never (cannot ever be admitted) | stopped (deactivated,
    or failed to start: the JobSet stays suspended) | finished."""
    reason: str = ""
    message: str = ""


def _dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else an empty one (a live object's field may be missing or malformed)."""
    return value if isinstance(value, dict) else {}


def admission(workloads: list[dict[str, Any]]) -> Admission:
    """Interpret the Workloads Kueue made for one JobSet (the newest counts)."""
    items = [w for w in workloads if isinstance(w, dict)]
    if not items:
        return Admission("none", "", "Kueue has not made a Workload for it yet")
    newest = max(items, key=lambda w: str((w.get("metadata") or {}).get("creationTimestamp") or ""))
    spec = _dict(newest.get("spec"))
    status = _dict(newest.get("status"))
    evicted = condition(status, "Evicted") or {}
    finished = condition(status, "Finished")
    if spec.get("active") is False or str(evicted.get("reason") or "").startswith("DeactivatedDueTo"):
        return Admission(
            "stopped",
            str(evicted.get("reason") or "Deactivated"),
            str(evicted.get("message") or "its Workload is deactivated (spec.active is false)"),
        )
    if finished:
        state = "stopped" if finished.get("reason") == "FailedToStart" else "finished"
        return Admission(state, str(finished.get("reason") or ""), str(finished.get("message") or ""))
    if condition(status, "Admitted"):
        return Admission("admitted", "Admitted", "")
    reserved = _condition_any(status, "QuotaReserved") or {}
    reason, message = str(reserved.get("reason") or ""), str(reserved.get("message") or "")
    waiting = any(words in message for words in WAITING_FOR_QUOTA)
    if reason == "Pending" and any(re.search(words, message) for words in NEVER_FITS) and not waiting:
        return Admission("never", reason, message)
    if evicted:
        reason, message = str(evicted.get("reason") or reason), str(evicted.get("message") or message)
    return Admission("queued", reason or "Pending", message or "waiting for Kueue to admit it")


def _condition_any(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The object's condition of type `kind`, whatever its status."""
    for entry in status.get("conditions") or []:
        if isinstance(entry, dict) and entry.get("type") == kind:
            return entry
    return None


@dataclass(frozen=True)
class LiveStep:
    """The parts of a live JobSet the program decides on."""

    state: str
    """absent | queued (suspended, waiting for Kueue) | running | succeeded | failed | stopped (Kueue
    deactivated it: it never ends by itself)."""
    name: str = ""
    uid: str = ""
    retry_of: str = ""
    reason: str = ""
    message: str = ""
    kueue: Admission | None = None
    """What Kueue says, for a step that is not over and is queued to a LocalQueue."""


ABSENT = LiveStep("absent")


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The object's condition of type `kind` when it is True."""
    for entry in status.get("conditions") or []:
        if isinstance(entry, dict) and entry.get("type") == kind and entry.get("status") == "True":
            return entry
    return None


def live_step(obj: dict[str, Any] | None, workloads: list[dict[str, Any]] | None = None) -> LiveStep:
    """Interpret a live JobSet (None = it does not exist) and, for a queued step, its Kueue Workloads.

    ``status.terminalState`` is set once the JobSet has the Completed or Failed condition (JobSet
    ``jobset_controller.go`` ``setJobSetCompletedCondition``/``setJobSetFailedCondition``)."""
    if not obj:
        return ABSENT
    metadata = _dict(obj.get("metadata"))
    status = _dict(obj.get("status"))
    annotations = _dict(metadata.get("annotations"))
    failed = condition(status, "Failed") or {}
    terminal = status.get("terminalState") or ""
    state = {"Failed": "failed", "Completed": "succeeded"}.get(terminal, "running")
    reason, message = str(failed.get("reason") or ""), str(failed.get("message") or "")
    kueue = None
    if state == "running" and workloads is not None:
        kueue = admission(workloads)
        suspended = (obj.get("spec") or {}).get("suspend") is True if isinstance(obj.get("spec"), dict) else False
        if kueue.state == "stopped":
            state, reason, message = "stopped", kueue.reason, kueue.message
        elif kueue.state in ("none", "queued", "never") and suspended:
            state, reason, message = "queued", kueue.reason, kueue.message
    return LiveStep(
        state=state,
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        retry_of=str(annotations.get(RETRY_ANNOTATION) or ""),
        reason=reason,
        message=message,
        kueue=kueue,
    )


def retry_marker(live: LiveStep, *, retry: bool) -> str:
    """The step's ``replacement_trigger``: a new value for a run to retry (``retry``: it failed, or its
    output is incomplete), else the marker the live run was created with ("" if none)."""
    if not retry:
        return live.retry_of
    if live.retry_of == live.uid:  # adopted after it failed: its own UID is already the stored trigger
        return live.uid + ADOPTED
    return live.uid


def running_elsewhere(items: list[dict[str, Any]], current: str) -> list[str]:
    """Names of other training runs of this cluster still running (they hold the TPU slice)."""
    names = []
    for item in items:
        live = live_step(item)
        if live.name and live.name != current and live.state == "running":
            names.append(live.name)
    return sorted(names)
