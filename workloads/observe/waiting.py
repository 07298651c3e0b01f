"""Wait for a step's JobSet to end, bounded by the wall clock: the one await rule of every step.

The provider creates each step with ``pulumi.com/skipAwait: "true"`` (pulumi-kubernetes
``metadata.ReadyCondition`` then returns at once; a JobSet's delete is still awaited, since
``allowsSkipAwaitWithDelete`` lists built-in kinds only), and the program waits here instead, because
the provider's await of ``pulumi.com/waitFor`` can only end when its JSONPath matches or Pulumi's
timeout passes (``await/internal/awaiter.go`` ``Await``): it could not stop for a step Kueue will never
admit, or one Kueue stopped (a deactivated Workload leaves the JobSet suspended, never terminal).

Each poll reads the JobSet and, for a queued step, its Kueue Workload (``workloads.observe.live_state``), with a
fresh bounded reader (a new credential from the exec plugin, so a day-long wait outlives a token). The
wait ends when:

- the JobSet is Completed or Failed: its object is returned (the caller reports a failure);
- Kueue stopped it (its pods were not Ready within ``tpu-rl:kueue.podsReadyTimeout``), or it can never
  be admitted as the queue is configured: ``StepWaitError`` at once;
- it is still queued after ``tpu-rl:kueue.admissionTimeout``: ``StepWaitError`` (it stays queued);
- one of its pods has stayed unschedulable for ``tpu-rl:workflow.unschedulableTimeout`` (the node pool cannot
  grow: stockout, quota, max size): ``StepWaitError`` with the scheduler's and the autoscaler's words, the
  pool and the fix (``workloads.observe.pod_state``). Not while Kueue waits for a running step's pods to be Ready
  again within its recovery budget (``workloads.observe.recovery``: a TPU maintenance event, a node repair, a
  restart): that bound is Kueue's, which stops the step when it passes (then ``StepWaitError`` at once, as for any
  step Kueue stopped), and the wait follows the step until then;
- it has not ended within every attempt's deadline plus a grace (``Step.await_seconds``), or the cluster
  could not be read for ``LOST_CONTACT_SECONDS``: ``StepWaitError`` (it keeps running).

Interrupting the program here (Ctrl-C, a lost runner) leaves the step recorded as created: the next
`pulumi up` finds it unchanged and waits for it again. The wait runs in a daemon thread, never on the program's
event loop or in its default executor (which ``pulumi-language-python-exec`` shuts down with ``wait=True``), so the
SIGINT the language host sends on a cancelled update (``pulumi-language-python`` ``Cancel``; it kills the program 5 s
later) ends the program at once, between two polls or in one (``tests/test_interrupt.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from core.config.values import format_duration
from core.errors import TpuRlError
from core.printed_commands import ANY_STACK, make_target
from infra.k8s import live_objects
from infra.k8s.live import ClusterReader, ClusterReadError
from workloads.observe import pod_state, recovery
from workloads.observe.live_state import LiveStep, live_step

POLL_SECONDS = 20.0
LOST_CONTACT_SECONDS = 600.0


class StepWaitError(TpuRlError):
    """The wait for a step ended without the step ending (one line)."""


@dataclass(frozen=True)
class Bounds:
    total: float
    """Seconds until the step must have ended (``Step.await_seconds``)."""
    admission: float
    """Seconds it may stay queued (``tpu-rl:kueue.admissionTimeout``)."""
    lost: float = LOST_CONTACT_SECONDS
    """Seconds the cluster may stay unreadable."""
    unschedulable: float = 15 * 60.0
    """Seconds a pod of the step may stay unschedulable (``tpu-rl:workflow.unschedulableTimeout``)."""
    recovery: float | None = None
    """Seconds Kueue waits for a running step's pods to be Ready again (``tpu-rl:kueue.recoveryTimeout``), when the
    stack's own Kueue runs the step; None: not known (no Kueue, or a queue managed elsewhere)."""


Poll = tuple[live_objects.JobSet | None, list[live_objects.Workload] | None, list[live_objects.Pod] | None]
"""One poll: the JobSet (None: gone), its Workloads (None: not queued to Kueue) and its pods (None: not read)."""
Read = Callable[[], Poll]


@dataclass(frozen=True)
class Unschedulable:
    """What the wait needs to explain a pod that stays unschedulable."""

    events: Callable[[], list[live_objects.Event]]
    """The namespace's pod events (read once, when the bound passes)."""
    fix: Callable[[str], str]
    """Pool -> what to do (``workloads.observe.pod_state.pool_fix``)."""
    then: str
    """What becomes of the step once `up` stops (Kueue stops it later, or it stays pending)."""


def read_step(reader: ClusterReader, namespace: str, name: str, *, queued: bool, pods: bool = False) -> Poll:
    """A step's JobSet and, while it is not over: when ``queued`` (it names a LocalQueue) its Kueue Workloads and,
    when ``pods``, its pods (each as the reader returns it, typed)."""
    obj = reader.jobset(namespace, name)
    if obj is None or live_step(obj).state != "running":
        return obj, None, None
    workloads = reader.step_workloads(namespace, name, obj.metadata.uid) if queued else None
    return obj, workloads, reader.step_pods(namespace, name) if pods else None


def sleep(seconds: float) -> None:
    """The pause between polls (tests replace it and ``now`` with a fake clock)."""
    time.sleep(seconds)


def now() -> float:
    return time.monotonic()


def describe(current: LiveStep) -> str:
    """What a waiting step is doing, for the progress line."""
    if current.state == "queued":
        return f"queued: {(current.message or current.reason)[:400]}"
    return current.state


def _why_stopped(reason: str, recovered: recovery.Recovery | None, stack: str) -> str:
    """What a step Kueue stopped means and what to do (Kueue 0.17.1's reasons); ``recovered``: the recovery the wait
    last saw it in (Kueue's recovery budget is what passed); ``stack``: the one the commands name."""
    up = make_target("up", stack)
    if "RequeuingLimitExceeded" in reason:  # waitForPodsReady: not all pods Ready within the timeout
        if recovered is not None:
            return recovery.stopped_after(recovered, stack)
        return (
            "its pods were not all Ready in time (at its start, or again after a restart, a node repair or a TPU "
            f"maintenance event), so it holds no quota now. The next `{up}` runs it again; "
            "if its pods need longer to start (image pulls, node scale-up, flex-start capacity), raise "
            "tpu-rl:kueue.podsReadyTimeout; if the slice's maintenance takes longer, tpu-rl:kueue.recoveryTimeout"
        )
    if reason == "FailedToStart":  # the admission could not be applied to the JobSet (reconciler.go startJob)
        return (
            "Kueue could not start it as admitted (a flavor's node labels or tolerations conflict with the pods'), "
            f"and a rerun meets the same conflict: fix the ResourceFlavors of its queue, then run `{up}` again"
        )
    return f"its Workload is inactive and holds no quota; the next `{up}` runs it again"


def _why_unschedulable(what: str, stuck: pod_state.Stuck, bounds: Bounds, reads: Unschedulable) -> str:
    try:
        events = reads.events()
    except ClusterReadError:
        events = []  # the condition's message still says why
    reasons = pod_state.newest_reasons(events, stuck.pod)
    return (
        f"{what} could not be scheduled for {format_duration(int(bounds.unschedulable))}: "
        f"{pod_state.explain_unschedulable(stuck, reasons, reads.fix(stuck.pool))}. {reads.then} "
        "(tpu-rl:workflow.unschedulableTimeout)"
    )


def _ended(what: str, current: LiveStep, recovered: recovery.Recovery | None, stack: str) -> None:
    """``StepWaitError`` for a step Kueue stopped or can never admit; nothing for any other."""
    kueue = current.kueue
    if current.state == "stopped":
        raise StepWaitError(
            f"Kueue stopped {what} ({current.reason[:80]}: {current.message[:300]}); "
            + _why_stopped(current.reason, recovered, stack)
        )
    if kueue is not None and kueue.state == "never":
        raise StepWaitError(
            f"Kueue can never admit {what} as its queue is configured: {kueue.message[:400]}; "
            "fix the ClusterQueue behind tpu-rl:kueue.queue (quota, flavors, namespaces), then run "
            f"`{make_target('up', stack)}` again"
        )


@dataclass
class _Since:
    """When each condition the wait bounds was first seen, by the wait's clock (None: not now)."""

    queued: float | None = None
    lost: float | None = None
    stuck: float | None = None
    recovering: float | None = None
    recovered: recovery.Recovery | None = None
    """The recovery Kueue was last seen in (kept after it ends: a step Kueue then stops outlasted it)."""


def _recovery(
    current: LiveStep, workloads: list[live_objects.Workload] | None, bounds: Bounds, since: _Since, moment: float
) -> recovery.Recovery | None:
    """The recovery Kueue waits through for the step now, while it covers the step's pods: within its budget by
    the wait's clock too, from the first poll that saw it (a Kueue that does not act past it leaves the step to the
    unschedulable bound)."""
    found = None
    if current.state == "running" and workloads is not None and bounds.recovery is not None:
        found = recovery.recovering(workloads, bounds.recovery)
    if found is None:
        since.recovering = None
        return None
    since.recovering = moment if since.recovering is None else since.recovering
    since.recovered = found
    return found if moment - since.recovering < found.budget else None


def wait_for_step(
    read: Read,
    what: str,
    bounds: Bounds,
    *,
    report: Callable[[str], None],
    unschedulable: Unschedulable | None = None,
    stack: str = ANY_STACK,
) -> live_objects.JobSet:
    """Poll ``read`` until the JobSet ``what`` (``JobSet <ns>/<name>``) ends; return its last object (``stack``: the
    one the lines' commands name)."""
    start = now()
    since = _Since()
    shown = ""
    up = make_target("up", stack)
    while True:
        try:
            obj, workloads, pods = read()
        except ClusterReadError as err:
            since.lost = now() if since.lost is None else since.lost
            if now() - since.lost >= bounds.lost:
                raise StepWaitError(
                    f"could not read the cluster for {format_duration(int(bounds.lost))} while waiting for {what} "
                    f"({str(err)[:300]}); the step keeps running: run `{up}` again to follow it"
                ) from None
            sleep(POLL_SECONDS)
            continue
        since.lost = None
        if obj is None:
            raise StepWaitError(
                f"{what} is gone (deleted outside Pulumi?); run `{make_target('refresh', stack)}` so the stack "
                f"forgets it, then `{up}` runs it again"
            )
        current = live_step(obj, workloads)
        if current.state in ("succeeded", "failed"):
            return obj
        _ended(what, current, since.recovered, stack)
        moment = now()
        if current.state == "queued":
            since.queued = moment if since.queued is None else since.queued
            if moment - since.queued >= bounds.admission:
                raise StepWaitError(
                    f"{what} is still queued after {format_duration(int(bounds.admission))}: Kueue: "
                    f"{(current.message or current.reason)[:300]}. It stays queued and starts once "
                    f"Kueue admits it; run `{up}` again to follow it (tpu-rl:kueue.admissionTimeout)"
                )
        else:
            since.queued = None
        stuck = pod_state.unschedulable(pods) if pods is not None and current.state != "queued" else []
        recovering = _recovery(current, workloads, bounds, since, moment)
        if stuck and unschedulable is not None and recovering is None:
            since.stuck = moment if since.stuck is None else since.stuck
            if moment - since.stuck >= bounds.unschedulable:
                raise StepWaitError(_why_unschedulable(what, stuck[0], bounds, unschedulable))
        else:
            since.stuck = None
        if moment - start >= bounds.total:
            raise StepWaitError(
                f"{what} did not end within {format_duration(int(bounds.total))} (every attempt's deadline plus "
                f"15m); it keeps running: run `{up}` again to follow it"
            )
        line = _progress(current, stuck, recovering)
        if line != shown:
            report(f"{what}: {line}")
            shown = line
        sleep(POLL_SECONDS)


def _progress(current: LiveStep, stuck: list[pod_state.Stuck], recovering: recovery.Recovery | None) -> str:
    """The step's progress line: Kueue's recovery, a pod the scheduler cannot place, or what the step is doing."""
    if recovering is not None:
        return recovery.line(recovering, stuck)
    if stuck:
        return f"pending: pod {stuck[0].pod} cannot be scheduled yet ({stuck[0].pool})"
    return describe(current)
