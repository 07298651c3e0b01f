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
  the program waited for it): nothing changes (the provider's Check and Diff find no change: a SameStep), and the
  program waits for the same run again (``workloads.observe.waiting``);
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

import datetime
import re
from dataclasses import dataclass

from core.names import ADOPTED, RETRY_ANNOTATION
from infra.k8s.live_objects import Condition, JobSet, JobSetStatus, Workload, any_condition, true_condition

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


_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.UTC)


INACTIVE = "its Workload is deactivated (spec.active is false)"


def _deactivating(target: Condition | None) -> Admission:
    """A Workload deactivated but not evicted yet. Kueue 0.17.1 writes the two apart (``workload_controller.go``
    ``Reconcile``): a ``DeactivationTarget`` condition naming why (the requeuing limit), ``spec.active`` false, and at
    its next reconcile the ``Evicted`` condition, whose reason is ``DeactivatedDueTo`` + the target's reason and whose
    message is "The workload is deactivated due to " + its message (``workload.ReasonWithCause``). A read in between
    says what that condition will."""
    if target is None:
        return Admission("stopped", "Deactivated", INACTIVE)
    return Admission(
        "stopped", f"DeactivatedDueTo{target.reason}", f"The workload is deactivated due to {target.message}"
    )


def admission(workloads: list[Workload]) -> Admission:
    """Interpret the Workloads Kueue made for one JobSet (the newest counts)."""
    if not workloads:
        return Admission("none", "", "Kueue has not made a Workload for it yet")
    newest = max(workloads, key=lambda w: w.metadata.creation_timestamp or _EPOCH)
    conditions = newest.status.conditions
    evicted = true_condition(conditions, "Evicted")
    finished = true_condition(conditions, "Finished")
    if newest.spec.active is False or (evicted is not None and evicted.reason.startswith("DeactivatedDueTo")):
        if evicted is None:
            return _deactivating(true_condition(conditions, "DeactivationTarget"))
        return Admission("stopped", evicted.reason or "Deactivated", evicted.message or INACTIVE)
    if finished:
        state = "stopped" if finished.reason == "FailedToStart" else "finished"
        return Admission(state, finished.reason, finished.message)
    if true_condition(conditions, "Admitted"):
        return Admission("admitted", "Admitted", "")
    reserved = any_condition(conditions, "QuotaReserved")
    reason, message = (reserved.reason, reserved.message) if reserved else ("", "")
    waiting = any(words in message for words in WAITING_FOR_QUOTA)
    if reason == "Pending" and any(re.search(words, message) for words in NEVER_FITS) and not waiting:
        return Admission("never", reason, message)
    if evicted:
        reason, message = evicted.reason or reason, evicted.message or message
    return Admission("queued", reason or "Pending", message or "waiting for Kueue to admit it")


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


def state_of(status: JobSetStatus) -> tuple[str, str, str]:
    """(running | succeeded | failed, the Failed condition's reason, its message) of a JobSet's status.

    ``status.terminalState`` is set once the JobSet has the Completed or Failed condition (JobSet
    ``jobset_controller.go`` ``setJobSetCompletedCondition``/``setJobSetFailedCondition``)."""
    state = {"Failed": "failed", "Completed": "succeeded"}.get(status.terminal_state, "running")
    failed = true_condition(status.conditions, "Failed")
    return state, failed.reason if failed else "", failed.message if failed else ""


def live_step(obj: JobSet | None, workloads: list[Workload] | None = None) -> LiveStep:
    """Interpret a live JobSet (None = it does not exist) and, for a queued step, its Kueue Workloads."""
    if obj is None:
        return ABSENT
    state, reason, message = state_of(obj.status)
    kueue = None
    if state == "running" and workloads is not None:
        kueue = admission(workloads)
        if kueue.state == "stopped":
            state, reason, message = "stopped", kueue.reason, kueue.message
        elif kueue.state in ("none", "queued", "never") and obj.spec.suspend is True:
            state, reason, message = "queued", kueue.reason, kueue.message
    return LiveStep(
        state=state,
        name=obj.metadata.name,
        uid=obj.metadata.uid,
        retry_of=obj.metadata.annotations.get(RETRY_ANNOTATION, ""),
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


def running_elsewhere(items: list[JobSet], current: str) -> list[str]:
    """Names of other training runs of this cluster still running (they hold the TPU slice)."""
    names = []
    for item in items:
        live = live_step(item)
        if live.name and live.name != current and live.state == "running":
            names.append(live.name)
    return sorted(names)
