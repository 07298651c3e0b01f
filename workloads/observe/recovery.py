"""What Kueue says of an admitted step whose pods stopped being Ready: it waits for them to come back (its
*recovery*) until its recovery budget ends, then stops the step (plain functions of the Workload, Kueue 0.17.1).

A TPU maintenance event, a node repair or a JobSet restart leaves a running step's pods not Ready for a while: the
TPU nodes go, the workers' pods fail and are re-created Pending (the worker Jobs restart them in place, or the
JobSet restarts every Job: ``restartOnDisruption``), and they wait for the slice to come back. Kueue watches that
(``waitForPodsReady``), from the Workload's ``PodsReady`` condition, which its job reconciler writes
(``pkg/controller/jobframework/reconciler.go`` ``generatePodsReadyCondition``; a JobSet's pods are ready when every
replicated Job's ``ready`` plus ``succeeded`` is its ``replicas``, ``pkg/controller/jobs/jobset/jobset_controller.go``
``PodsReady``):

- ``True``, reason ``Started`` once every pod was Ready, ``Recovered`` once they are again after a recovery;
- ``False``, reason ``WaitForStart`` ("Not all pods are ready or succeeded") until they were first all Ready, or
  while the Workload is not admitted: Kueue's bound is then ``waitForPodsReady.timeout``
  (``tpu-rl:kueue.podsReadyTimeout``) from the ``Admitted`` condition's time;
- ``False``, reason ``WaitForRecovery`` ("At least one pod has failed, waiting for recovery") from the moment a
  step whose pods were all Ready loses one: Kueue's bound is then ``waitForPodsReady.recoveryTimeout``
  (``tpu-rl:kueue.recoveryTimeout``) from *that condition's* ``lastTransitionTime``
  (``pkg/controller/core/workload_controller.go`` ``admittedNotReadyWorkload``). The condition is written with
  ``apimeta.SetStatusCondition`` (``pkg/workload/workload.go`` ``SetConditionAndUpdate``), which keeps the time while
  the status stays False, so the time is when the pods first stopped being Ready, however long the recovery and
  whichever `pulumi up` reads it.

Past the bound Kueue evicts the step (``reconcileNotReadyTimeout``); with the stack's ``backoffLimitCount: 0`` it
deactivates it instead (``triggerDeactivation``: ``DeactivationTarget`` ``RequeuingLimitExceeded``, then
``spec.active: false`` and ``Evicted`` ``DeactivatedDueToRequeuingLimitExceeded``, "The workload is deactivated due
to exceeding the maximum number of re-queuing retries"), which ``workloads.observe.live_state`` reads as stopped.
Throughout the recovery the Workload stays admitted and keeps its quota: nothing is re-queued.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from core.config.values import format_duration
from core.printed_commands import make_target
from infra.k8s.live_objects import Workload, any_condition, true_condition
from workloads.observe.pod_state import Stuck

PODS_READY = "PodsReady"
WAIT_FOR_RECOVERY = "WaitForRecovery"
"""Kueue's reason of ``PodsReady`` False while it waits for a running step's pods (``workload_types.go``)."""
TPU_POOL = "the TPU slice pool"
"""``workloads.observe.pod_state.pool_of`` for a pod that selects the slice's accelerator."""
_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True)
class Recovery:
    """Kueue waits for a running step's pods to be Ready again."""

    since: datetime.datetime | None
    """When they stopped being Ready (the condition's ``lastTransitionTime``; None when it has none)."""
    budget: float
    """Seconds Kueue waits from then (``tpu-rl:kueue.recoveryTimeout``)."""

    @property
    def until(self) -> datetime.datetime | None:
        """When Kueue stops the step if its pods are not Ready again by then."""
        return None if self.since is None else self.since + datetime.timedelta(seconds=self.budget)

    def when(self) -> str:
        """``until 14:32 UTC``, or the budget when the start is not known."""
        until = self.until
        if until is None:
            return f"for up to {format_duration(int(self.budget))}"
        return f"until {until.astimezone(datetime.UTC):%H:%M} UTC"


def recovering(workloads: list[Workload], budget: float) -> Recovery | None:
    """The recovery Kueue's newest Workload of a step is in (None: it is not in one): admitted, active, not
    evicted, ``PodsReady`` False with reason ``WaitForRecovery``."""
    if not workloads:
        return None
    newest = max(workloads, key=lambda w: w.metadata.creation_timestamp or _EPOCH)
    conditions = newest.status.conditions
    if (
        newest.spec.active is False
        or true_condition(conditions, "Evicted")
        or not true_condition(conditions, "Admitted")
    ):
        return None
    ready = any_condition(conditions, PODS_READY)
    if ready is None or ready.status != "False" or ready.reason != WAIT_FOR_RECOVERY:
        return None
    return Recovery(ready.last_transition_time, budget)


def waiting_for(stuck: list[Stuck]) -> str:
    """What Kueue waits for, from the step's pods the scheduler cannot place now."""
    slice_pod = next((s for s in stuck if s.pool == TPU_POOL), None)
    if slice_pod is not None:
        return f"the slice to come back: pod {slice_pod.pod} cannot be scheduled yet ({TPU_POOL})"
    if stuck:
        return f"pool {stuck[0].pool} to take pod {stuck[0].pod} again"
    return "its pods to be Ready again"


def line(recovery: Recovery, stuck: list[Stuck]) -> str:
    """The waiting step's progress line: ``Kueue waits for the slice to come back (recovery, until 14:32 UTC) ...``."""
    what = waiting_for(stuck)
    head, colon, rest = what.partition(": ")
    return f"Kueue waits for {head} (recovery, {recovery.when()}){colon}{rest}"


def stopped_after(recovery: Recovery, stack: str) -> str:
    """What a step Kueue stopped while it was recovering means, and what to do (``stack``: the one the command
    names)."""
    since = "" if recovery.since is None else f" after they stopped being Ready at {recovery.since:%H:%M} UTC"
    return (
        f"its pods were not all Ready again within tpu-rl:kueue.recoveryTimeout "
        f"({format_duration(int(recovery.budget))}){since} (a TPU maintenance event, a node repair or a restart "
        f"that outlasted it), so it holds no quota now. The next `{make_target('up', stack)}` runs it again; if the "
        "slice's maintenance takes longer, raise tpu-rl:kueue.recoveryTimeout"
    )
