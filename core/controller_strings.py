"""Every string the stack's rules match in what Kueue, JobSet and Kubernetes write, and where each writer writes it
(plain data): the one list ``make controller`` checks in a release's source and the tests check against the rules.

A rule that reads a controller's words (a Workload's condition, a JobSet's terminal state, a Job's failure reason in
the training JobSet's failure policy, a pod's event) silently stops matching when the controller changes them: the
wait then never sees Kueue stop a step, or the restart drill fails the run. So each such string is a row of
``STRINGS``: what the rule matches and how (``equals``, ``prefix``, ``contains``, a regular expression ``searched``),
whose words it is, an ``example`` as a live object holds it, the rules that match it (product files), and its
``sources``: each Go string literal the writer builds it from, in the file of its repository that holds it (format
verbs kept: ``flavor %s not found``).

- Kueue's and JobSet's rows are checked in every release ``make controller`` adopts (``tools/controller_facts.py``
  ``string_problems``: each literal must still be in its file at the release's tag), and again offline on every
  adopted release's facts.
- Kubernetes' rows are a reviewed table: the API's constants (``kubernetes/api``, the module ``k8s.io/api`` a release
  builds with) were read at the tags of ``KUBERNETES_MINORS``; the Job controller's message, the scheduler's, the
  kubelet's and the cluster autoscaler's events and the runtime's ``OOMKilled`` in the copies
  ``tests/test_controller_facts.py`` names (``KUBERNETES_READ``). ``make controller NAME=jobset`` refuses a JobSet
  built against another Kubernetes minor (its ``go.mod``) until they are read there, and checks that its webhook
  still accepts each Job failure reason the failure policy names and that it still matches them as the rules rely
  on (``pkg/controllers/failure_policy.go``).

``tests/test_adopt_controller.py`` derives every string the rules match from the rule modules and the step manifests
and fails when one is not a row here, or a row is matched by no rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from core.names import DRILL_EXIT

Writer = Literal["kueue", "jobset", "kubernetes"]
How = Literal["equals", "prefix", "contains", "searched"]

KUEUE_TYPES = "apis/kueue/v1beta2/workload_types.go"
SCHEDULER = "pkg/scheduler/scheduler.go"
FLAVORS = "pkg/scheduler/flavorassigner/flavorassigner.go"
WORKLOAD = "pkg/workload/workload.go"
RECONCILER = "pkg/controller/jobframework/reconciler.go"
JOBSET_TYPES = "api/jobset/v1alpha2/jobset_types.go"
JOB_API = "batch/v1/types.go"
CORE_API = "core/v1/types.go"
KUBERNETES_API = "kubernetes/api"
KUBERNETES = "kubernetes/kubernetes"
AUTOSCALER = "kubernetes/autoscaler"
CONTAINERD = "containerd/containerd"

LIVE_STATE = "workloads/observe/live_state.py"
RECOVERY = "workloads/observe/recovery.py"
WAITING = "workloads/observe/waiting.py"
STARTUP = "workloads/observe/startup.py"
POD_STATE = "workloads/observe/pod_state.py"
PULLS = "workloads/observe/pulls.py"
MANIFESTS = "workloads/specs/step_manifests.py"
SLICE_NODES = "workloads/observe/slice_maintenance.py"


@dataclass(frozen=True)
class Source:
    """A Go string literal a writer builds the string from, and where."""

    file: str
    """Its path in the repository (the writer's own: ``kubernetes-sigs/kueue``, ``kubernetes-sigs/jobset``;
    ``repo`` for Kubernetes)."""
    literal: str
    """The literal's value, exactly (a format's verbs kept)."""
    constant: str = ""
    """The Go constant that holds it, where one does (``WorkloadAdmitted``)."""
    repo: str = ""
    """Kubernetes' rows: the repository the file is in."""


@dataclass(frozen=True)
class Matched:
    """A string a rule of the stack matches in what a controller wrote."""

    text: str
    how: How
    writer: Writer
    what: str
    """Where the writer puts it (``a Workload's condition type``)."""
    example: str
    """What a live object holds: built from ``sources`` and matched by ``text`` (the tests check both)."""
    sources: tuple[Source, ...]
    rules: tuple[str, ...]
    """The product files whose rules match it."""
    unread: str = ""
    """Why no source is given (a closed writer): a row without sources must say."""


def _word(writer: Writer, text: str, what: str, source: Source, *rules: str) -> Matched:
    """A row matched whole, written as one literal."""
    return Matched(text, "equals", writer, what, text, (source,), rules)


def _in(text: str, how: How, example: str, source: Source, *rules: str) -> Matched:
    """A row of a Workload's QuotaReserved message."""
    return Matched(text, how, "kueue", QUOTA_MESSAGE, example, (source,), rules)


def _api(file: str, literal: str, constant: str) -> Source:
    return Source(file, literal, constant, KUBERNETES_API)


QUOTA_MESSAGE = "a Workload's QuotaReserved message"
CANNOT = "couldn't assign flavors to pod set workers: "
DEACTIVATED = (Source(KUEUE_TYPES, "Deactivated", "WorkloadDeactivated"), Source(WORKLOAD, "%sDueTo%s"))
REQUEUED = "DeactivatedDueToRequeuingLimitExceeded"
EVICTED_REASON = "a Workload's Evicted reason (ReasonWithCause)"
WORKLOAD_CONDITIONS = {
    "Admitted": (LIVE_STATE, RECOVERY, STARTUP),
    "QuotaReserved": (LIVE_STATE,),
    "Evicted": (LIVE_STATE, RECOVERY),
    "Finished": (LIVE_STATE,),
    "PodsReady": (RECOVERY,),
    "DeactivationTarget": (LIVE_STATE,),
}
PREEMPTION = "insufficient unused quota for cpu in flavor cpu, 4 more needed. "

KUEUE_ROWS: tuple[Matched, ...] = (
    *(
        _word("kueue", kind, "a Workload's condition type", Source(KUEUE_TYPES, kind, f"Workload{kind}"), *rules)
        for kind, rules in WORKLOAD_CONDITIONS.items()
    ),
    _word(
        "kueue",
        "WaitForRecovery",
        "a Workload's PodsReady reason",
        Source(KUEUE_TYPES, "WaitForRecovery", "WorkloadWaitForRecovery"),
        RECOVERY,
    ),
    _word(
        "kueue",
        "Pending",
        "a Workload's QuotaReserved reason (requeueAndUpdate)",
        Source(SCHEDULER, "Pending"),
        LIVE_STATE,
    ),
    _word(
        "kueue",
        "FailedToStart",
        "a Workload's Finished reason",
        Source(RECONCILER, "FailedToStart", "FailedToStartFinishedReason"),
        LIVE_STATE,
        WAITING,
    ),
    Matched("DeactivatedDueTo", "prefix", "kueue", EVICTED_REASON, REQUEUED, DEACTIVATED, (LIVE_STATE,)),
    Matched(
        "RequeuingLimitExceeded",
        "contains",
        "kueue",
        EVICTED_REASON,
        REQUEUED,
        (*DEACTIVATED, Source(KUEUE_TYPES, "RequeuingLimitExceeded", "WorkloadRequeuingLimitExceeded")),
        (WAITING,),
    ),
    _in(
        "insufficient unused quota",
        "contains",
        CANNOT + "insufficient unused quota for google.com/tpu in flavor tpu-v6e, 8 more needed",
        Source(FLAVORS, "insufficient unused quota for %s in flavor %s, %s more needed"),
        LIVE_STATE,
    ),
    _in(
        "Pending the preemption",
        "contains",
        PREEMPTION + "Pending the preemption of 1 workload(s)",
        Source(SCHEDULER, ". Pending the preemption of %d workload(s)"),
        LIVE_STATE,
    ),
    _in(
        "Preempting",
        "contains",
        PREEMPTION + "Preempting 1 workload(s) failed, will retry.",
        Source(SCHEDULER, ". Preempting %d workload(s) failed, will retry."),
        LIVE_STATE,
    ),
    _in(
        r"> maximum capacity",
        "searched",
        CANNOT + "insufficient quota for google.com/tpu in flavor tpu-v6e, "
        "previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)",
        Source(
            FLAVORS,
            "insufficient quota for %s in flavor %s, previously considered podsets requests (%s) + "
            "current podset request (%s) > maximum capacity (%s)",
        ),
        LIVE_STATE,
    ),
    _in(
        r"unavailable in ClusterQueue",
        "searched",
        CANNOT + "resource google.com/tpu unavailable in ClusterQueue",
        Source(FLAVORS, "resource %s unavailable in ClusterQueue"),
        LIVE_STATE,
    ),
    _in(
        r"doesn't match node affinity",
        "searched",
        CANNOT + "flavor tpu-v6e doesn't match node affinity",
        Source(FLAVORS, "flavor %s doesn't match node affinity"),
        LIVE_STATE,
    ),
    _in(
        r"untolerated taint",
        "searched",
        CANNOT + "untolerated taint {google.com/tpu present NoSchedule} in flavor tpu-v6e",
        Source(FLAVORS, "untolerated taint %s in flavor %s"),
        LIVE_STATE,
    ),
    _in(
        r"flavor \S+ not found",
        "searched",
        CANNOT + "flavor tpu-v6e not found",
        Source(FLAVORS, "flavor %s not found"),
        LIVE_STATE,
    ),
    _in(
        r"doesn't match ClusterQueue selector",
        "searched",
        "Workload namespace doesn't match ClusterQueue selector",
        Source(SCHEDULER, "Workload namespace doesn't match ClusterQueue selector"),
        LIVE_STATE,
    ),
    _in(
        r"validation failed",
        "searched",
        "resources validation failed: spec.podSets[0].template.spec.containers[0].resources.requests: Invalid value",
        Source(SCHEDULER, "resources validation failed"),
        LIVE_STATE,
    ),
    _in(
        r"LimitRange",
        "searched",
        "resources didn't satisfy LimitRange constraints: requests must not be above the limitRange max",
        Source(SCHEDULER, "resources didn't satisfy LimitRange constraints"),
        LIVE_STATE,
    ),
)
"""Kueue's words, as v0.17.1 and v0.17.8 write them into a ``kueue.x-k8s.io/v1beta2`` Workload: its condition types
(``workload_types.go``), the reasons ``SetDeactivationTarget`` and ``ReasonWithCause`` compose, and the scheduler's
messages for a Workload it cannot admit now (``flavorassigner.go``, ``scheduler.go`` ``nominate``) or ever."""

JOBSET_ROWS: tuple[Matched, ...] = tuple(
    _word(
        "jobset",
        word,
        "a JobSet's condition type and terminalState",
        Source(JOBSET_TYPES, word, f"JobSet{word}"),
        LIVE_STATE,
        STARTUP,
    )
    for word in ("Completed", "Failed")
)
"""JobSet's terminal states, as v0.10.1 and v0.12.0 write them (``jobset_controller.go`` sets ``terminalState`` to
``string(jobset.JobSetCompleted)`` or ``JobSetFailed``)."""

DRILL_PATTERN = f"with exit code {DRILL_EXIT} matching FailJob rule"
JOB_FAILED = "a Job's Failed reason (the training JobSet's onJobFailureReasons)"
POD_FAILURE_FORMAT = "Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d"
KUBELET_IMAGES = "pkg/kubelet/images/image_manager.go"
SCALE_UP_EVENTS = "cluster-autoscaler/processors/status/eventing_scale_up_processor.go"
PULLED_MESSAGE = "a pod's Pulled event message (the kubelet's EnsureImageExists)"


KUBERNETES_ROWS: tuple[Matched, ...] = (
    *(
        _word("kubernetes", reason, JOB_FAILED, _api(JOB_API, reason, f"JobReason{reason}"), MANIFESTS)
        for reason in ("BackoffLimitExceeded", "PodFailurePolicy", "DeadlineExceeded")
    ),
    Matched(
        DRILL_PATTERN,
        "searched",
        "kubernetes",
        "a Job's Failed message (the training JobSet's onJobFailureMessagePatterns)",
        f"Container workload for pod tpu-rl/run-pathways-head-0-0-x7k2p failed with exit code {DRILL_EXIT} "
        "matching FailJob rule at index 2",
        (
            Source("pkg/controller/job/pod_failure_policy.go", POD_FAILURE_FORMAT, repo=KUBERNETES),
            _api(JOB_API, "FailJob", "PodFailurePolicyActionFailJob"),
        ),
        (MANIFESTS,),
    ),
    _word(
        "kubernetes",
        "DisruptionTarget",
        "a pod's condition type (the steps' podFailurePolicy onPodConditions)",
        _api(CORE_API, "DisruptionTarget", "DisruptionTarget"),
        MANIFESTS,
    ),
    _word(
        "kubernetes",
        "PodScheduled",
        "a pod's condition type",
        _api(CORE_API, "PodScheduled", "PodScheduled"),
        POD_STATE,
        STARTUP,
    ),
    _word(
        "kubernetes",
        "Unschedulable",
        "a pod's PodScheduled reason",
        _api(CORE_API, "Unschedulable", "PodReasonUnschedulable"),
        POD_STATE,
    ),
    _word("kubernetes", "Pending", "a pod's phase", _api(CORE_API, "Pending", "PodPending"), POD_STATE),
    _word(
        "kubernetes",
        "Ready",
        "a node's condition type (the slice's nodes: up's check before training, make status)",
        _api(CORE_API, "Ready", "NodeReady"),
        SLICE_NODES,
    ),
    _word(
        "kubernetes",
        "FailedScheduling",
        "a pod's event reason (kube-scheduler handleSchedulingFailure)",
        Source("pkg/scheduler/schedule_one.go", "FailedScheduling", repo=KUBERNETES),
        POD_STATE,
    ),
    _word(
        "kubernetes",
        "OOMKilled",
        "a container's terminated reason (the container runtime)",
        Source("internal/cri/server/helpers.go", "OOMKilled", "oomExitReason", CONTAINERD),
        POD_STATE,
    ),
    *(
        _word(
            "kubernetes",
            reason,
            "a pod's event reason (the cluster autoscaler)",
            Source(SCALE_UP_EVENTS, reason, repo=AUTOSCALER),
            POD_STATE,
        )
        for reason in ("NotTriggerScaleUp", "TriggeredScaleUp")
    ),
    Matched(
        "FailedScaleUp",
        "equals",
        "kubernetes",
        "a pod's event reason (GKE's cluster autoscaler)",
        "FailedScaleUp",
        (),
        (POD_STATE,),
        unread="GKE's own autoscaler writes it (Node scale up in zones %v associated with this pod failed), and "
        "its source is not public: upstream's EventingScaleUpStatusProcessor has no such event",
    ),
    _word(
        "kubernetes",
        "Pulled",
        "a pod's event reason (the kubelet)",
        Source("pkg/kubelet/events/event.go", "Pulled", "PulledImage", KUBERNETES),
        PULLS,
    ),
    Matched(
        r'^Successfully pulled image "(?P<image>[^"]{1,500})" in (?P<pull>[0-9.hmsµun]{1,40}) '
        r"\((?P<total>[0-9.hmsµun]{1,40}) including waiting\)(?:\. Image size: (?P<bytes>[0-9]{1,15}) bytes\.)?",
        "searched",
        "kubernetes",
        PULLED_MESSAGE,
        'Successfully pulled image "us-docker.pkg.dev/cloud-tpu-images/inference/server:v1" in 41.5s (1m2.0s '
        "including waiting). Image size: 3021345678 bytes.",
        (
            Source(
                KUBELET_IMAGES,
                "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
                repo=KUBERNETES,
            ),
        ),
        (PULLS,),
    ),
    Matched(
        r'^Container image "(?P<image>[^"]{1,500})" already present on machine',
        "searched",
        "kubernetes",
        PULLED_MESSAGE,
        'Container image "us-docker.pkg.dev/cloud-tpu-images/inference/server:v1" already present on machine',
        (Source(KUBELET_IMAGES, "Container image %q already present on machine", repo=KUBERNETES),),
        (PULLS,),
    ),
)
"""Kubernetes' words the rules match: the Job controller's failure reasons and its pod failure policy's message
(``pod_failure_policy.go`` ``matchPodFailurePolicy``), the pod conditions and phase of the API, the scheduler's,
kubelet's and autoscaler's events, the runtime's ``OOMKilled``."""

STRINGS: tuple[Matched, ...] = (*KUEUE_ROWS, *JOBSET_ROWS, *KUBERNETES_ROWS)

KUBERNETES_MINORS: tuple[str, ...] = ("1.33", "1.34", "1.35", "1.36")
"""The Kubernetes minors whose API the Kubernetes rows were read at (``kubernetes/api`` v0.33.0, v0.34.1, v0.35.3 and
v0.36.0, the module ``k8s.io/api`` JobSet 0.10.1 and 0.12.0 and Kueue 0.17 build with; GKE's 1.33 to 1.35): a JobSet
release built against another is refused until the rows are read again there."""


def texts(what: str, how: How) -> tuple[str, ...]:
    """The texts of the rows of one kind of words matched one way, in the table's order."""
    return tuple(row.text for row in STRINGS if row.what == what and row.how == how)


WAITING_FOR_QUOTA = texts(QUOTA_MESSAGE, "contains")
"""Kueue's words for a Workload that fits its queue once others finish (what ``workloads.observe.live_state`` reads
as queued)."""
NEVER_FITS = texts(QUOTA_MESSAGE, "searched")
"""Kueue's words (patterns) for a Workload its queue can never admit as configured: quota, flavors, selector."""


def rows_of(writer: Writer) -> tuple[Matched, ...]:
    return tuple(row for row in STRINGS if row.writer == writer)


def checked_sources(writer: Writer) -> dict[str, tuple[Source, ...]]:
    """File -> the sources ``make controller`` looks for in it, for a release of ``writer`` (Kueue, JobSet)."""
    found: dict[str, dict[str, Source]] = {}
    for row in rows_of(writer):
        for source in row.sources:
            found.setdefault(source.file, {})[source.literal] = source
    return {file: tuple(by_literal.values()) for file, by_literal in found.items()}


def job_failure_reasons() -> dict[str, Source]:
    """Each Job failure reason the training JobSet's rules name -> its constant in ``k8s.io/api`` (what JobSet's
    webhook lists in ``validOnJobFailureReasons``)."""
    return {row.text: row.sources[0] for row in KUBERNETES_ROWS if row.what == JOB_FAILED}


def matches(row: Matched, value: str) -> bool:
    """Whether ``value`` (a live object's) is matched by the row as its rules match it."""
    if row.how == "equals":
        return value == row.text
    if row.how == "prefix":
        return value.startswith(row.text)
    if row.how == "contains":
        return row.text in value
    return re.search(row.text, value) is not None
