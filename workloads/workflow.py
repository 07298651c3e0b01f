"""Wire the three content-addressed steps to Kubernetes resources: convert -> train -> export.

Each step waits for the previous one's *verified* output: the next object's ``tpu-rl/input``
annotation is an Output that resolves only after the previous step succeeded and its artifacts
were found in GCS. A failure raises, so `pulumi up` stops and the later steps are never created.

Lifecycle (see ``workloads.build.steps`` and ``workloads.run.live_state``): a step is replaced only when
its name (its identity) changes or when its live object ended Failed (a retry); operational
fields are ``ignoreChanges``. The provider only applies a step's JobSet (``pulumi.com/skipAwait``);
the program waits for it to end, bounded (``workloads.run.waiting``), and reports Kueue's or the
JobSet's reason when it cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from core.config.values import format_duration
from core.hf_model import ModelLayout
from core.names import HUB_URL, RETRY_ANNOTATION
from core.redact import scrub
from core.settings import Settings
from infra.k8s import live
from infra.k8s.object import KubernetesObject
from workloads.build.manifests import CARD_FILES
from workloads.build.steps import INPUT_ANNOTATION, Step, Workflow
from workloads.run import live_state, waiting
from workloads.run import pods as pod_state
from workloads.run.exported import Exported
from workloads.run.failures import DETAIL, StepFailedError, check_step_status, failure_detail
from workloads.run.objects import Pod

APPLY_TIMEOUT = "10m"
"""The provider's create or update of a step: the apply only (the program does the waiting)."""
DELETE_TIMEOUT = "20m"
T = TypeVar("T")


def _gcs(what: str, check: Callable[[Any, dict[str, Any]], T], budget: Any = None) -> T:
    """A bounded GCS read with the program's credentials; every failure becomes one line."""
    from google.api_core import exceptions as gcs_errors
    from google.auth.exceptions import DefaultCredentialsError

    from workloads.run import artifacts

    try:
        client = artifacts.storage_client()
        return artifacts.bounded(client, what, lambda call: check(client, call), budget)
    except artifacts.StorageError as err:
        raise pulumi.RunError(f"cannot verify the step's output: {err}") from None
    except DefaultCredentialsError:
        raise pulumi.RunError(
            "cannot verify the step's output: no Google credentials for the artifact check; "
            "run `gcloud auth application-default login` (the gcp provider needs them too)"
        ) from None
    except (gcs_errors.GoogleAPIError, artifacts.ArtifactMissingError, OSError, ValueError) as err:
        raise pulumi.RunError(
            f"cannot verify the step's output in GCS: {type(err).__name__}: {scrub(str(err))}"
        ) from None


def read_export(hf_uri: str) -> Exported:
    """The exported folder as GCS holds it, bounded; one line on failure."""
    from core.deadline import BUDGETS
    from workloads.run.exported import read_exported

    return _gcs(
        f"reading the exported model at {hf_uri}",
        lambda client, call: read_exported(client, hf_uri, **call),
        BUDGETS["export-check"],
    )


def base_differences(
    settings: Settings,
    layout: ModelLayout | None,
    token: str,
    endpoint: str | None = None,
    revision: str | None = None,
) -> list[str]:
    """How an exported layout differs from the base model on the Hub at ``revision`` (default
    ``tpu-rl:model.revision``; the commit that was converted, once it is recorded): its config, every tensor's
    name, shape and dtype (``core.hf_model.compare``); empty: it is the whole base model."""
    from core.hf_model import compare
    from workloads.preflight import PreflightError, base_model_layout

    if layout is None:  # never with an export free of problems (read_exported)
        raise pulumi.RunError("export check: the exported folder holds no model")
    model = settings.model
    try:
        base = base_model_layout(model.spec.hf_repo, revision or model.revision, token, endpoint)
    except PreflightError as err:
        raise pulumi.RunError(
            f"export check: {err} (tpu-rl:workflow.verifyExport: false skips the comparison)"
        ) from None
    return compare(layout, base)


def export_differences(
    settings: Settings, hf_uri: str, token: str, endpoint: str | None = None, revision: str | None = None
) -> list[str]:
    """The export's own problems (files that are not a model's, missing files, shards cut short, an index that
    disagrees with the headers), or else how it differs from the base model at ``revision`` (empty: it is whole
    and is the whole base model)."""
    exported = read_export(hf_uri)
    if exported.problems:  # a folder without a layout always has its problems
        return list(exported.problems)
    return base_differences(settings, exported.layout, token, endpoint, revision)


class HubUnknownError(Exception):
    """The Hub cannot say whether a publication is whole (unreachable, a revoked token): one line."""


def _resumes(step: Step) -> str:
    return " (training resumes from its last checkpoint)" if step.step == "train" else ""


def _in_thread(work: Callable[[], T]) -> asyncio.Future[T]:
    """Run a blocking wait off the event loop, in a daemon thread (an interrupted program exits at once)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def run() -> None:
        try:
            result = work()
        except BaseException as err:  # noqa: BLE001 (handed to the program's event loop)
            _on_loop(loop, settle, future.set_exception, err)
        else:
            _on_loop(loop, settle, future.set_result, result)

    threading.Thread(target=run, name="tpu-rl-wait", daemon=True).start()
    return future


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any, context: Any = None) -> None:
    """Run ``fn`` on the program's event loop from the waiting thread; nothing once the program is gone
    (an interrupted `up` closes the loop while the thread still polls)."""
    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(fn, *args, context=context)


class LiveReader:
    """Reads the live objects of the steps (bounded) and waits for them to end.

    In `pulumi up` a read that fails stops the run: it cannot tell a failed step from a finished
    one. A preview never fails because of a run's state: an unreadable cluster is one warning (the
    reader's later reads fail at once) and the steps show as they were recorded.
    """

    def __init__(
        self, settings: Settings, kubeconfig: pulumi.Output[str], ready: pulumi.Output[Any], parent: pulumi.Resource
    ) -> None:
        self.settings = settings
        # Read once the workflow's namespace exists: the API server answers by then (a new cluster's
        # first minutes see restarts of the control plane).
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(kubeconfig, ready).apply(lambda args: args[0])
        )
        self.parent = parent
        self.preview = pulumi.runtime.is_dry_run()
        self._reader: live.ClusterReader | None = None
        self._warned = False
        self.hub_check: Callable[[Step], tuple[str | None, str | None]] | None = None
        """A publication's check on the Hub (``WorkflowRun._on_hub``): a completed publish step whose branch
        does not hold the export is retried, like a step whose files in GCS are incomplete."""

    def _cluster(self, config: str) -> live.ClusterReader:
        if self._reader is None:
            self._reader = live.ClusterReader(config)
        return self._reader

    def _unreadable(self, what: str, err: Exception) -> None:
        if not self.preview:
            raise pulumi.RunError(f"cannot read {what}: {err}")
        if not self._warned:
            self._warned = True
            pulumi.log.warn(
                f"preview could not read the cluster ({err}); every step is shown as recorded at the last "
                "`pulumi up`, which reads the cluster again and retries a step that ended Failed (a runner "
                "outside tpu-rl:authorizedNetworks sees this warning)",
                resource=self.parent,
            )

    def _refuse(self, message: str) -> None:
        """Stop `pulumi up` with `message`; a preview only warns (it changes nothing)."""
        if not self.preview:
            raise pulumi.RunError(message)
        pulumi.log.warn(message, resource=self.parent)

    def _output_problem(self, step: Step) -> str | None:
        """Why a completed step's output is unusable (read in GCS), None when it is fine or unknown."""
        from workloads.run.artifacts import step_problem

        try:
            problem = _gcs(
                f"checking {step.artifact_uri}",
                lambda client, call: step_problem(client, step.step, step.artifact_uri, **call),
            )
            if problem is None and self.hub_check is not None and step.step == "publish":
                try:
                    problem = self.hub_check(step)[0]
                except HubUnknownError as err:  # not a reason to publish again: kept as recorded
                    pulumi.log.warn(f"{err}; the publication is kept as recorded", resource=self.parent)
            return problem
        except pulumi.RunError as err:
            if not self.preview:
                raise
            pulumi.log.warn(f"preview could not check the output of {step.name}: {err}", resource=self.parent)
            return None

    def _read(self, reader: live.ClusterReader, step: Step, *, pods: bool = False) -> waiting.Poll:
        return waiting.read_step(
            reader, self.settings.namespace, step.name, queued=bool(self.settings.kueue.queue), pods=pods
        )

    def marker(self, step: Step) -> pulumi.Output[str | None]:
        """The step's retry marker (``replacement_trigger``); None when a preview cannot read the cluster."""
        what = f"JobSet {self.settings.namespace}/{step.name}"

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
                self._say(f"{what} ended Failed ({reason}); {self._will()}{_resumes(step)}")
            elif current.state == "stopped":
                reason = (current.reason or "Deactivated")[:60]
                self._say(f"{what} was stopped by Kueue ({reason}); {self._will()}{_resumes(step)}")
            elif current.state == "succeeded":
                problem = self._output_problem(step)
                if problem:
                    retry = True
                    self._say(f"{what} completed, but {problem.split(' but ', 1)[-1]}; {self._will()}{_resumes(step)}")
            return live_state.retry_marker(current, retry=retry)

        return pulumi.Output.unsecret(self.kubeconfig.apply(read))

    def _will(self) -> str:
        return "`pulumi up` will retry it" if self.preview else "retrying it"

    def _say(self, message: str) -> None:
        if self.preview:
            pulumi.log.warn(message, resource=self.parent)
        else:
            pulumi.log.info(message, resource=self.parent)

    def wait(self, step: Step, resource: pulumi.CustomResource) -> pulumi.Output[Any]:
        """The status the step's JobSet ended with, once the provider applied it (``workloads.run.waiting``); a
        failed step's status carries what its pods say (``failures.DETAIL``: a container OOMKilled)."""
        settings = self.settings
        namespace = settings.namespace
        what = f"JobSet {namespace}/{step.name}"
        bounds = waiting.Bounds(
            total=step.await_seconds,
            admission=settings.kueue.admission_timeout,
            unschedulable=settings.workflow.unschedulable_timeout,
        )

        def start(args: list[Any]) -> asyncio.Future[Any]:
            config = args[1]
            loop = asyncio.get_running_loop()
            # The program's context (the SDK keeps its engine connection in context variables): a log call
            # made for the waiting thread runs in it, not in the thread's empty one.
            program = contextvars.copy_context()

            def report(message: str) -> None:  # progress on the step's row (called from the waiting thread)
                _on_loop(loop, lambda: pulumi.log.info(message, resource=resource, ephemeral=True), context=program)

            def fresh(read: Callable[[live.ClusterReader], T]) -> T:
                reader = live.ClusterReader(config)  # a fresh credential on every poll
                try:
                    return read(reader)
                finally:
                    reader.close()

            unschedulable = waiting.Unschedulable(
                events=lambda: fresh(lambda reader: waiting.read_pod_events(reader, namespace)),
                fix=lambda pool: pod_state.pool_fix(
                    pool, capacity=settings.tpu.capacity, cpu_machine=settings.cpu_pool.machine_type
                ),
                then=_unschedulable_then(settings),
            )

            def work() -> Any:
                try:
                    obj = waiting.wait_for_step(
                        lambda: fresh(lambda reader: self._read(reader, step, pods=True)),
                        what,
                        bounds,
                        report=report,
                        unschedulable=unschedulable,
                    )
                except waiting.StepWaitError as err:
                    raise pulumi.RunError(str(err)) from None
                status = obj.status.model_dump(mode="json", by_alias=True)
                if live_state.live_step(obj).state == "failed":
                    try:
                        found = fresh(lambda reader: waiting.read_pods(reader, namespace, step.name))
                    except live.ClusterReadError:
                        found = []  # the failure is reported without what its pods say
                    detail = failure_detail(step, pod_state.oom_killed(found))
                    if detail:
                        status[DETAIL] = detail
                return status

            return _in_thread(work)

        return pulumi.Output.unsecret(pulumi.Output.all(resource.id, self.kubeconfig).apply(start))

    def image_digests(self, steps: Sequence[Step], after: pulumi.Output[Any]) -> pulumi.Output[dict[str, str]]:
        """Image -> the digest the steps' pods ran (``pods.image_digests``), read once ``after`` resolved; {} in
        a preview or when the pods cannot be read (the card then says the digests were not recorded)."""
        namespace = self.settings.namespace

        def read(args: list[Any]) -> dict[str, str]:
            if self.preview:
                return {}
            found: list[Pod] = []
            # A fresh reader (a new credential): the steps ended hours after the first reads of this `up`.
            reader = live.ClusterReader(args[0])
            try:
                for step in steps:
                    found += waiting.read_pods(reader, namespace, step.name)
            except live.ClusterReadError as err:
                pulumi.log.warn(f"no image digests for the model card: cannot read the pods ({err})", self.parent)
                return {}
            finally:
                reader.close()
            return pod_state.image_digests(found)

        return pulumi.Output.unsecret(pulumi.Output.all(self.kubeconfig, after).apply(read))

    def check_slice_free(self, train: Step) -> pulumi.Output[str]:
        """Without Kueue: fail (warn in preview) when another training run of this cluster still holds the
        TPU slice (with Kueue, a second run queues behind the first)."""
        namespace = self.settings.namespace
        selector = f"app.kubernetes.io/instance={self.settings.cluster_name},app.kubernetes.io/component=train"

        def read(config: str) -> str:
            try:
                items = waiting.read_jobsets(self._cluster(config), namespace, selector)
            except live.ClusterReadError as err:
                self._unreadable(f"the training runs in {namespace}", err)
                return ""
            others = live_state.running_elsewhere(items, train.name)
            if others:
                message = (
                    f"training run {', '.join(others)} (an earlier configuration) is still running on the TPU slice; "
                    f"{train.name} cannot start until it ends. Wait for it (`kubectl get jobset -n {namespace} -w`) "
                    f"or stop it (`kubectl delete jobset -n {namespace} {others[0]}`), then run `pulumi up` again"
                )
                self._refuse(message)
            return ""

        return pulumi.Output.unsecret(self.kubeconfig.apply(read))


def _unschedulable_then(settings: Settings) -> str:
    """What becomes of a step `up` stopped waiting for as unschedulable."""
    if settings.kueue.install:
        return (
            "It stays pending: Kueue stops it after tpu-rl:kueue.podsReadyTimeout "
            f"({format_duration(settings.kueue.pods_ready_timeout)}) and the next `pulumi up` runs it again"
        )
    return "It stays pending and starts if capacity appears; run `pulumi up` again to follow it"


@dataclass(frozen=True)
class WorkflowArgs:
    """What the workflow runs on: the platform's pieces it needs, each typed (as the Pulumi component models
    take theirs), and the settings its pure step builders read."""

    settings: Settings
    """The validated settings."""
    plan: Workflow
    """The steps (``workloads.build.steps.plan_workflow`` of the settings)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider: every step is applied through it."""
    cluster: pulumi.Resource
    """The GKE cluster: deleting it deletes the steps with it (``deleted_with``)."""
    ready: Sequence[pulumi.Resource]
    """What every step waits for: the JobSet controller, Kueue and its queues, the namespace, the Secret."""
    namespace_id: pulumi.Output[str]
    """The workflow's namespace: the live reader reads once it exists."""
    kubeconfig: pulumi.Output[str]
    """The cluster's kubeconfig (secret): the live reader's."""
    tpu_pools: Sequence[pulumi.Resource]
    """The slice's node pools: training waits for them."""
    live: bool
    """Read the cluster and the bucket (retries, the wait, artifact checks); the offline plan does not."""
    config_diff: Sequence[dict[str, Any]] = ()
    """The settings that differ from the tutorial's (``core.config.diff``): the model card lists them."""
    base_commit: str | None = None
    """The commit the model's revision resolved to at the preflight (None: not checked): the model card's."""
    base_license: str | None = None
    """The licence the base model's card declares (None: not read): the model card passes it on."""


class WorkflowRun(pulumi.ComponentResource):
    """convert (JobSet on cpu-np) -> train (Pathways JobSet) -> export (JobSet on cpu-np), each queued to
    Kueue when the stack has a queue. Each step's wiring is one method: register it after what it needs,
    wait for it, check what it left."""

    hf_model_uri: pulumi.Output[str]
    """The exported model (``hfModelUri``)."""
    final_step: pulumi.Output[int]
    """The checkpoint step that was exported (``steps.train.finalStep``)."""
    final_checkpoint_uri: pulumi.Output[str]
    """Its folder (``steps.train.checkpointUri``)."""
    summary: pulumi.Output[dict[str, Any] | None]
    """Before/after accuracy, final reward and chip-hours of the run (``steps.train.summary``)."""
    base_commit: pulumi.Output[str | None]
    """The base model's commit the conversion converted (``steps.convert.baseCommit``); every step is of it."""
    published: pulumi.Output[dict[str, Any]] | None
    """With ``tpu-rl:publish.repo``: ``{url, branch, commit}`` of the verified publication (``hubRepoUrl``,
    ``hubRevision``, ``hubCommit``); None without."""
    steps: dict[str, Step]

    def __init__(self, name: str, args: WorkflowArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:workflow:WorkflowRun", name, None, opts)
        self._args = args
        self._plan = args.plan
        self.steps = {s.step: s for s in self._plan.steps}
        self._preview = pulumi.runtime.is_dry_run()
        self._verify = args.live and not self._preview
        self._reader = LiveReader(args.settings, args.kubeconfig, args.namespace_id, self) if args.live else None
        if self._reader is not None and self._plan.publish is not None:
            self._reader.hub_check = self._on_hub

        convert, converted = self._convert()
        train, trained = self._train(convert, converted)
        self.final_step = trained.apply(lambda found: found["step"])
        self.final_checkpoint_uri = trained.apply(lambda found: found["uri"])
        self.summary = trained.apply(lambda found: found["summary"])
        export, self.hf_model_uri = self._export(train, trained)
        self.published = self._publish(export, self.hf_model_uri, trained) if self._plan.publish else None
        self.register_outputs(
            {
                "hfModelUri": self.hf_model_uri,
                "finalStep": self.final_step,
                "checkpointUri": self.final_checkpoint_uri,
                "summary": self.summary,
                "baseCommit": self.base_commit,
                "published": self.published,
                "steps": {step.step: step.name for step in self._plan.steps},
            }
        )

    # -- the steps -------------------------------------------------------------------------------

    def _convert(self) -> tuple[KubernetesObject, pulumi.Output[str]]:
        """The conversion, first: its verified checkpoint folder is training's input."""
        step = self._plan.convert
        convert = self._register(step, None, [])

        def converted(status: Any) -> str:
            self._finished(step, status)
            if self._verify:
                self._verified(step)
            return step.artifact_uri

        ended = self._ended(step, convert).apply(converted)
        self.base_commit = ended.apply(lambda _uri: self._converted_commit(step))
        return convert, ended

    def _converted_commit(self, step: Step) -> str | None:
        """The base model's commit the conversion converted, as it recorded it (``source.json``): training, the
        export, the export check and the card are of that commit. The preflight's resolution when nothing is
        read (offline, a preview)."""
        if not self._verify:
            return self._args.base_commit
        from workloads.run.artifacts import source_record

        output = step.output_uri
        record = _gcs(
            f"reading the conversion's record under {output}",
            lambda client, call: source_record(client, output, **call),
        )
        if record is None:  # _verified read it a moment ago
            self._retried(step, f"conversion finished but its record {output}source.json is missing")
        return record.commit

    def _train(
        self, convert: KubernetesObject, converted: pulumi.Output[str]
    ) -> tuple[KubernetesObject, pulumi.Output[dict[str, Any]]]:
        """Training, once the conversion's output is verified, the slice's pools exist and (without Kueue)
        no other training holds the slice; it ends with the newest complete checkpoint found in GCS."""
        settings, step = self._args.settings, self._plan.train
        slice_free: pulumi.Input[str] = ""
        if self._reader is not None and not settings.kueue.queue:
            slice_free = self._reader.check_slice_free(step)
        train_input = pulumi.Output.all(converted, slice_free).apply(lambda args: args[0])
        train = self._register(step, train_input, [convert, *self._args.tpu_pools])

        def trained(status: Any) -> dict[str, Any]:
            self._finished(step, status)
            expected = settings.training.final_step
            if not self._verify:
                return {"step": expected, "uri": f"{step.artifact_uri}{expected}/model_params/", "summary": None}
            from workloads.run.artifacts import final_checkpoint, short_run_warning

            found = _gcs(
                f"listing the checkpoints under {step.artifact_uri}",
                lambda client, call: final_checkpoint(client, step.artifact_uri, **call),
            )
            if found is None:
                self._verified(step)  # raises: no complete checkpoint
                # It lists again and did not raise: a complete checkpoint appeared between the two listings.
                raise pulumi.RunError(
                    f"the checkpoints under {step.artifact_uri} changed while they were checked (none was "
                    "complete, then one was); run `pulumi up` again"
                )
            prefill = int(settings.training.knobs["max_prefill_predict_length"])
            warning = short_run_warning(found, expected, prefill)
            if warning:
                pulumi.log.warn(warning, resource=self)
            summary, curve = self._summary(step, settings)
            return {"step": found.step, "uri": found.uri, "summary": summary, "rewardCurve": curve}

        return train, self._ended(step, train).apply(trained)

    def _export(
        self, train: KubernetesObject, trained: pulumi.Output[dict[str, Any]]
    ) -> tuple[KubernetesObject, pulumi.Output[str]]:
        """The export, after training: of the checkpoint found; it ends with the exported model's folder."""
        step = self._plan.export
        export = self._register(step, trained.apply(lambda _found: self._plan.train.artifact_uri), [train])

        def exported(args: list[Any]) -> str:
            status, commit = args
            self._finished(step, status)
            if self._verify:
                if self._args.settings.workflow.verify_export:
                    self._matches_base(step, commit)  # reads the folder once: its own check and the comparison
                else:
                    self._verified(step)
            return step.artifact_uri

        return export, pulumi.Output.all(self._ended(step, export), self.base_commit).apply(exported)

    def _publish(
        self, export: KubernetesObject, exported: pulumi.Output[str], trained: pulumi.Output[dict[str, Any]]
    ) -> pulumi.Output[dict[str, Any]]:
        """The publication, after the export is verified: its card (a ConfigMap, written once: the run's numbers
        are known when it is created), then the upload; it ends with the branch's commit, read back from the
        Hub and checked to hold every exported file."""
        from workloads.build.manifests import card_config_map, card_metadata
        from workloads.build.steps import branch_of, card_name

        settings, step = self._args.settings, self._plan.publish
        assert step is not None and settings.publish.repo is not None  # only with a publication
        repo, branch = settings.publish.repo, branch_of(step.step_id)
        digests: pulumi.Input[dict[str, str]] = {}
        if self._reader is not None:
            digests = self._reader.image_digests([self._plan.train, self._plan.export], after=exported)

        def card(args: list[Any]) -> dict[str, Any]:
            found, images, commit = args
            readme, image = self._card(step, found, images, commit)
            return card_config_map(settings, card_name(step.name), step.step_id, readme, image)

        manifest = pulumi.Output.all(trained, digests, self.base_commit).apply(card)
        card_map = KubernetesObject(
            card_name(step.name),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": card_metadata(settings, card_name(step.name), step.step_id),
                "data": manifest.apply(lambda m: m["data"]),
                "binaryData": manifest.apply(lambda m: m.get("binaryData", {})),
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=self._args.provider,
                deleted_with=self._args.cluster,
                depends_on=list(self._args.ready),
                # The card of a run is written once: a later `up` (its numbers read again) never rewrites it.
                ignore_changes=["data", "binaryData"],
            ),
        )
        publish = self._register(step, exported, [export, card_map])
        url = f"{HUB_URL}/{repo}"

        def published(status: Any) -> dict[str, Any]:
            self._finished(step, status)
            if not self._verify:
                return {"url": url, "branch": branch, "commit": None}
            try:
                problem, commit = self._on_hub(step)
            except HubUnknownError as err:
                pulumi.log.warn(f"{err}; hubCommit is the commit the step recorded", resource=self)
                commit = self._recorded_commit(step)
                if commit is None:
                    from workloads.run.artifacts import no_record

                    self._retried(step, no_record(step.artifact_uri))
                return {"url": url, "branch": branch, "commit": commit}
            if problem:
                self._retried(step, f"{problem}; publish logs: {step.logs_command}")
            pulumi.log.info(f"published: {url}/tree/{branch} is commit {commit}", self)
            return {"url": url, "branch": branch, "commit": commit}

        return self._ended(step, publish).apply(published)

    # -- what every step does --------------------------------------------------------------------

    def _register(
        self, step: Step, verified_input: pulumi.Input[str] | None, after: list[pulumi.Resource]
    ) -> KubernetesObject:
        """The step's JobSet, after the platform and ``after``, annotated with its verified input and its
        retry marker (``replacement_trigger``: a failed run is replaced, see ``workloads.run.live_state``)."""
        args = self._args
        marker: pulumi.Input[str | None] = self._reader.marker(step) if self._reader else ""
        manifest = copy.deepcopy(step.manifest)
        annotations = manifest["metadata"]["annotations"]
        manifest["metadata"]["annotations"] = pulumi.Output.all(verified_input, marker).apply(
            lambda values: {
                **annotations,
                **({INPUT_ANNOTATION: values[0]} if values[0] else {}),
                **({RETRY_ANNOTATION: values[1]} if values[1] else {}),
            }
        )
        return KubernetesObject(
            step.name,
            manifest,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                deleted_with=args.cluster,
                depends_on=[*args.ready, *after],
                # The provider only applies the object (skipAwait); the program waits (LiveReader.wait).
                custom_timeouts=pulumi.CustomTimeouts(
                    create=APPLY_TIMEOUT, update=APPLY_TIMEOUT, delete=DELETE_TIMEOUT
                ),
                # The identity is in the name: operational fields never re-run or disturb a step.
                ignore_changes=list(step.ignore_changes),
                # A run that ended Failed is replaced (retried); see workloads.run.live_state.
                replacement_trigger=marker,
                delete_before_replace=True,
            ),
        )

    def _ended(self, step: Step, resource: KubernetesObject) -> pulumi.Output[Any]:
        """The status the step ended with: waited for in `up`, as recorded otherwise (offline, preview)."""
        if self._verify and self._reader is not None:
            return self._reader.wait(step, resource)
        return resource.status

    def _finished(self, step: Step, status: Any) -> None:
        """Stop `up` with the step's reason when it failed (a preview waits for nothing: the marker read
        warned of a failed run)."""
        if self._preview:
            return
        namespace = self._args.settings.namespace
        try:
            state = check_step_status(step.kind, status, namespace, step.name, step.logs_command)
        except StepFailedError as err:
            raise pulumi.RunError(f"{err}. Run `pulumi up` again to retry it{_resumes(step)}") from None
        if self._verify and state != "succeeded":
            raise pulumi.RunError(
                f"{step.kind} {namespace}/{step.name} stopped without completing (state {state}); "
                f"logs: {step.logs_command}"
            )

    def _matches_base(self, step: Step, commit: str | None) -> None:
        """Fail `up` when the export is incomplete (retried, as ``_verified`` says) or is not the whole base model
        at the converted ``commit`` (another config, a missing, extra or reshaped tensor, a dtype slip), with the
        first differences and the logs."""
        import os

        from pulumi.runtime import config as runtime_config

        from workloads.run.artifacts import first_of, incomplete_export

        exported = read_export(step.artifact_uri)
        problem = incomplete_export(step.artifact_uri, exported.problems)
        if problem:
            self._retried(step, problem)
        model = self._args.settings.model
        token = runtime_config.get_config("tpu-rl:hfToken") or ""
        endpoint = os.environ.get("HF_ENDPOINT")
        found = base_differences(self._args.settings, exported.layout, token, endpoint, commit)
        base = f"{model.spec.hf_repo}@{commit or model.revision}"
        if found:
            raise pulumi.RunError(
                f"the exported model {step.artifact_uri} does not match {base} (the commit converted): "
                f"{first_of(found)}; export logs: {step.logs_command}. Exporting the same checkpoint again gives "
                "the same model, so the next `up` does not retry it: change what the export runs "
                "(tpu-rl:images.maxtext, tpu-rl:model) or set tpu-rl:workflow.verifyExport: false"
            )
        pulumi.log.info(f"export check: {step.artifact_uri} matches {base}", self)

    def _card(
        self, step: Step, found: dict[str, Any], digests: dict[str, str], commit: str | None
    ) -> tuple[str, bytes | None]:
        """The model card's text and the reward curve (``workloads.build.model_card``), from plain values; the
        base is the ``commit`` converted."""
        from core.estimate import estimate_for
        from core.knobs import DATASETS
        from workloads.build.manifests import REWARD_IMAGE, REWARD_IMAGE_MAX_BYTES
        from workloads.build.model_card import CardFacts, card_setting, model_card
        from workloads.build.steps import branch_of

        settings = self._args.settings
        image = found.get("rewardCurve")
        if image is not None and len(image) > REWARD_IMAGE_MAX_BYTES:
            pulumi.log.warn(f"the reward curve ({len(image)} bytes) is too large for the model card; left out", self)
            image = None
        dataset = DATASETS[settings.training.dataset]
        ids = tuple(dict.fromkeys(v for k, v in dataset.keys if k in ("dataset_name", "eval_dataset_name")))
        estimate = estimate_for(settings)
        facts = CardFacts(
            repo=settings.publish.repo or "",
            branch=branch_of(step.step_id),
            base_repo=settings.model.spec.hf_repo,
            base_revision=settings.model.revision,
            base_commit=commit,
            model_name=settings.model.spec.name,
            dataset=settings.training.dataset,
            dataset_ids=ids,
            config_diff=[d for d in self._args.config_diff if card_setting(d["key"])],
            images={
                "maxtext": settings.images.maxtext,
                "pathwaysServer": settings.images.pathways_server,
                "pathwaysProxy": settings.images.pathways_proxy,
            },
            image_digests=digests,
            summary=found.get("summary"),
            usd_per_chip_hour=estimate.usd_per_chip_hour,
            capacity=settings.tpu.capacity,
            chips=settings.total_chips,
            reward_image=REWARD_IMAGE if image else None,
            steps={s.step: s.name for s in self._plan.steps},
            # A public card does not name the bucket: its default name holds the project's id.
            export_uri=self._plan.export.artifact_uri if settings.publish.private else "",
            base_license=self._args.base_license,
            private=settings.publish.private,
        )
        return model_card(facts), image

    def _on_hub(self, step: Step) -> tuple[str | None, str | None]:
        """(why the publish step's branch does not hold the export, None when it does; the branch's commit): the
        branch must exist and hold exactly the exported files, each with its size, and the card.
        ``HubUnknownError`` when the Hub cannot say (unreachable, a revoked token)."""
        import os

        from pulumi.runtime import config as runtime_config

        from core.hf_model import name_problem
        from workloads.build.steps import branch_of
        from workloads.preflight import PreflightError, published_revision
        from workloads.run.artifacts import first_of, incomplete_export

        repo, branch = self._args.settings.publish.repo or "", branch_of(step.step_id)
        export_uri = self._plan.export.artifact_uri
        exported = read_export(export_uri)
        if exported.problems:  # the export is run again first (its own check); then this publication
            return incomplete_export(export_uri, exported.problems), None
        token = runtime_config.get_config("tpu-rl:hfWriteToken") or ""
        try:
            found = published_revision(repo, branch, token, os.environ.get("HF_ENDPOINT"))
        except PreflightError as err:
            raise HubUnknownError(f"cannot check the publication of {step.name} on the Hub: {err}") from None
        if found is None:
            return (
                f"publish finished but {repo} has no branch {branch} (deleted since, or the write token cannot see it)",
                None,
            )
        commit, files = found
        wanted = {name: size for name, size in exported.files.items() if name not in CARD_FILES}
        differences = [
            f"{name} ({'missing' if name not in files else f'{files[name]} bytes, not {size}'})"
            for name, size in sorted(wanted.items())
            if files.get(name, -1) not in (size, None)
        ]
        if "README.md" not in files:
            differences.append("README.md (the model card) missing")
        extra = sorted(set(files) - set(wanted) - set(CARD_FILES) - {".gitattributes"})
        # Names from the Hub are shown, never used as paths: one that is no plain file name is said to be one.
        differences += [
            f"{name} (not in the export)"
            if name_problem(name) is None
            else f"a file on the branch: {name_problem(name)}"
            for name in extra
        ]
        if differences:
            return (
                f"publish finished but {repo}@{branch} does not hold the export {export_uri}: {first_of(differences)}",
                commit,
            )
        return None, commit

    def _recorded_commit(self, step: Step) -> str | None:
        """The commit the publish step recorded (``published.json``), None without a record."""
        from workloads.run.artifacts import published_record

        record = _gcs(
            f"reading {step.artifact_uri}", lambda client, call: published_record(client, step.artifact_uri, **call)
        )
        return str(record["commit"]) if record else None

    def _verified(self, step: Step) -> None:
        """Fail `up` when a completed step's output is unusable (the next `up` runs it again)."""
        from workloads.run.artifacts import step_problem

        problem = _gcs(
            f"checking {step.artifact_uri}",
            lambda client, call: step_problem(client, step.step, step.artifact_uri, **call),
        )
        if problem:
            self._retried(step, problem)

    def _retried(self, step: Step, problem: str) -> NoReturn:
        """Stop `up`: a completed step's output is unusable, so the next `up` runs the step again."""
        raise pulumi.RunError(
            f"{problem}; the next `pulumi up` runs {step.name} again (a completed step whose output "
            "is incomplete is retried)"
        )

    def _summary(self, train: Step, settings: Settings) -> tuple[dict[str, Any] | None, bytes | None]:
        """Before/after accuracy, final reward and chip-hours of a finished run, and (for a publication's card)
        its reward curve; None where they cannot be read."""
        from workloads.run.artifacts import storage_client
        from workloads.run.run_data import gather

        try:
            data = gather(storage_client(), train.output_uri)
        except Exception as err:  # noqa: BLE001 (the summary is a convenience: it never fails `up`)
            pulumi.log.warn(
                f"no run summary for {train.name} ({type(err).__name__}); `make report` reads it later", resource=self
            )
            return None, None
        curve = None
        if self._plan.publish is not None:
            from workloads.run.plots import reward_curve_png

            try:
                curve = reward_curve_png(data)
            except Exception as err:  # noqa: BLE001 (the card says the curve was not recorded)
                pulumi.log.warn(f"no reward curve for the model card ({type(err).__name__})", resource=self)
        return data.summary(settings.total_chips), curve

    def step_outputs(self) -> dict[str, dict[str, Any]]:
        """Per step: object name, artifact URI, logs command, Cloud Console logs link (train: the final step)."""
        outputs: dict[str, dict[str, Any]] = {
            step.step: {
                "name": step.name,
                "kind": step.kind,
                "outputUri": step.output_uri,
                "artifactUri": step.artifact_uri,
                "logs": step.logs_command,
                "consoleLogs": step.console_logs_url,
            }
            for step in self.steps.values()
        }
        outputs["train"]["finalStep"] = self.final_step
        outputs["train"]["checkpointUri"] = self.final_checkpoint_uri
        outputs["train"]["summary"] = self.summary
        outputs["convert"]["baseCommit"] = self.base_commit
        return outputs
