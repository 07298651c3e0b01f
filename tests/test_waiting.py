"""The bounded wait for a step's JobSet (``workloads.observe.waiting``) and what Kueue's Workload says of it
(``workloads.observe.live_state``): on a fake clock, with the real train step's manifest and Kueue 0.17.1's
condition shapes and messages (``tests.fake_kube``, /work/notes/kueue.md B.4-B.7). Pure."""

from __future__ import annotations

import re

import pytest

from core.redact import TERMINAL_CONTROLS
from infra.k8s import live_objects
from infra.k8s.live import ClusterReader, ClusterReadError
from tests.conftest import slug
from tests.fake_kube import (
    AUTOSCALER_MESSAGES,
    KUEUE_MESSAGES,
    SCHEDULER_MESSAGE,
    T0,
    T1,
    pod_event,
    step_pod,
    with_state,
    workload,
)
from tests.lifecycle_walk import settings
from workloads.observe import waiting
from workloads.observe.live_state import NEVER_FITS, Admission, admission, live_step, retry_marker
from workloads.observe.waiting import POLL_SECONDS, Bounds, StepWaitError
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

PROD = settings("prod", [])
TRAIN = plan_workflow(PROD).train
WHAT = f"JobSet tpu-rl/{TRAIN.name}"
BOUNDS = Bounds(total=TRAIN.await_seconds, admission=PROD.kueue.admission_timeout)
UID = "6f1c1f4e-0000-4000-8000-000000000001"
QUEUED_LINE = f"{WHAT}: queued: {KUEUE_MESSAGES['queued']}"
# Kueue 0.17.1 words for a step that can never be admitted as configured, one per NEVER_FITS entry
# (pkg/scheduler/flavorassigner/flavorassigner.go 790, 931, 949, 958, 1046; scheduler.go 500-517 `nominate`).
NEVER = {
    "> maximum capacity": KUEUE_MESSAGES["never"],
    "unavailable in ClusterQueue": "couldn't assign flavors to pod set worker: resource google.com/tpu unavailable "
    "in ClusterQueue",
    "doesn't match node affinity": "couldn't assign flavors to pod set worker: flavor tpu-rl-tpu-slice doesn't "
    "match node affinity",
    "untolerated taint": "couldn't assign flavors to pod set worker: untolerated taint "
    "google.com/tpu=present:NoSchedule in flavor tpu-rl-tpu-slice",
    r"flavor \S+ not found": "couldn't assign flavors to pod set worker: flavor tpu-rl-tpu-slice not found",
    "doesn't match ClusterQueue selector": "Workload namespace doesn't match ClusterQueue selector",
    "validation failed": "resources validation failed: google.com/tpu: requests must not exceed limits",
    "LimitRange": "resources didn't satisfy LimitRange constraints: the pod's cpu is above the maximum (8)",
}
# A never-fit reason beside a waiting one (reasons joined ", "; scheduler.go 374-377 appends the preemption).
MIXED = (
    "couldn't assign flavors to pod set worker: flavor tpu-rl-spare not found, insufficient unused quota for "
    "google.com/tpu in flavor tpu-rl-tpu-slice, 32 more needed",
    KUEUE_MESSAGES["never"] + ", insufficient unused quota for google.com/tpu in flavor tpu-rl-b, 32 more needed. "
    "Pending the preemption of 1 workload(s)",
)
# Evicted=True PodsReadyTimeout, `Exceeded the PodsReady timeout %s` (workload_controller.go:995); the JobSet
# reconciler then sets QuotaReserved=False Pending with the eviction message (reconciler.go:580-604).
TIMEOUT = f"Exceeded the PodsReady timeout tpu-rl/jobset-{TRAIN.name}-1a2b3"
# Finished=True FailedToStart: podset.Merge's conflict (reconciler.go:611-621, podset.go:117-175).
CONFLICT = (
    "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for "
    "key=cloud.google.com/gke-tpu-topology, value1=4x4, value2=2x4"
)


def raw_jobset(state: str = "pending", *, suspend: bool | None = True) -> dict:
    """The JobSet as the API server returns it (fake_kube)."""
    obj = with_state(TRAIN.manifest, state)
    obj["metadata"]["uid"] = UID
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    return obj


def jobset(state: str = "pending", *, suspend: bool | None = True) -> live_objects.JobSet:
    """The JobSet as the reader's boundary hands it on (``infra.k8s.live_objects``)."""
    return live_objects.jobset(raw_jobset(state, suspend=suspend), "test JobSet")


def wl(state: str, created: str = T1, active: bool | None = None, **conditions: tuple[str, str, str]):
    """A Workload from fake_kube in ``state``; ``conditions`` (type=(status, reason, message)) replace its own."""
    item = workload(raw_jobset(), state)
    item["metadata"]["creationTimestamp"] = created
    if active is not None:
        item["spec"] = {"active": active}
    if conditions:
        item["status"]["conditions"] = [
            {"type": kind, "status": s, "reason": r, "message": m} for kind, (s, r, m) in conditions.items()
        ]
    (parsed,) = live_objects.workloads([item], "test Workloads")
    return parsed


def pending(message: str) -> tuple[live_objects.JobSet, list[live_objects.Workload]]:
    return jobset(), [wl("queued", QuotaReserved=("False", "Pending", message))]


QUEUED = (jobset(), [wl("queued")])
RUNNING = (jobset("running", suspend=False), [wl("admitted")])
EVICTED = (
    jobset(),
    [wl("queued", QuotaReserved=("False", "Pending", TIMEOUT), Evicted=("True", "PodsReadyTimeout", TIMEOUT))],
)
COMPLETED = (jobset("completed", suspend=False), [wl("admitted")])


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(waiting, "sleep", fake.sleep)
    monkeypatch.setattr(waiting, "now", lambda: fake.t)
    return fake


def run(clock: Clock, script, bounds: Bounds = BOUNDS):
    """``wait_for_step`` whose every poll at fake time t answers ``script(t)`` (an exception is raised):
    (the returned object or the StepWaitError, the progress lines)."""
    lines: list[str] = []

    def read():
        answer = script(clock.t)
        if isinstance(answer, Exception):
            raise answer
        return (*answer, None) if len(answer) == 2 else answer  # (JobSet, Workloads[, pods])

    try:
        return waiting.wait_for_step(read, WHAT, bounds, report=lines.append), lines
    except StepWaitError as err:
        return err, lines


@pytest.mark.parametrize("state", ["completed", "failed"])
def test_an_ended_jobset_is_returned_at_once(clock, state):
    obj = jobset(state, suspend=False)
    result, lines = run(clock, lambda t: (obj, [wl("admitted")]))
    assert result is obj and clock.sleeps == [] and lines == []


def test_polls_while_running_and_reports_each_change_once(clock):
    preempting = KUEUE_MESSAGES["queued"] + ". Pending the preemption of 1 workload(s)"

    def script(t):
        return QUEUED if t < 60 else pending(preempting) if t < 100 else RUNNING if t < 200 else COMPLETED

    result, lines = run(clock, script)
    assert result is COMPLETED[0]
    assert clock.sleeps == [POLL_SECONDS] * 10 and clock.t == 200
    assert lines == [QUEUED_LINE, f"{WHAT}: queued: {preempting}", f"{WHAT}: running"]


def test_still_queued_at_the_admission_bound(clock):
    assert BOUNDS.admission == 900
    err, lines = run(clock, lambda t: QUEUED)
    assert isinstance(err, StepWaitError) and clock.t == 900, "it raises at the first poll at the bound"
    assert str(err).startswith(f"{WHAT} is still queued after 15m: Kueue: {KUEUE_MESSAGES['queued']}. It stays")
    assert "(tpu-rl:kueue.admissionTimeout)" in str(err) and lines == [QUEUED_LINE]


def test_admitted_one_poll_before_the_admission_bound(clock):
    result, lines = run(clock, lambda t: QUEUED if t < 900 else RUNNING if t < 2000 else COMPLETED)
    assert result is COMPLETED[0] and clock.t == 2000
    assert lines == [QUEUED_LINE, f"{WHAT}: running"]


def test_queued_time_restarts_when_a_timed_out_step_is_requeued(clock):
    """Evicted PodsReadyTimeout: Kueue requeues it; it counts as queued from the eviction on."""
    err, lines = run(clock, lambda t: QUEUED if t < 880 else RUNNING if t < 1000 else EVICTED)
    assert isinstance(err, StepWaitError) and clock.t == 1000 + 900
    assert str(err).startswith(f"{WHAT} is still queued after 15m: Kueue: {TIMEOUT}. ")
    assert lines == [QUEUED_LINE, f"{WHAT}: running", f"{WHAT}: queued: {TIMEOUT}"]


def test_total_bound(clock):
    assert BOUNDS.total == 174600
    err, lines = run(clock, lambda t: RUNNING)
    assert isinstance(err, StepWaitError) and clock.t == BOUNDS.total
    assert str(err) == (
        f"{WHAT} did not end within 48h30m (every attempt's deadline plus 15m); it keeps running: "
        "run `make up STACK=<stack>` again to follow it"
    )
    assert lines == [f"{WHAT}: running"]


def test_lost_contact_bound(clock):
    lost = ClusterReadError("the cluster at 10.0.0.2 did not answer /apis/jobset.x-k8s.io within 30 s")
    err, lines = run(clock, lambda t: RUNNING if t < 100 else lost)
    assert isinstance(err, StepWaitError) and clock.t == 100 + 600
    assert str(err) == (
        f"could not read the cluster for 10m while waiting for {WHAT} ({lost}); the step keeps running: "
        "run `make up STACK=<stack>` again to follow it"
    )
    assert lines == [f"{WHAT}: running"]


def test_one_answer_resets_the_lost_contact_timer(clock):
    lost = ClusterReadError("reading /apis from the cluster at 10.0.0.2 failed (ConnectionResetError)")
    result, _ = run(clock, lambda t: RUNNING if t == 600 else lost if t < 1200 else COMPLETED)
    assert result is COMPLETED[0] and clock.t == 1200


def test_a_deleted_jobset(clock):
    err, lines = run(clock, lambda t: RUNNING if t < 40 else (None, None))
    assert str(err) == (
        f"{WHAT} is gone (deleted outside Pulumi?); run `make refresh STACK=<stack>` so the stack forgets it, "
        "then `make up STACK=<stack>` runs it again"
    )
    assert clock.t == 40 and lines == [f"{WHAT}: running"]


INACTIVE = "its Workload is deactivated (spec.active is false)"
REQUEUING_LIMIT = "exceeding the maximum number of re-queuing retries"
"""What Kueue 0.17.1's DeactivationTarget condition says of the requeuing limit (``KUEUE_MESSAGES["deactivated"]`` is
the Evicted condition's text made of it)."""


@pytest.mark.parametrize(
    ("workloads", "reason", "message", "advice"),
    [
        (
            [wl("deactivated")],
            "DeactivatedDueToRequeuingLimitExceeded",
            KUEUE_MESSAGES["deactivated"],
            "its pods were not all Ready in time",
        ),
        ([wl("queued", active=False)], "Deactivated", INACTIVE, "its Workload is inactive"),
        (
            # Kueue's first write: why, and spec.active false; its Evicted condition comes with its next one.
            [wl("admitted", active=False, DeactivationTarget=("True", "RequeuingLimitExceeded", REQUEUING_LIMIT))],
            "DeactivatedDueToRequeuingLimitExceeded",
            KUEUE_MESSAGES["deactivated"],
            "its pods were not all Ready in time",
        ),
        (
            [wl("queued", Finished=("True", "FailedToStart", CONFLICT))],
            "FailedToStart",
            CONFLICT,
            "Kueue could not start it as admitted",
        ),
    ],
    ids=["requeuing-limit", "inactive", "requeuing-limit-before-its-eviction", "failed-to-start"],
)
def test_a_step_kueue_stopped_raises_at_once_with_what_to_do(clock, workloads, reason, message, advice):
    err, lines = run(clock, lambda t: (jobset(), workloads))
    assert str(err).startswith(f"Kueue stopped {WHAT} ({reason}: {message}); {advice}")
    raise_timeout = "raise tpu-rl:kueue.podsReadyTimeout" in str(err)
    assert raise_timeout == (reason == "DeactivatedDueToRequeuingLimitExceeded"), "only a timeout is raised"
    assert clock.sleeps == [] and lines == []


def test_a_cluster_queue_kueue_has_not_cached_yet_is_waited_for():
    """scheduler.go nominate: "ClusterQueue %s not found" passes once Kueue's cache has the queue."""
    assert admission(pending("ClusterQueue tpu-rl not found")[1]).state == "queued"


@pytest.mark.parametrize("phrase", NEVER_FITS, ids=slug)
def test_a_step_that_never_fits_raises_at_once(clock, phrase):
    assert set(NEVER) == set(NEVER_FITS) and re.search(phrase, NEVER[phrase])
    err, lines = run(clock, lambda t: pending(NEVER[phrase]))
    assert str(err).startswith(f"Kueue can never admit {WHAT} as its queue is configured: {NEVER[phrase]}; fix")
    assert clock.sleeps == [] and lines == []
    assert admission(pending(NEVER[phrase])[1]) == Admission("never", "Pending", NEVER[phrase])


@pytest.mark.parametrize("message", MIXED, ids=["unused-quota", "preemption"])
def test_a_never_fit_reason_beside_a_waiting_one_is_queued(clock, message):
    assert admission(pending(message)[1]) == Admission("queued", "Pending", message)
    result, lines = run(clock, lambda t: pending(message) if t < 100 else COMPLETED)
    assert result is COMPLETED[0] and lines == [f"{WHAT}: queued: {message[:400]}"], "at most 400 characters"


def test_the_newest_workload_counts():
    old, new = wl("deactivated", created=T0), wl("admitted", created=T1)
    assert admission([old, new]).state == admission([new, old]).state == "admitted"
    old, new = wl("admitted", created=T0), wl("queued", created=T1)
    assert admission([new, old]).state == admission([old, new]).state == "queued"


def test_what_kueue_says_of_a_workload():
    assert admission([]) == Admission("none", "", "Kueue has not made a Workload for it yet")
    assert admission([wl("admitted")]) == Admission("admitted", "Admitted", "")
    done = "jobset completed successfully"  # the JobSet's message (reconciler.go:484-505)
    assert admission([wl("admitted", Finished=("True", "Succeeded", done))]) == Admission("finished", "Succeeded", done)
    # QuotaReserved=False Inadmissible `LocalQueue %s doesn't exist` (workload_controller.go:640-669): it
    # resolves once the queue exists, so it is queued, not never.
    missing = "LocalQueue team-queue doesn't exist"
    inadmissible = wl("queued", QuotaReserved=("False", "Inadmissible", missing))
    assert admission([inadmissible]) == Admission("queued", "Inadmissible", missing)
    assert admission([wl("queued")]) == Admission("queued", "Pending", KUEUE_MESSAGES["queued"])
    assert admission(EVICTED[1]) == Admission("queued", "PodsReadyTimeout", TIMEOUT)


def test_live_step_reads_the_workload_of_a_step_that_is_not_over():
    queued = live_step(*QUEUED)
    assert (queued.state, queued.reason, queued.message) == ("queued", "Pending", KUEUE_MESSAGES["queued"])
    assert live_step(jobset(), []).state == "queued" and live_step(jobset(), None).state == "running"
    assert live_step(*RUNNING).state == "running"
    assert live_step(jobset("running", suspend=False), [wl("queued")]).state == "running", "unsuspended"
    stopped = live_step(jobset(), [wl("deactivated")])
    assert (stopped.state, stopped.reason) == ("stopped", "DeactivatedDueToRequeuingLimitExceeded")
    assert retry_marker(stopped, retry=True) == UID and retry_marker(stopped, retry=False) == ""


@pytest.mark.parametrize(("state", "live"), [("completed", "succeeded"), ("failed", "failed")])
def test_a_terminal_jobset_ignores_its_workloads(state, live):
    read = live_step(jobset(state), [wl("deactivated")])
    assert read.state == live and read.kueue is None


def clean(text: str) -> bool:
    return not re.search(r"[\x00-\x1f\x7f-\x9f]", text) and not TERMINAL_CONTROLS.search(text)


def test_kueue_text_cannot_reach_the_terminal(clock):
    hostile = (
        "couldn't assign flavors to pod set worker:\x1b[2J insufficient unused quota for google.com/tpu\x07 "
        "in flavor\r\ntpu-rl-tpu-slice, 32 more\x9b needed\x1b]0;owned\x07"
    )
    err, lines = run(clock, lambda t: pending(hostile))
    assert lines == [QUEUED_LINE] and str(err).startswith(f"{WHAT} is still queued after 15m: Kueue: ")
    assert KUEUE_MESSAGES["queued"] in str(err) and clean(str(err))
    reason = "DeactivatedDueToRequeuingLimitExceeded\x1b[0m\x08"
    stopped = [wl("queued", Evicted=("True", reason, hostile))]
    err, _ = run(clock, lambda t: (jobset(), stopped))
    assert f"(DeactivatedDueToRequeuingLimitExceeded: {KUEUE_MESSAGES['queued']})" in str(err) and clean(str(err))
    never = KUEUE_MESSAGES["never"].replace("worker: ", "worker:\x1b[1m ").replace("(32)", "(32)\x1b[0m\x00")
    err, _ = run(clock, lambda t: pending(never))
    assert f"as its queue is configured: {KUEUE_MESSAGES['never']}; fix" in str(err) and clean(str(err))


# ---------------------------------------------------------------------------------------------
# Unschedulable pods (workloads.observe.pod_state): the bound, both sides; the scheduler's and the autoscaler's words


RAW_STUCK_POD = step_pod(TRAIN.manifest, "pathways-head", "unschedulable")
STUCK_POD = live_objects.pods([step_pod(TRAIN.manifest, "pathways-head", "unschedulable")], "test pods")[0]
ADMITTED = jobset("running", suspend=False)


def unschedulable_reads(events=None):
    calls = []

    def read_events():
        calls.append(1)
        if isinstance(events, Exception):
            raise events
        raw = events if events is not None else [pod_event(RAW_STUCK_POD, "FailedScaleUp")]
        return live_objects.events(raw, "test events")

    reads = waiting.Unschedulable(events=read_events, fix=lambda pool: f"fix {pool}", then="It stays pending")
    return reads, calls


def run_unschedulable(clock, script, events=None):
    reads, calls = unschedulable_reads(events)
    lines: list[str] = []

    def read():
        return script(clock.t)

    result: live_objects.JobSet | StepWaitError
    try:
        result = waiting.wait_for_step(read, WHAT, BOUNDS, report=lines.append, unschedulable=reads)
    except StepWaitError as err:
        result = err
    return result, lines, calls


def test_a_pod_unschedulable_for_the_bound_fails_with_the_reasons_the_pool_and_the_fix(clock):
    result, lines, calls = run_unschedulable(clock, lambda t: (ADMITTED, [wl("admitted")], [STUCK_POD]))
    assert isinstance(result, StepWaitError) and calls == [1], "events are read once, at the bound"
    assert clock.t == BOUNDS.unschedulable == 15 * 60
    name = STUCK_POD.metadata.name
    assert str(result) == (
        f"{WHAT} could not be scheduled for 15m: pod {name} (pool cpu-np): scheduler: {SCHEDULER_MESSAGE.rstrip('.')}; "
        f"autoscaler FailedScaleUp: {AUTOSCALER_MESSAGES['FailedScaleUp'].rstrip('.')}. fix cpu-np. It stays pending "
        "(tpu-rl:workflow.unschedulableTimeout)"
    )
    assert lines == [f"{WHAT}: pending: pod {name} cannot be scheduled yet (cpu-np)"]


def test_scheduled_one_poll_before_the_bound_waits_on(clock):
    def script(t):
        pods = (
            [STUCK_POD]
            if t < BOUNDS.unschedulable - POLL_SECONDS
            else live_objects.pods([step_pod(TRAIN.manifest, "pathways-head", "running")], "test pods")
        )
        return (
            (ADMITTED if t < BOUNDS.unschedulable + 60 else jobset("completed", suspend=False)),
            [wl("admitted")],
            pods,
        )

    result, lines, calls = run_unschedulable(clock, script)
    assert not isinstance(result, StepWaitError) and calls == []
    assert lines[-1] == f"{WHAT}: running"


def test_the_unschedulable_time_restarts_when_the_pod_was_scheduled_meanwhile(clock):
    half = BOUNDS.unschedulable / 2

    def script(t):
        stuck = t < half or half + POLL_SECONDS <= t
        return ADMITTED, [wl("admitted")], [STUCK_POD] if stuck else []

    result, _lines, _calls = run_unschedulable(clock, script)
    # polls every 20 s: not stuck at 460, stuck again from 480, so the bound passes at 480 + 15m
    assert isinstance(result, StepWaitError) and clock.t == 480 + BOUNDS.unschedulable


def test_a_queued_step_is_not_unschedulable_and_unread_pods_do_not_count(clock):
    def script(t):
        if t < BOUNDS.unschedulable * 2:
            return jobset("running", suspend=False), [wl("admitted")], None  # the pods could not be listed
        return jobset("completed", suspend=False), [wl("admitted")], None

    result, _lines, calls = run_unschedulable(clock, script)
    assert not isinstance(result, StepWaitError) and calls == []
    queued, _lines, _calls = run_unschedulable(clock, lambda t: (jobset(), [wl("queued")], [STUCK_POD]))
    assert "still queued" in str(queued), "queued: Kueue's bound, not the scheduler's"


def test_unreadable_events_still_give_the_schedulers_words(clock):
    result, _lines, calls = run_unschedulable(
        clock, lambda t: (ADMITTED, [wl("admitted")], [STUCK_POD]), events=ClusterReadError("down")
    )
    assert calls == [1] and f"scheduler: {SCHEDULER_MESSAGE.rstrip('.')}. fix cpu-np" in str(result)


class StubReader(ClusterReader):
    """What the bounded reader's requests return (its own checks passed: JSON objects), in any shape."""

    def __init__(self, obj, workloads=(), pods=()):
        self.obj, self.workloads, self.found = obj, list(workloads), list(pods)

    def get(self, *_args):
        return self.obj

    def list(self, *_args):
        return self.workloads

    def pods(self, *_args):
        return self.found


@pytest.mark.parametrize(
    ("reader", "words"),
    [
        (StubReader({**raw_jobset(), "status": {"terminalState": ["Failed"]}}), f"{WHAT}: status.terminalState: "),
        (StubReader(raw_jobset(), workloads=[{"status": {"conditions": 5}}]), "the Kueue Workloads of "),
        (StubReader(raw_jobset("running", suspend=False), pods=[{"metadata": "x"}]), "the pods of "),
    ],
    ids=["jobset", "workload", "pod"],
)
def test_an_object_of_another_shape_is_a_failed_read_naming_it(reader, words):
    """The reader is where the wait's objects enter: a shape the API does not send is a ClusterReadError (the wait
    reports it as an unreadable cluster, one line), never a TypeError in the code past it."""
    with pytest.raises(ClusterReadError) as failed:
        waiting.read_step(reader, "tpu-rl", TRAIN.name, queued=True, pods=True)
    assert words in str(failed.value) and "\n" not in str(failed.value)


# ---------------------------------------------------------------------------------------------
# Kueue's recovery (workloads.observe.recovery): a running step whose pods stopped being Ready (a TPU maintenance
# event, a node repair, a restart) is Kueue's to wait for, within tpu-rl:kueue.recoveryTimeout


RECOVERY = 4 * 3600 + 30 * 60
RECOVERY_BOUNDS = Bounds(total=TRAIN.await_seconds, admission=PROD.kueue.admission_timeout, recovery=RECOVERY)
SINCE = "2026-11-30T10:02:00Z"
"""When the slice's pods stopped being Ready (PodsReady False WaitForRecovery's lastTransitionTime)."""
# kube-scheduler's FitError for a worker whose TPU nodes are gone (schedule_one.go): the nodes left are the system
# pool and cpu-np, whose taint the worker does not tolerate.
GONE = (
    "0/4 nodes are available: 1 node(s) had untolerated taint {tpu-rl/pool: cpu-np}, 3 node(s) didn't match Pod's "
    "node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
)


def recovering_wl(since: str = SINCE) -> live_objects.Workload:
    item = workload(raw_jobset("pending", suspend=False), "recovering", since=since)
    item["metadata"]["creationTimestamp"] = T1
    (parsed,) = live_objects.workloads([item], "test Workloads")
    return parsed


def worker_pods(state: str, hosts: int = 2) -> list[live_objects.Pod]:
    raw = [step_pod(TRAIN.manifest, "worker", state, index=i, message=GONE) for i in range(hosts)]
    head = step_pod(TRAIN.manifest, "pathways-head", "running")
    return live_objects.pods([head, *raw], "test pods")


WORKER = f"{TRAIN.name}-worker-0-0-x7k2p"
TRAINING = (jobset("running", suspend=False), [wl("running")], worker_pods("running"))
MAINTENANCE = (jobset("pending", suspend=False), [recovering_wl()], worker_pods("unschedulable"))
RECOVERY_LINE = (
    f"{WHAT}: Kueue waits for the slice to come back (recovery, until 14:32 UTC): pod {WORKER} cannot be scheduled "
    "yet (the TPU slice pool)"
)


def run_recovery(clock, script, bounds: Bounds = RECOVERY_BOUNDS):
    reads, calls = unschedulable_reads()
    lines: list[str] = []
    result: live_objects.JobSet | StepWaitError
    try:
        result = waiting.wait_for_step(
            lambda: (*script(clock.t), None)[:3], WHAT, bounds, report=lines.append, unschedulable=reads
        )
    except StepWaitError as err:
        result = err
    return result, lines, calls


def test_a_maintenance_within_kueues_recovery_budget_is_followed_past_the_unschedulable_bound(clock):
    """The slice's workers wait 2 h for their nodes (4 x the unschedulable bound): Kueue's recovery budget runs, so
    the wait follows the step, saying what Kueue waits for and until when, and the run goes on."""
    hours = 3600

    def script(t):
        if t < hours:
            return TRAINING
        if t < 3 * hours:
            return MAINTENANCE
        return TRAINING if t < 4 * hours else (jobset("completed", suspend=False), [wl("recovered")], None)

    result, lines, calls = run_recovery(clock, script)
    assert not isinstance(result, StepWaitError), result
    assert calls == [] and clock.t == 4 * hours
    assert lines == [f"{WHAT}: running", RECOVERY_LINE, f"{WHAT}: running"]


def test_kueue_giving_up_on_the_recovery_fails_with_one_line_naming_its_budget(clock):
    """Past the budget Kueue deactivates the Workload (backoffLimitCount 0): `up` stops at once, and says it was the
    recovery's budget that passed."""
    err, lines, _calls = run_recovery(clock, lambda t: MAINTENANCE if t < RECOVERY else (jobset(), [wl("deactivated")]))
    assert isinstance(err, StepWaitError) and clock.t == RECOVERY
    assert str(err) == (
        f"Kueue stopped {WHAT} (DeactivatedDueToRequeuingLimitExceeded: {KUEUE_MESSAGES['deactivated']}); its pods "
        "were not all Ready again within tpu-rl:kueue.recoveryTimeout (4h30m) after they stopped being Ready at "
        "10:02 UTC (a TPU maintenance event, a node repair or a restart that outlasted it), so it holds no quota now. "
        "The next `make up STACK=<stack>` runs it again; if the slice's maintenance takes longer, raise "
        "tpu-rl:kueue.recoveryTimeout"
    )
    assert "\n" not in str(err) and lines == [RECOVERY_LINE]


def test_a_stopped_step_the_wait_never_saw_recovering_names_both_timeouts(clock):
    """A later `up` (the workflow's next round) that finds the step already stopped cannot tell its start from a
    recovery (Kueue's eviction resets PodsReady to WaitForStart): the line names both keys."""
    err, _lines, _calls = run_recovery(clock, lambda t: (jobset(), [wl("deactivated")]))
    assert (
        "raise tpu-rl:kueue.podsReadyTimeout; if the slice's maintenance takes longer, tpu-rl:kueue.recoveryTimeout"
        in str(err)
    )


def test_a_recovery_that_began_before_this_wait_keeps_kueues_deadline(clock):
    """The next round's `up` adopts a step mid-recovery: the deadline shown is the Workload's, not this wait's."""
    early = (jobset("pending", suspend=False), [recovering_wl("2026-11-30T06:40:00Z")], worker_pods("unschedulable"))
    result, lines, _calls = run_recovery(clock, lambda t: early if t < 3600 else COMPLETED)
    assert not isinstance(result, StepWaitError)
    assert lines[0] == RECOVERY_LINE.replace("14:32", "11:10")


def test_kueue_not_acting_past_its_budget_leaves_the_step_to_the_unschedulable_bound(clock):
    """A Kueue that does not stop the step at its budget (its controller down): the wait covers the budget from the
    first poll that saw the recovery, then the unschedulable bound runs."""
    err, lines, calls = run_recovery(clock, lambda t: MAINTENANCE)
    assert isinstance(err, StepWaitError) and calls == [1]
    assert clock.t == RECOVERY + BOUNDS.unschedulable
    assert str(err).startswith(f"{WHAT} could not be scheduled for 15m: pod {WORKER} (pool the TPU slice pool)")
    assert lines == [RECOVERY_LINE, f"{WHAT}: pending: pod {WORKER} cannot be scheduled yet (the TPU slice pool)"]


def test_without_a_known_recovery_budget_the_unschedulable_bound_holds(clock):
    """A queue managed elsewhere (tpu-rl:kueue.queue): its Kueue's recovery budget is not known here."""
    err, _lines, _calls = run_recovery(clock, lambda t: MAINTENANCE, BOUNDS)
    assert isinstance(err, StepWaitError) and clock.t == BOUNDS.unschedulable
    assert "could not be scheduled for 15m" in str(err)


def test_a_step_starting_is_not_in_recovery(clock):
    """PodsReady WaitForStart (its pods were never all Ready): Kueue's bound is podsReadyTimeout from the admission,
    above the unschedulable bound, whose reasons come first."""
    starting = wl(
        "admitted",
        QuotaReserved=("True", "QuotaReserved", "Quota reserved"),
        Admitted=("True", "Admitted", "The workload is admitted"),
        PodsReady=("False", "WaitForStart", "Not all pods are ready or succeeded"),
    )
    err, _lines, _calls = run_recovery(clock, lambda t: (MAINTENANCE[0], [starting], MAINTENANCE[2]))
    assert isinstance(err, StepWaitError) and clock.t == BOUNDS.unschedulable


@pytest.mark.parametrize(
    ("change", "recovering"),
    [
        ({}, True),
        ({"Admitted": ("False", "NoReservation", "The workload has no reservation")}, False),
        ({"Evicted": ("True", "PodsReadyTimeout", TIMEOUT)}, False),
        ({"PodsReady": ("True", "Recovered", "All pods reached readiness and the workload is running")}, False),
        ({"PodsReady": ("False", "WaitForStart", "Not all pods are ready or succeeded")}, False),
    ],
    ids=["waiting", "not-admitted", "evicted", "recovered", "starting"],
)
def test_what_counts_as_kueues_recovery(change, recovering):
    from workloads.observe.recovery import recovering as read

    base = {c.type: (c.status, c.reason, c.message) for c in recovering_wl().status.conditions}
    found = read([wl("admitted", **{**base, **change})], RECOVERY)
    assert (found is not None) == recovering
    inactive = recovering_wl().model_copy(update={"spec": live_objects.WorkloadSpec(active=False)})
    assert read([inactive], RECOVERY) is None and read([], RECOVERY) is None
    assert read([wl("deactivated", created=T0), recovering_wl()], RECOVERY) is not None, "the newest counts"


def test_what_kueue_waits_for():
    from workloads.observe.pod_state import Stuck
    from workloads.observe.recovery import Recovery, line

    since = recovering_wl().status.conditions[-1].last_transition_time
    found = Recovery(since, RECOVERY)
    assert line(found, []) == "Kueue waits for its pods to be Ready again (recovery, until 14:32 UTC)"
    cpu = Stuck("p-convert-0-0-x7k2p", "cpu-np", "")
    assert (
        line(found, [cpu])
        == "Kueue waits for pool cpu-np to take pod p-convert-0-0-x7k2p again (recovery, until 14:32 UTC)"
    )
    assert (
        line(Recovery(None, RECOVERY), []) == "Kueue waits for its pods to be Ready again (recovery, for up to 4h30m)"
    )
