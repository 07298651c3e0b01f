"""Where each training attempt's start-up went, and what the slice bills: plain functions of the run's logs, its
TensorBoard events and the live objects of its step (read here, bounded).

An attempt's start-up runs from its *begin* (the first attempt's: the JobSet's creation; a restart's: the end of
the attempt before it, when its log was copied to GCS; a retry by `pulumi up` makes a new JobSet, whose creation is
then the begin) to its first training step. It is cut at milestones, in the order the start-up passes them
(``MILESTONES``); each component is the time from the milestone before to its own:

======================  ==================  ========================================================================
component               milestone           where its time is read
======================  ==================  ========================================================================
admission               Admitted, pods      Kueue's Workload condition ``Admitted`` (``lastTransitionTime``, Kueue
                        created             v1beta2 ``workload_types.go``); the head pod's ``creationTimestamp``
nodes                   head scheduled      the head pod's ``PodScheduled`` condition (True) ``lastTransitionTime``
images                  head started        its workload container's ``startedAt`` (``state.running`` or
                                            ``state.terminated``): after its sidecars' and its own image pulls
set-up                  attempt             the attempt's start in its files' names (``train-<UTC start>.log``): the
                                            script's optimizer patch and base files, before ``train_rl``
nodes                   workers scheduled   the last worker pod's ``PodScheduled``: the TPU slice's nodes
images                  workers started     the last worker's container ``startedAt``: the Pathways server image
Pathways                backend             ``System Information: Jax Backend:`` (MaxText ``max_utils.py``
                                            ``print_system_information``: JAX's backend, through the Pathways proxy,
                                            once the resource manager has every worker)
load                    RL cluster          ``Creating RL cluster...`` (MaxText 0.2.5 ``train_rl.py``
                                            ``create_rl_components``): the tokenizer, the models from the converted
                                            checkpoint (``create_models_and_meshes``) and the datasets before it
compile                 restore begun       the restore's line less its X seconds: ``RLCluster(...)`` (tunix
                                            ``rl/rl_cluster.py`` ``RLEngine.__init__``, ``_init_engine``) puts the
                                            models on their meshes, starts the rollout engine (vLLM: its XLA
                                            compilation, warm-up) and sets up the actor's trainer, which restores
restore                 restored            ``Restored params from step: N in X seconds`` (tunix ``sft/
                                            checkpoint_manager.py`` ``maybe_restore``, from ``PeftTrainer.__init__``
                                            inside ``RLCluster(...)``): X, the restore as the line reports it
compile                 RL trainer          ``Setting up RL trainer...`` (``create_rl_components``): the rest of
                                            ``RLCluster(...)`` (the actor's copy in host memory), the reward
                                            functions
pre-RL eval             pre-RL eval         ``Pre RL Training:`` (``train_rl.py`` ``_rl_train_impl``, when
                                            ``num_test_batches > 0``): the learner, the weight sync and the
                                            evaluation; 0 (at the trainer's line) when the launcher's line says a
                                            resumed attempt skips it (``workloads/container/launch.py``
                                            ``SKIPPED``) or the whole log has none
first step              first step          the first ``Train step N training loss`` (tunix ``peft_trainer.py``
                                            ``_log_metrics``), else the attempt's first TensorBoard event: the
                                            training step's compilation and the first rollout
======================  ==================  ========================================================================

So compile is ``Creating RL cluster...`` to ``Setting up RL trainer...`` less the restore's seconds, and restore is
those seconds (begun no earlier than the RL cluster's line, or without it the attempt's start; a line without its
seconds leaves the split unknown: ``compile+restore``). A log that reaches the trainer's line without a restore's is
a fresh start (tunix logs only a restore): restore 0. tunix is read at c7d8950 (MaxText 0.2.5 pins a8d7058, not
readable offline); ``tests/upstream_logs.py`` holds where each line is logged, checked against MaxText's source.

A milestone that is not known (the pods of an earlier attempt are gone, a line was not logged) merges its time
into the next known one, whose component is then named by both (``nodes+images``); a milestone passed before the
one before it (the slice's nodes came while the script fetched its files) adds nothing: the components are the
start-up's critical path in this order, and they add up to it. Image pulls are also read from the pods' events
(kubelet ``pkg/kubelet/images/image_manager.go`` ``EnsureImageExists``: ``Successfully pulled image "%s" in %v (%v
including waiting). Image size: %v bytes.``, or ``Container image "%s" already present on machine``), while the API
server keeps them: one hour by default (kube-apiserver ``--event-ttl``, default ``1h0m0s``); after that only the
pod conditions say how long pods took to start.

The absl lines carry no year and the container's local time, UTC in GKE (``I1204 10:11:12.345678 ...``): the
year is the attempt's start's, or the next one's for a line dated more than a day before the start (a run across
New Year).

The slice's billed hours (``slice_billing``): with autoscaled capacity (spot, flex-start, on-demand) the TPU VMs
bill while they exist (``core.estimate`` ``BILLING``): the TPU nodes' hours from their ``creationTimestamp`` (or the
step's creation, when later) to now, times each node's ``google.com/tpu`` capacity; nodes already deleted left no
readable trace and are not counted. With a reservation the reserved slice bills every hour, used or not: the step's
share is its chips from its JobSet's creation to its end (or now).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from core.boundary import Model, Text
from core.estimate import STARTUP_GOAL_MINUTES
from core.names import TPU_ACCELERATOR_LABEL
from core.tpu import Capacity
from infra.k8s.live import ClusterReader
from infra.k8s.live_objects import Event, Meta, Pod, Workload, each, true_condition
from workloads.container.launch import SKIPPED as PRE_RL_SKIPPED
from workloads.container.restart_drill import SAYS as DRILL_SAYS
from workloads.observe.pulls import Pull, pulls

UTC = datetime.UTC
ABSL = re.compile(
    r"^[IWEF](?P<month>[01][0-9])(?P<day>[0-3][0-9]) (?P<hour>[0-2][0-9]):(?P<minute>[0-5][0-9]):"
    r"(?P<second>[0-6][0-9])(?:\.(?P<micro>[0-9]{1,6}))? +[0-9]+ [^\]\n]{0,300}\] "
)
"""The prefix absl gives a line: level, month, day, time, thread, ``file:line]``."""
RESTORED = re.compile(r"Restored params from step: [0-9]{1,12}(?: in (?P<seconds>[0-9]{1,9}\.?[0-9]{0,9}) seconds)?")
"""tunix's restore line (``sft/checkpoint_manager.py`` ``maybe_restore``: ``'Restored params from step: %d in %.3f
seconds'``), with the seconds the restore took when the line gives them."""
LOG_MARKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("backend", re.compile(r"System Information: Jax Backend: ")),
    ("RL cluster", re.compile(r"Creating RL cluster\.\.\.")),
    ("restored", RESTORED),
    ("RL trainer", re.compile(r"Setting up RL trainer\.\.\.")),
    ("pre-RL eval", re.compile(r"Pre RL Training: ")),
    ("first step", re.compile(r"Train step [0-9]{1,12} training loss")),
)
"""The log's milestones (the module's docstring), each taken at its first line in an attempt's log."""
RESTORE_BEGUN = "restore begun"
"""The milestone no line marks: the restore's line less the seconds it reports (``log_marks``)."""
MILESTONES: tuple[tuple[str, str], ...] = (
    ("admitted", "admission"),
    ("pods created", "admission"),
    ("head scheduled", "nodes"),
    ("head started", "images"),
    ("attempt", "set-up"),
    ("workers scheduled", "nodes"),
    ("workers started", "images"),
    ("backend", "Pathways"),
    ("RL cluster", "load"),
    (RESTORE_BEGUN, "compile"),
    ("restored", "restore"),
    ("RL trainer", "compile"),
    ("pre-RL eval", "pre-RL eval"),
    ("first step", "first step"),
)
"""(milestone, the component that ends at it), in the order a start-up passes them."""
COMPONENTS = tuple(dict.fromkeys(component for _, component in MILESTONES))
"""The components, in order: the estimate's (``core.estimate.STARTUP_MINUTES``) are the same."""
HEAD_JOB, WORKER_JOB = "pathways-head", "worker"
"""The replicated Jobs of the training JobSet (``workloads.specs.step_manifests``: ``HEAD_JOB``, ``WORKER_JOB``)."""
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
WORKLOAD_CONTAINER = "workload-container"
"""The head pod's container that runs the training script (``workloads.specs.step_manifests.WORKLOAD_CONTAINER``)."""
TPU_RESOURCE = "google.com/tpu"
MAX_SHOWN_ATTEMPTS = 5
"""The most attempts `make status` shows a line for (the newest; the report shows all)."""


# ---------------------------------------------------------------------------------------------
# Time in absl lines


def absl_time(line: str, start: datetime.datetime) -> datetime.datetime | None:
    """The UTC time of an absl line of an attempt that started at ``start`` (None: not an absl line)."""
    match = ABSL.match(line)
    if match is None:
        return None
    micro = (match["micro"] or "0").ljust(6, "0")
    month, day, hour, minute, second = (int(match[k]) for k in ("month", "day", "hour", "minute", "second"))
    for year in (start.year, start.year + 1):
        try:
            when = datetime.datetime(year, month, day, hour, minute, second, int(micro), tzinfo=UTC)
        except ValueError:  # 30 February, a leap second: not a time
            return None
        if when >= start - datetime.timedelta(days=1):
            return when
    return None


def log_marks(text: str, start: datetime.datetime) -> dict[str, float]:
    """Milestone -> Unix time of its first line in an attempt's log (or side file), and the restore's begin
    (``RESTORE_BEGUN``) when its line gives its seconds: never before ``Creating RL cluster...`` (else the attempt's
    ``start``)."""
    found: dict[str, float] = {}
    took: float | None = None
    for line in text.splitlines():
        if len(found) == len(LOG_MARKS):
            break
        for mark, pattern in LOG_MARKS:
            match = pattern.search(line) if mark not in found else None
            when = absl_time(line, start) if match else None
            if match and when is not None:
                found[mark] = when.timestamp()
                took = float(match["seconds"]) if mark == "restored" and match["seconds"] else took
    if took is not None:
        restored = found["restored"]
        found[RESTORE_BEGUN] = max(restored - took, min(found.get("RL cluster", start.timestamp()), restored))
    return found


# ---------------------------------------------------------------------------------------------
# The step's pods, read through infra.k8s.live_objects (the fields core/v1 ``types.go`` defines)


def _job(pod: Pod) -> str:
    """The replicated Job a pod of the step belongs to."""
    return pod.metadata.labels.get(REPLICATED_JOB_LABEL, "")


def _scheduled(pod: Pod) -> datetime.datetime | None:
    found = true_condition(pod.status.conditions, "PodScheduled")
    return found.last_transition_time if found else None


def _started(pod: Pod, container: str | None = None) -> datetime.datetime | None:
    """When ``container`` (None: the last of its containers) of ``pod`` started."""
    times = [c.started for c in pod.status.container_statuses if container is None or c.name == container]
    known = [t for t in times if t is not None]
    return max(known) if known and len(known) == len(times) else None


class _NodeStatus(Model):
    capacity: dict[str, Text] = Field(default_factory=dict)


class Node(Model):
    metadata: Meta = Field(default_factory=Meta)
    status: _NodeStatus = Field(default_factory=_NodeStatus)

    @property
    def chips(self) -> int:
        value = self.status.capacity.get(TPU_RESOURCE, "0")
        return int(value) if value.isdigit() and len(value) < 6 else 0


@dataclass
class ClusterFacts:
    """What the live objects of the training step say about its current pods and the slice."""

    jobset_created: float | None = None
    jobset_finished: float | None = None
    """When the JobSet became Completed or Failed (None: it runs)."""
    admitted: float | None = None
    pods_created: float | None = None
    head_scheduled: float | None = None
    head_started: float | None = None
    workers_scheduled: float | None = None
    workers_started: float | None = None
    pulls: list[Pull] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    """The TPU nodes of the slice's accelerator."""

    def marks(self) -> dict[str, float]:
        named = {
            "admitted": self.admitted,
            "pods created": self.pods_created,
            "head scheduled": self.head_scheduled,
            "head started": self.head_started,
            "workers scheduled": self.workers_scheduled,
            "workers started": self.workers_started,
        }
        return {k: v for k, v in named.items() if v is not None}


def _ts(value: datetime.datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _last(values: list[datetime.datetime | None]) -> float | None:
    """The last of times that are all known (None when any is not, or there are none)."""
    if not values or any(v is None for v in values):
        return None
    return max(v.timestamp() for v in values if v is not None)


def cluster_facts(
    jobset_created: datetime.datetime | None,
    workloads: list[Workload],
    pods: list[Pod],
    events: list[Event],
    nodes: list[Node],
) -> ClusterFacts:
    """The step's times from its live objects: the newest Workload's admission, the head pod's and the worker
    pods' scheduling and start (the pods of the current attempt: a restart makes new ones)."""
    admitted = [true_condition(w.status.conditions, "Admitted") for w in workloads]
    admitted_at = max((a.last_transition_time for a in admitted if a and a.last_transition_time), default=None)
    head = [p for p in pods if _job(p) == HEAD_JOB]
    workers = [p for p in pods if _job(p) == WORKER_JOB]
    first = head[0] if len(head) == 1 else None
    return ClusterFacts(
        jobset_created=_ts(jobset_created),
        admitted=_ts(admitted_at),
        pods_created=_ts(first.metadata.creation_timestamp) if first else None,
        head_scheduled=_ts(_scheduled(first)) if first else None,
        head_started=_ts(_started(first, WORKLOAD_CONTAINER)) if first else None,
        workers_scheduled=_last([_scheduled(p) for p in workers]),
        workers_started=_last([_started(p) for p in workers]),
        pulls=pulls(events, {p.metadata.name for p in pods}),
        nodes=nodes,
    )


# ---------------------------------------------------------------------------------------------
# Attempts


@dataclass(frozen=True)
class LogAttempt:
    """What an attempt's files say: its start (in their names), when they were last written, its milestones."""

    name: str
    start: float
    ended: float | None = None
    marks: dict[str, float] = field(default_factory=dict)
    pre_rl_skipped: bool = False
    """The launcher's line that this resumed attempt skips the pre-RL evaluation (``launch.SKIPPED``) is there."""
    drilled: bool = False
    """The restart drill ended it (``restart_drill.SAYS``): the attempt after it is the drill's restart."""


@dataclass
class Startup:
    """One attempt's start-up, cut into components (seconds each, in order)."""

    attempt: int
    """1 for the first attempt."""
    name: str
    """Its UTC start (``20261130T050000Z``), or ``starting`` while its script has not started."""
    components: list[tuple[str, float]]
    done: bool
    """It reached its first training step (else it is still starting, or ended before)."""
    ending: str = ""
    """What the last component stops at when not done: ``now`` or ``its end``."""
    pulls: list[Pull] = field(default_factory=list)
    resumed: bool | None = None
    """It restored the run's checkpoint (tunix's ``Restored params`` line, or the launcher's word that it skips the
    pre-RL evaluation); False: its log reached ``Setting up RL trainer...`` without a restore, a fresh start (before
    the run's first checkpoint); None: its log does not say yet."""
    drill: bool = False
    """The restart drill's restart: the drill (``tpu-rl:workflow.restartDrill``) ended the attempt before it."""

    @property
    def seconds(self) -> float:
        return sum(seconds for _, seconds in self.components)

    def chip_hours(self, chips: int) -> float:
        return self.seconds * chips / 3600

    @property
    def goal_met(self) -> bool | None:
        """Whether a finished restart (an attempt after the run's first that resumed from the run's checkpoint: a
        restart or a retry, compiling from the run's cache) started within the start-up goal
        (``core.estimate.STARTUP_GOAL_MINUTES``); None for the first attempt, a fresh start (no checkpoint yet: it
        evaluates the base again), an attempt whose log does not say, and one not finished starting."""
        if self.attempt <= 1 or not self.done or not self.resumed:
            return None
        return self.seconds / 60 <= STARTUP_GOAL_MINUTES

    def to_json(self, chips: int) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "start": self.name,
            "done": self.done,
            "ending": self.ending,
            "seconds": round(self.seconds, 1),
            "resumed": self.resumed,
            "goalMet": self.goal_met,
            "drill": self.drill,
            "chipHours": round(self.chip_hours(chips), 2),
            "components": [
                {"name": name, "seconds": round(seconds, 1), "chipHours": round(seconds * chips / 3600, 2)}
                for name, seconds in self.components
            ],
            "pulls": [p.to_json() for p in self.pulls],
        }


def cut(begin: float | None, marks: dict[str, float], end: float | None = None) -> list[tuple[str, float]]:
    """The components from ``begin`` through the known milestones (``MILESTONES`` order) and, when given, to
    ``end`` (the attempt still starting, or ended before its first step: its last component named ``…+``)."""
    parts: list[tuple[str, float]] = []
    pending: list[str] = []
    previous = begin
    for milestone, component in MILESTONES:
        if component not in pending:
            pending.append(component)
        when = marks.get(milestone)
        if when is None:
            continue
        if previous is not None:
            parts.append(("+".join(pending), max(0.0, when - previous)))
            previous = max(previous, when)
        else:
            previous = when
        pending = []
    if end is not None and previous is not None and end > previous:
        parts.append((pending[0] if pending else "after", end - previous))  # the stage it is (or was) in
    merged: dict[str, float] = {}
    for name, seconds in parts:
        merged[name] = merged.get(name, 0.0) + seconds
    return list(merged.items())


def startups(
    attempts: list[LogAttempt],
    cluster: ClusterFacts | None = None,
    first_events: Iterable[float] = (),
    now: float | None = None,
) -> list[Startup]:
    """Every attempt's start-up (the module's docstring); the live pods' times go to the attempt they run (the
    first that started after the head pod was created), or to a new one still starting (``now``: the clock)."""
    ordered = sorted(attempts, key=lambda a: a.start)
    events = sorted(first_events)
    live = cluster.marks() if cluster else {}
    created = cluster.pods_created if cluster else None
    target = next((i for i, a in enumerate(ordered) if created is not None and a.start >= created), None)
    if cluster is not None and created is not None and target is None:
        ordered.append(LogAttempt("starting", float("inf")))
        target = len(ordered) - 1
    found = []
    for index, attempt in enumerate(ordered):
        after = ordered[index + 1].start if index + 1 < len(ordered) else float("inf")
        marks = dict(attempt.marks)
        if attempt.name != "starting":
            marks["attempt"] = attempt.start
        fresh = "RL trainer" in marks and "restored" not in marks  # tunix restores before the trainer's line
        resumed = True if "restored" in attempt.marks or attempt.pre_rl_skipped else (False if fresh else None)
        if fresh:  # restored nothing: the whole RL cluster's set-up is compile, the restore 0
            marks[RESTORE_BEGUN] = marks["restored"] = marks["RL trainer"]
        if "first step" not in marks:
            event = next((t for t in events if attempt.start <= t < after), None)
            if event is not None:
                marks["first step"] = event
        known = attempt.pre_rl_skipped or "first step" in attempt.marks  # the launcher said so, or the whole log
        if known and "first step" in marks and "pre-RL eval" not in marks and "RL trainer" in marks:
            marks["pre-RL eval"] = marks["RL trainer"]  # a resumed attempt (workloads/container/launch.py), or none
        if index == target:
            marks.update(live)
        previous = ordered[index - 1].ended if index else None
        jobset = cluster.jobset_created if cluster else None
        anchor = min((v for k, v in marks.items() if k != "admitted"), default=None)
        begins = [t for t in (previous, jobset) if t is not None and (anchor is None or t <= anchor)]
        begin = max(begins) if begins else None
        if begin is not None:
            marks = {k: v for k, v in marks.items() if v >= begin}
        done = "first step" in marks
        live_now = index == len(ordered) - 1 and now is not None and attempt.ended is None
        end = None if done else (now if live_now else attempt.ended)
        parts = cut(begin, marks, end)
        ending = "" if done else ("now" if live_now else "its end")
        pulled = cluster.pulls if cluster and index == target else []
        drill = index > 0 and ordered[index - 1].drilled
        found.append(Startup(index + 1, attempt.name, parts, done, ending, pulled, resumed, drill))
    return found


# ---------------------------------------------------------------------------------------------
# What the slice bills


@dataclass(frozen=True)
class Billing:
    chip_hours: float | None
    basis: str

    def to_json(self) -> dict[str, Any]:
        rounded = round(self.chip_hours, 2) if self.chip_hours is not None else None
        return {"chipHours": rounded, "basis": self.basis}


def slice_billing(
    capacity: str | None,
    chips: int,
    cluster: ClusterFacts | None,
    now: float,
    finished: float | None = None,
) -> Billing:
    """The slice's billed chip-hours for the training step (the module's docstring); ``capacity``: the stack's mode
    (``core.tpu.Capacity``, or its string as ``make report --capacity`` gives it), None when unknown."""
    created = cluster.jobset_created if cluster else None
    finished = finished or (cluster.jobset_finished if cluster else None)
    if capacity == Capacity.RESERVATION:
        if created is None:
            return Billing(None, "a reservation bills every hour it exists, used or not; the step's start is unknown")
        hours = max(0.0, (finished or now) - created) / 3600
        return Billing(
            hours * chips,
            f"reservation: {chips} chips from the step's creation to {'its end' if finished else 'now'}; the "
            "reservation bills every hour it exists, used or not",
        )
    if cluster is None:
        return Billing(None, "the cluster was not read")
    counted = [(n.metadata.creation_timestamp, n.chips) for n in cluster.nodes if n.chips]
    known = [(when, chips) for when, chips in counted if when is not None]
    if not known:
        return Billing(0.0, "no TPU nodes exist now (an autoscaled slice bills only while its nodes exist)")
    total = 0.0
    for when, node_chips in known:
        since = max(when.timestamp(), created) if created is not None else when.timestamp()
        total += max(0.0, now - since) / 3600 * node_chips
    first = min(when for when, _ in known)
    return Billing(
        total,
        f"{capacity or 'autoscaled'}: {len(known)} TPU nodes from their creation (first {first:%Y-%m-%d %H:%M} "
        "UTC) to now; nodes already deleted are not counted",
    )


# ---------------------------------------------------------------------------------------------
# Lines


def minutes(seconds: float) -> str:
    whole = int(round(seconds / 60))
    return f"{whole // 60}h{whole % 60:02d}m" if whole >= 60 else f"{whole}m"


def status_line(startup: Startup, chips: int) -> str:
    """``attempt 2: start-up 41m (admission 3m, nodes 12m, ...) = 21.9 chip-h``."""
    what = "start-up" if startup.done else f"starting, {minutes(startup.seconds)} to {startup.ending}"
    head = f"attempt {startup.attempt}{' (the restart drill)' if startup.drill else ''}: {what}"
    if startup.done:
        head += f" {minutes(startup.seconds)}"
    parts = ", ".join(f"{name} {minutes(seconds)}" for name, seconds in startup.components)
    line = f"{head} ({parts})" if parts else f"{head} (no milestone known)"
    line = f"{line} = {startup.chip_hours(chips):,.1f} chip-h"
    if startup.goal_met is not None:
        took = f"{startup.seconds / 60:.1f}m"
        line += f"; a restart's goal, {STARTUP_GOAL_MINUTES:g}m: {'met' if startup.goal_met else 'not met'} ({took})"
    elif startup.attempt > 1 and startup.done and startup.resumed is False:
        line += "; a fresh start (no checkpoint yet): not a restart"
    return line


def status_lines(found: list[Startup], chips: int) -> list[str]:
    """The newest attempts' lines (at most ``MAX_SHOWN_ATTEMPTS``)."""
    shown = [status_line(s, chips) for s in found[-MAX_SHOWN_ATTEMPTS:]]
    earlier = len(found) - len(shown)
    return ([f"({earlier} earlier attempts: see `make report`)"] if earlier else []) + shown


# ---------------------------------------------------------------------------------------------
# Reading (bounded)

MAX_LOG_HEAD = 4 * 1024 * 1024
"""What is read of an attempt's log: its head (every start-up line comes before the first step's)."""
MAX_ATTEMPTS = 100
"""The most attempts read (the newest)."""
_NAME = re.compile(r"(?:train|evals)-([0-9]{8}T[0-9]{6}Z)\.(log|txt)$")
"""An attempt's files under ``<output>logs/`` (``workloads.specs.train_script``): its start (UTC) and its suffix,
``txt`` for its side file, copied as lines appear, ``log`` for its whole log, copied when it exits."""


def read_log_attempts(client: Any, output_uri: str, **call: Any) -> list[LogAttempt]:
    """Each attempt's milestones from its log's head (``<output>logs/train-<start>.log``, copied when it exits),
    else its side file (copied as lines appear: the restore and the pre-RL evaluation), each read bounded."""
    from core.bounded import read_object
    from workloads.container.checkpoint_scan import split_uri

    bucket, prefix = split_uri(output_uri + "logs/")
    files: dict[str, dict[str, Any]] = {}
    written: dict[str, float] = {}
    for index, blob in enumerate(client.list_blobs(bucket, prefix=prefix, **call)):
        if index >= 2 * MAX_ATTEMPTS + 100:
            break
        match = _NAME.search(blob.name)
        if match is None:
            continue
        files.setdefault(match.group(1), {})[match.group(2)] = blob
        if blob.updated is not None:
            written[match.group(1)] = max(written.get(match.group(1), 0.0), blob.updated.timestamp())
    found = []
    for name in sorted(files)[-MAX_ATTEMPTS:]:
        start = datetime.datetime.strptime(name, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        marks: dict[str, float] = {}
        skipped = drilled = False
        for suffix in ("txt", "log"):  # the log, when there is one, has every line the side file has
            blob = files[name].get(suffix)
            if blob is None:
                continue
            cap = min(MAX_LOG_HEAD, int(blob.size or MAX_LOG_HEAD) or 1)
            data = read_object(blob, cap, f"reading {blob.name}", 0, cap - 1, **call)
            text = data.decode("utf-8", errors="replace")
            marks.update(log_marks(text, start))
            skipped = skipped or PRE_RL_SKIPPED in text
            drilled = drilled or DRILL_SAYS in text
        ended = written.get(name) if "log" in files[name] else None
        found.append(LogAttempt(name, start.timestamp(), ended, marks, skipped, drilled))
    return found


def read_cluster_facts(reader: ClusterReader, namespace: str, jobset: str, accelerator: str) -> ClusterFacts | None:
    """The training step's live objects (None: no JobSet): its Workloads, pods, the namespace's pod events and the
    nodes of the slice's accelerator, each list bounded by the reader (``infra.k8s.live.ClusterReader``)."""
    obj = reader.jobset(namespace, jobset)
    if obj is None:
        return None
    workloads = reader.step_workloads(namespace, jobset, obj.metadata.uid)
    pods = reader.step_pods(namespace, jobset)
    events = reader.pod_events(namespace)
    selector = f"{TPU_ACCELERATOR_LABEL}={accelerator}"
    nodes = each(Node, reader.nodes(selector), "the TPU nodes")
    facts = cluster_facts(obj.metadata.creation_timestamp, workloads, pods, events, nodes)
    ended = [true_condition(obj.status.conditions, kind) for kind in ("Completed", "Failed")]
    facts.jobset_finished = _ts(next((c.last_transition_time for c in ended if c is not None), None))
    return facts
