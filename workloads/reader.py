"""Reads the live state of the workflow's steps for the program, bounded: the cluster (their objects, pods and
events, and the wait for a step to end) and GCS (whether a completed step's output is usable).

In `pulumi up` a read that fails stops the run; a preview never fails because of a run's state (one warning).
The waits run in a daemon thread (``infra.threads.in_daemon_thread``): an interrupted program exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pulumi

from core.boundary import BoundaryError
from core.config.values import format_duration
from core.errors import BAD_INPUT, TpuRlError
from core.printed_commands import kubectl, make_target
from core.redact import scrub
from core.settings import Settings
from core.tpu import Capacity, TpuVersionName
from infra.k8s import credentials, live
from infra.k8s.live_objects import Pod
from infra.stop import StopError, log_info, log_warn, stop
from infra.threads import in_daemon_thread
from workloads.observe import live_state, pod_state, slice_maintenance, waiting
from workloads.observe.exported import Exported
from workloads.observe.failures import DETAIL, failure_detail
from workloads.specs.step_specs import Step

if TYPE_CHECKING:
    from google.cloud import storage

T = TypeVar("T")

OpenBucket = Callable[[], "storage.Client"]
"""A client of Cloud Storage with the program's credentials (``workloads.observe.artifacts.storage_client``)."""


@dataclass(frozen=True)
class Hub:
    """The Hugging Face Hub as the program reaches it (``program.world``): where it is and the stack's tokens."""

    endpoint: str | None
    """``HF_ENDPOINT`` (None: huggingface.co)."""
    read_token: str
    """``tpu-rl:hfToken``: the preflight and the export's comparison with the base model."""
    write_token: str
    """``tpu-rl:hfWriteToken``: the publication's preflight and the check of the published branch."""


def gcs_read(bucket: OpenBucket, what: str, check: Callable[[Any, dict[str, Any]], T], budget: Any = None) -> T:
    """A bounded GCS read with a client of ``bucket``; every failure becomes one line."""
    from google.api_core import exceptions as gcs_errors
    from google.auth.exceptions import DefaultCredentialsError

    from workloads.observe import artifacts

    try:
        client = bucket()
        return artifacts.bounded(client, what, lambda call: check(client, call), budget)
    except artifacts.StorageError as err:
        raise stop(err, "cannot verify the step's output: ") from None
    except DefaultCredentialsError:
        raise StopError(
            "cannot verify the step's output: no Google credentials for the artifact check; "
            "run `gcloud auth application-default login` (the gcp provider needs them too)",
            BAD_INPUT,
        ) from None
    except (gcs_errors.GoogleAPIError, artifacts.ArtifactMissingError, OSError, ValueError) as err:
        raise StopError(f"cannot verify the step's output in GCS: {type(err).__name__}: {scrub(str(err))}") from None


def read_export(bucket: OpenBucket, hf_uri: str) -> Exported:
    """The exported folder as GCS holds it, bounded; one line on failure."""
    from core.deadline import BUDGETS
    from workloads.observe.exported import read_exported

    return gcs_read(
        bucket,
        f"reading the exported model at {hf_uri}",
        lambda client, call: read_exported(client, hf_uri, **call),
        BUDGETS["export-check"],
    )


class HubUnknownError(TpuRlError):
    """The Hub cannot say whether a publication is whole (unreachable, a revoked token): one line."""


def resumes(step: Step) -> str:
    """What a retry of the step does beyond running it again, for the end of a line ("" when nothing)."""
    return f" ({step.retry_note})" if step.retry_note else ""


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any, context: Any = None) -> None:
    """Run ``fn`` on the program's event loop from the waiting thread; nothing once the program is gone
    (an interrupted `up` closes the loop while the thread still polls)."""
    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(fn, *args, context=context)


@dataclass(frozen=True)
class ReaderArgs:
    """What the live reader reads with and bounds its waits by, and nothing else (``reader_args`` fills it from the
    settings)."""

    namespace: str
    """The workflow's namespace: where the steps' JobSets, Workloads and pods are."""
    queued: bool
    """The steps are queued to Kueue (``tpu-rl:kueue.queue``): their Workloads are read too."""
    cluster_name: str
    """The stack's cluster: another training run of it holds the slice (without Kueue)."""
    stack: str
    """The stack, and its cluster's kubeconfig context (``Settings.kube_context``): what the lines' commands name."""
    kube_context: str
    admission_seconds: float
    """How long a step may stay queued (``tpu-rl:kueue.admissionTimeout``)."""
    unschedulable_seconds: float
    """How long a pod may stay unschedulable (``tpu-rl:workflow.unschedulableTimeout``)."""
    recovery_seconds: float | None
    """How long the stack's own Kueue waits for a running step's pods (None: not the stack's Kueue)."""
    capacity: Capacity
    """The slice's capacity mode, the CPU pool's machine and the TPU version: what an unschedulable pod's fix names."""
    cpu_machine: str
    tpu_version: TpuVersionName
    unschedulable_then: str
    """What becomes of a step `up` stopped waiting for as unschedulable."""
    maintenance: MaintenanceArgs | None = None
    """What the check of the slice's maintenance notices reads with (None: no check)."""


@dataclass(frozen=True)
class MaintenanceArgs:
    """What ``LiveReader.check_maintenance`` reads the slice's maintenance notices with and judges them by."""

    stack: str
    """The stack, which the line's commands name."""
    accelerator: str
    """The slice's nodes: GKE's accelerator and topology labels (``slice_maintenance.slice_selector``)."""
    topology: str
    hours: dict[str, float]
    """Each step's wall-clock hours in the program's estimate (``core.estimate.estimate_for``, the stack's
    ``estimate`` output), by step."""
    accepted: bool
    """`make up ACCEPT=maintenance` (``program.config.Accept``): a maintenance inside the training, or a slice that is
    away, is a warning."""
    size: slice_maintenance.SliceSize
    """What the slice should be: its nodes, and whether they exist outside training (a reservation's)."""


def maintenance_args(settings: Settings, *, accepted: bool) -> MaintenanceArgs:
    from core.estimate import estimate_for

    return MaintenanceArgs(
        stack=settings.stack,
        accelerator=settings.slice.gke_accelerator,
        topology=settings.slice.topology,
        hours={s.step: s.hours for s in estimate_for(settings).steps},
        accepted=accepted,
        size=slice_maintenance.SliceSize(
            settings.slice.hosts * settings.tpu.slices, settings.tpu.capacity == Capacity.RESERVATION
        ),
    )


def reader_args(settings: Settings, *, accept_maintenance: bool = False) -> ReaderArgs:
    """The reader's arguments from the settings; ``accept_maintenance``: `make up ACCEPT=maintenance`."""
    return ReaderArgs(
        namespace=settings.namespace,
        queued=bool(settings.kueue.queue),
        cluster_name=settings.cluster_name,
        stack=settings.stack,
        kube_context=settings.kube_context,
        admission_seconds=settings.kueue.admission_timeout,
        unschedulable_seconds=settings.workflow.unschedulable_timeout,
        # The stack's own Kueue waits this long for a running step's pods (infra/k8s/kueue.py configuration); a queue
        # managed elsewhere has its own, unknown here.
        recovery_seconds=settings.kueue.recovery_timeout if settings.kueue.install else None,
        capacity=settings.tpu.capacity,
        cpu_machine=settings.cpu_pool.machine_type,
        tpu_version=settings.tpu.version,
        unschedulable_then=_unschedulable_then(settings),
        maintenance=maintenance_args(settings, accepted=accept_maintenance),
    )


class LiveReader:
    """Reads the live objects of the steps (bounded) and waits for them to end.

    In `pulumi up` a read that fails stops the run: it cannot tell a failed step from a finished
    one. A preview never fails because of a run's state: an unreadable cluster is one warning (the
    reader's later reads fail at once) and the steps show as they were recorded.
    """

    def __init__(
        self,
        args: ReaderArgs,
        kubeconfig: pulumi.Output[str],
        ready: pulumi.Output[Any],
        *,
        connect: live.Connect,
        bucket: OpenBucket,
        hub: Hub,
    ) -> None:
        self.args = args
        self.connect = connect
        """A reader of the cluster from its kubeconfig (``infra.k8s.live.ClusterReader`` in a real run)."""
        self.bucket = bucket
        """A client of Cloud Storage: a completed step's output is checked with it."""
        self.hub = hub
        """The Hub: the export's comparison with the base model, the published branch's check."""
        # Read once the workflow's namespace exists: the API server answers by then (a new cluster's
        # first minutes see restarts of the control plane).
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(kubeconfig, ready).apply(lambda args: args[0])
        )
        self.parent: pulumi.Resource | None = None
        """The component whose warnings these are (``WorkflowRun``, which sets itself here)."""
        self.preview = pulumi.runtime.is_dry_run()
        self._reader: live.ClusterReader | None = None
        self._warned = False
        self.output_checks: dict[str, Callable[[Step], str | None]] = {}
        """Step name -> a check of its output beyond GCS (``workloads.wiring``: the publication's branch on the
        Hub): a completed step it finds a problem with is retried, like one whose files in GCS are incomplete."""

    def _cluster(self, config: str) -> live.ClusterReader:
        if self._reader is None:
            self._reader = self.connect(config)
        return self._reader

    def _unreadable(self, what: str, err: Exception) -> None:
        if not self.preview:
            raise StopError(f"cannot read {what}: {err}")
        if not self._warned:
            self._warned = True
            log_warn(
                f"preview could not read the cluster ({err}); every step is shown as recorded at the last "
                "`pulumi up`, which reads the cluster again and retries a step that ended Failed (a runner "
                "outside tpu-rl:authorizedNetworks sees this warning)",
                resource=self.parent,
            )

    def _refuse(self, message: str) -> None:
        """Stop `pulumi up` with `message`; a preview only warns (it changes nothing)."""
        if not self.preview:
            raise StopError(message)
        log_warn(message, resource=self.parent)

    def _output_problem(self, step: Step) -> str | None:
        """Why a completed step's output is unusable (read in GCS), None when it is fine or unknown."""
        from workloads.observe.artifacts import step_problem

        try:
            problem = gcs_read(
                self.bucket,
                f"checking {step.artifact_uri}",
                lambda client, call: step_problem(client, step.output, step.artifact_uri, **call),
            )
            check = self.output_checks.get(step.step)
            if problem is None and check is not None:
                try:
                    problem = check(step)
                except HubUnknownError as err:  # not a reason to run it again: kept as recorded
                    log_warn(f"{err}; {step.name} is kept as recorded", resource=self.parent)
            return problem
        except pulumi.RunError as err:
            if not self.preview:
                raise
            log_warn(f"preview could not check the output of {step.name}: {err}", resource=self.parent)
            return None

    def _read(self, reader: live.ClusterReader, step: Step, *, pods: bool = False) -> waiting.Poll:
        return waiting.read_step(reader, self.args.namespace, step.name, queued=self.args.queued, pods=pods)

    def marker(self, step: Step) -> pulumi.Output[str | None]:
        """The step's retry marker (``replacement_trigger``); None when a preview cannot read the cluster."""
        what = f"JobSet {self.args.namespace}/{step.name}"

        def read(config: str) -> str | None:
            try:
                obj, workloads, _pods = self._read(self._cluster(config), step)
                current = live_state.live_step(obj, workloads)
            except live.ClusterReadError as err:
                self._unreadable(what, err)
                return None
            retry = current.state in ("failed", "stopped")
            if current.state == "failed":
                reason = (current.reason or "Failed")[:60]
                self._say(f"{what} ended Failed ({reason}); {self._will()}{resumes(step)}")
            elif current.state == "stopped":
                reason = (current.reason or "Deactivated")[:60]
                self._say(f"{what} was stopped by Kueue ({reason}); {self._will()}{resumes(step)}")
            elif current.state == "succeeded":
                problem = self._output_problem(step)
                if problem:
                    retry = True
                    self._say(f"{what} completed, but {problem.split(' but ', 1)[-1]}; {self._will()}{resumes(step)}")
            return live_state.retry_marker(current, retry=retry)

        return pulumi.Output.unsecret(self.kubeconfig.apply(read))

    def _will(self) -> str:
        return f"`{make_target('up', self.args.stack)}` will retry it" if self.preview else "retrying it"

    def _say(self, message: str) -> None:
        if self.preview:
            log_warn(message, resource=self.parent)
        else:
            log_info(message, resource=self.parent)

    def wait(self, step: Step, resource: pulumi.CustomResource) -> pulumi.Output[Any]:
        """The status the step's JobSet ended with, once the provider applied it (``workloads.observe.waiting``); a
        failed step's status carries what its pods say (``failures.DETAIL``: a container OOMKilled)."""
        args = self.args
        namespace = args.namespace
        what = f"JobSet {namespace}/{step.name}"
        bounds = waiting.Bounds(
            total=step.await_seconds,
            admission=args.admission_seconds,
            unschedulable=args.unschedulable_seconds,
            recovery=args.recovery_seconds,
        )

        def start(found: list[Any]) -> asyncio.Future[Any]:
            config = found[1]
            loop = asyncio.get_running_loop()
            credentials.load_client()  # on the loop's thread: two threads importing the client at once can deadlock
            # The program's context (the SDK keeps its engine connection in context variables): a log call
            # made for the waiting thread runs in it, not in the thread's empty one.
            program = contextvars.copy_context()

            def report(message: str) -> None:  # progress on the step's row (called from the waiting thread)
                _on_loop(loop, lambda: log_info(message, resource=resource, ephemeral=True), context=program)

            def fresh(read: Callable[[live.ClusterReader], T]) -> T:
                reader = self.connect(config)  # a fresh credential on every poll
                try:
                    return read(reader)
                finally:
                    reader.close()

            unschedulable = waiting.Unschedulable(
                events=lambda: fresh(lambda reader: reader.pod_events(namespace)),
                fix=lambda pool: pod_state.pool_fix(
                    pool,
                    capacity=args.capacity,
                    cpu_machine=args.cpu_machine,
                    version=args.tpu_version,
                    context=args.kube_context,
                ),
                then=args.unschedulable_then,
            )

            def work() -> Any:
                try:
                    obj = waiting.wait_for_step(
                        lambda: fresh(lambda reader: self._read(reader, step, pods=True)),
                        what,
                        bounds,
                        report=report,
                        unschedulable=unschedulable,
                        stack=args.stack,
                    )
                except waiting.StepWaitError as err:
                    raise stop(err) from None
                status = obj.status.model_dump(mode="json", by_alias=True)
                if live_state.live_step(obj).state == "failed":
                    try:
                        found = fresh(lambda reader: reader.step_pods(namespace, step.name))
                    except live.ClusterReadError:
                        found = []  # the failure is reported without what its pods say
                    detail = failure_detail(step, pod_state.oom_killed(found))
                    if detail:
                        status[DETAIL] = detail
                return status

            return in_daemon_thread(work, "tpu-rl-wait")

        return pulumi.Output.unsecret(pulumi.Output.all(resource.id, self.kubeconfig).apply(start))

    def image_digests(self, steps: Sequence[Step], after: pulumi.Output[Any]) -> pulumi.Output[dict[str, str]]:
        """Image -> the digest the steps' pods ran (``pods.image_digests``), read once ``after`` resolved; {} in
        a preview or when the pods cannot be read (the card then says the digests were not recorded)."""
        namespace = self.args.namespace

        def read(args: list[Any]) -> dict[str, str]:
            if self.preview:
                return {}
            found: list[Pod] = []
            # A fresh reader (a new credential): the steps ended hours after the first reads of this `up`.
            reader = self.connect(args[0])
            try:
                for step in steps:
                    found += reader.step_pods(namespace, step.name)
            except live.ClusterReadError as err:
                log_warn(f"no image digests for the model card: cannot read the pods ({err})", self.parent)
                return {}
            finally:
                reader.close()
            return pod_state.image_digests(found)

        return pulumi.Output.unsecret(pulumi.Output.all(self.kubeconfig, after).apply(read))

    def check_slice_free(self, train: Step) -> pulumi.Output[str]:
        """Without Kueue: fail (warn in preview) when another training run of this cluster still holds the
        TPU slice (with Kueue, a second run queues behind the first)."""
        namespace = self.args.namespace
        selector = f"app.kubernetes.io/instance={self.args.cluster_name},app.kubernetes.io/component=train"

        def read(config: str) -> str:
            try:
                items = self._cluster(config).jobsets(namespace, selector)
            except live.ClusterReadError as err:
                self._unreadable(f"the training runs in {namespace}", err)
                return ""
            others = live_state.running_elsewhere(items, train.name)
            if others:
                context = self.args.kube_context
                watch = kubectl(context, "get", "jobset", "-n", namespace, "-w")
                stop = kubectl(context, "delete", "jobset", "-n", namespace, others[0])
                message = (
                    f"training run {', '.join(others)} (an earlier configuration) is still running on the TPU slice; "
                    f"{train.name} cannot start until it ends. Wait for it (`{watch}`) "
                    f"or stop it (`{stop}`), then run `{make_target('up', self.args.stack)}` again"
                )
                self._refuse(message)
            return ""

        return pulumi.Output.unsecret(self.kubeconfig.apply(read))

    def check_maintenance(self, train: Step, before: Sequence[Step]) -> pulumi.Output[str]:
        """`pulumi up` only (a preview and the offline plan read nothing): before training's JobSet is created (it
        does not exist, or ended Failed or stopped and is retried), stop when GKE scheduled a host maintenance of the
        slice inside the expected training, from now to the estimate's end of training after the steps ``before``
        it that have not completed (``workloads.observe.slice_maintenance``); with `ACCEPT=maintenance` one warning. A
        slice without nodes (an autoscaled pool before training) has nothing to read. The notices are advice:
        when they cannot be read (nodes are cluster-scoped), `up` says so in one warning and goes on."""
        args = self.args.maintenance
        if args is None or self.preview:
            return pulumi.Output.from_input("")

        def read(config: str) -> str:
            reader = self.connect(config)  # its own: a refused list of nodes must not fail the steps' reads
            try:
                found = self._maintenance_window(reader, args, train, before)
            except (live.ClusterReadError, BoundaryError) as err:
                log_warn(
                    f"the slice's maintenance notices were not read ({err}); training starts unchecked: `make status "
                    f"STACK={args.stack}` shows them",
                    resource=self.parent,
                )
                return ""
            finally:
                reader.close()
            if found is not None:
                self._judge_maintenance(args, *found)
            return ""

        return pulumi.Output.unsecret(self.kubeconfig.apply(read))

    def _maintenance_window(
        self, reader: live.ClusterReader, args: MaintenanceArgs, train: Step, before: Sequence[Step]
    ) -> tuple[slice_maintenance.SliceNotices, slice_maintenance.Expected] | None:
        """The slice's notices and the expected training, or None when training's JobSet is followed, not created."""
        namespace, queued = self.args.namespace, self.args.queued
        obj, workloads, _pods = waiting.read_step(reader, namespace, train.name, queued=queued)
        if live_state.live_step(obj, workloads).state not in ("absent", "failed", "stopped"):
            return None  # running, queued or completed: followed as it is
        waits = 0.0
        for step in before:
            obj, workloads, _pods = waiting.read_step(reader, namespace, step.name, queued=queued)
            if live_state.live_step(obj, workloads).state != "succeeded":
                waits += args.hours.get(step.step, 0.0) * 3600
        notices = slice_maintenance.read_slice(reader, args.accelerator, args.topology)
        now = datetime.datetime.fromtimestamp(slice_maintenance.clock(), datetime.UTC)
        return notices, slice_maintenance.Expected(now, waits, args.hours.get(train.step, 0.0) * 3600)

    def _judge_maintenance(
        self, args: MaintenanceArgs, notices: slice_maintenance.SliceNotices, expected: slice_maintenance.Expected
    ) -> None:
        """Stop `up` on a slice that is away, or a maintenance inside the expected training (warn when accepted); say
        one that comes later."""
        if notices.problems:
            log_warn(f"maintenance notices: {notices.problem()}", resource=self.parent)
        gone = slice_maintenance.away(notices, args.size)
        if gone and not args.accepted:
            raise StopError(slice_maintenance.away_refusal(gone, args.stack))
        if gone:
            log_warn(
                f"the TPU slice is away: {gone}; going on as told (ACCEPT=maintenance): training waits for it "
                '(docs/maintenance.md "The check in up")',
                resource=self.parent,
            )
        hits = slice_maintenance.inside(notices, expected)
        if hits and not args.accepted:
            raise StopError(slice_maintenance.refusal(hits, expected, args.stack))
        if hits:
            log_warn(
                f"{slice_maintenance.notice(hits, expected)}; going on as told (ACCEPT=maintenance): the run will meet "
                'it (docs/maintenance.md "The check in up")',
                resource=self.parent,
            )
        elif later := slice_maintenance.later(notices, expected):
            log_info(later, resource=self.parent)


def _unschedulable_then(settings: Settings) -> str:
    """What becomes of a step `up` stopped waiting for as unschedulable."""
    up = make_target("up", settings.stack)
    if settings.kueue.install:
        # Reached for a step that is starting (Kueue's PodsReady WaitForStart: its bound runs from the admission);
        # a running step whose pods stopped being Ready is Kueue's to wait for (workloads.observe.recovery).
        return (
            "It stays pending: Kueue stops it after tpu-rl:kueue.podsReadyTimeout "
            f"({format_duration(settings.kueue.pods_ready_timeout)}) and the next `{up}` runs it again"
        )
    return f"It stays pending and starts if capacity appears; run `{up}` again to follow it"
