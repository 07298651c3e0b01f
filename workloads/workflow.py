"""Wire the catalogue's content-addressed steps (``workloads.specs.step_specs.SPECS``) to Kubernetes resources,
each the same way: register it after the verified output it reads, wait for it, check what it left.

Each step waits for the previous one's *verified* output: the next object's ``tpu-rl/input``
annotation is an Output that resolves only after the step it reads succeeded and its artifacts
were found in GCS. A failure raises, so `pulumi up` stops and the later steps are never created. What a step
does beyond that (training's checkpoints, the export check, the publication's card and Hub check) is its
wiring (``workloads.wiring``).

Lifecycle (see ``workloads.specs.step_specs`` and ``workloads.observe.live_state``): a step is replaced only when
its name (its identity) changes or when its live object ended Failed (a retry); operational
fields are ``ignoreChanges``. A step's scripts are its own immutable ConfigMap (``Step.scripts``, named after the
step), registered before its JobSet, which depends on it: a new identity is a new ConfigMap and a new JobSet, and
the old pair is deleted at the end of that `up`, the JobSet first (the engine deletes dependents before what they
depend on: ``pkg/resource/deploy/step_generator.go`` ``ScheduleDeletes``); a retry replaces the JobSet only (the
ConfigMap, the same name and data, is unchanged). The provider only applies a step's JobSet
(``pulumi.com/skipAwait``); the program waits for it to end, bounded (``workloads.observe.waiting``), and reports
Kueue's or the JobSet's reason when it cannot.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from core.names import RETRY_ANNOTATION
from core.printed_commands import make_target
from infra.k8s.object import KubernetesObject
from infra.stop import StopError
from workloads.observe.failures import StepFailedError, check_step_status
from workloads.reader import LiveReader, resumes
from workloads.specs.step_inputs import StepInputs
from workloads.specs.step_specs import INPUT_ANNOTATION, Step, Workflow
from workloads.wiring import Context, Result, StepWiring, export_differences, wiring_of

__all__ = ["INPUT_ANNOTATION", "WorkflowArgs", "WorkflowRun", "export_differences"]

APPLY_TIMEOUT = "10m"
"""The provider's create or update of a step: the apply only (the program does the waiting)."""
DELETE_TIMEOUT = "20m"


@dataclass(frozen=True)
class WorkflowArgs:
    """What the workflow runs on: the platform's pieces it needs, each typed (as the Pulumi component models
    take theirs), the plan and what each step's wiring reads of the configuration."""

    namespace: str
    """The workflow's namespace (a failed step's message names it)."""
    inputs: StepInputs
    """What each step's wiring reads of the configuration (``workloads.specs.step_inputs``)."""
    plan: Workflow
    """The steps (``workloads.specs.step_specs.plan_workflow`` of the settings)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider: every step is applied through it."""
    cluster: pulumi.Resource | None
    """The stack's GKE cluster: deleting it deletes the steps with it (``deleted_with``; None: an existing cluster,
    where `pulumi destroy` deletes each step itself)."""
    ready: Sequence[pulumi.Resource]
    """What every step waits for: the JobSet controller, Kueue and its queues, the namespace, the Secret."""
    tpu_pools: Sequence[pulumi.Resource]
    """The slice's node pools: training waits for them."""
    reader: LiveReader | None
    """The live reader (``workloads.reader.LiveReader``, reading once the workflow's namespace exists): in `pulumi
    up` and a preview it reads the cluster and the bucket (retries, the wait, artifact checks); None in the offline
    plan, which reads nothing."""
    base_commit: str | None = None
    """The commit the model's revision resolved to at the preflight (None: not checked): the model card's."""


def _value(value: str, _resolved: Any) -> str:
    """``value`` once what it waits for resolved (the verified input of a step)."""
    return value


class WorkflowRun(pulumi.ComponentResource):
    """The plan's steps (convert -> train -> export, then each optional step that is on), each a JobSet queued to
    Kueue when the stack has a queue, registered, waited for and verified by one path; ``workloads.wiring`` says
    what a step adds."""

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
    results: dict[str, pulumi.Output[Result]]
    """Each step's result once it is verified (``workloads.wiring``), by name."""
    objects: dict[str, KubernetesObject]
    """Each step's JobSet, by step, as registered (before the program waits for it): what its destroy guard
    depends on (``program/stack.py``)."""
    scripts: dict[str, KubernetesObject]
    """Each step's ConfigMap of scripts, by step: registered with the platform ready, long before the JobSet that
    mounts it (which waits for the steps before it), so it has a destroy guard of its own."""

    def __init__(self, name: str, args: WorkflowArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:workflow:WorkflowRun", name, None, opts)
        self._args = args
        self._plan = args.plan
        self.steps = {s.step: s for s in self._plan.steps}
        self._preview = pulumi.runtime.is_dry_run()
        self._verify = args.reader is not None and not self._preview
        self._reader = args.reader
        if self._reader is not None:
            self._reader.parent = self
        self._context = Context(
            inputs=args.inputs,
            plan=self._plan,
            parent=self,
            reader=self._reader,
            verify=self._verify,
            provider=args.provider,
            cluster=args.cluster,
            ready=args.ready,
            tpu_pools=args.tpu_pools,
            base_commit=args.base_commit,
        )
        if self._reader is not None:
            self._reader.output_checks = {
                step.step: functools.partial(wiring_of(step).output_check, self._context) for step in self._plan
            }

        self.results = {}
        objects: dict[str, KubernetesObject] = {}
        self.objects, self.scripts = objects, {}
        for step in self._plan:
            wiring = wiring_of(step)
            read = self._reads(step)
            verified_input: pulumi.Output[str] | None = None
            if read is not None and step.input_uri is not None:
                gates = wiring.gates(self._context, step)
                verified_input = pulumi.Output.all(self.results[read.step], *gates).apply(
                    functools.partial(_value, step.input_uri)
                )
            after = [*([objects[read.step]] if read else []), *wiring.after(self._context, step, self.results)]
            objects[step.step] = self._register(step, verified_input, after)
            used = [self.results[name] for name in wiring.uses]
            self.results[step.step] = pulumi.Output.all(self._ended(step, objects[step.step]), *used).apply(
                functools.partial(self._done, step, wiring)
            )

        trained, exported = self.results["train"], self.results["export"]
        self.final_step = trained.apply(lambda found: found["step"])
        self.final_checkpoint_uri = trained.apply(lambda found: found["uri"])
        self.summary = trained.apply(lambda found: found["summary"])
        self.hf_model_uri = exported.apply(lambda found: found["uri"])
        self.base_commit = self.results["convert"].apply(lambda found: found["baseCommit"])
        self.published = self.results.get("publish")
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

    # -- what every step does --------------------------------------------------------------------

    def _reads(self, step: Step) -> Step | None:
        """The earlier step whose output is the step's input (None for the first step)."""
        if step.input_uri is None:
            return None
        return next(s for s in self._plan if s.artifact_uri == step.input_uri)

    def _done(self, step: Step, wiring: StepWiring, args: list[Any]) -> Result:
        """The step's result once it ended: its failure stops `up`; in `up` its output is verified."""
        status, *used = args
        self._finished(step, status)
        if not self._verify:
            return wiring.offline(self._context, step)
        return wiring.verify(self._context, step, used)

    def _register(
        self, step: Step, verified_input: pulumi.Input[str] | None, after: list[pulumi.Resource]
    ) -> KubernetesObject:
        """The step's ConfigMap of scripts, then its JobSet, after the platform, the ConfigMap and ``after``,
        annotated with its verified input and its retry marker (``replacement_trigger``: a failed run is replaced, see
        ``workloads.observe.live_state``)."""
        args = self._args
        scripts = KubernetesObject(
            step.scripts["metadata"]["name"],
            step.scripts,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                deleted_with=args.cluster,
                depends_on=list(args.ready),
                # Its data is the step's identity (in its name) but for the Hub cache's folder, filled in after
                # the hash (workloads.specs.step_specs.HUB_CACHE): a changed tpu-rl:model.hubCache leaves an existing
                # step's scripts as they were (an immutable ConfigMap would otherwise be replaced under its JobSet): the
                # engine gives an ignored path its old value before the provider's Diff (pulumi
                # pkg/resource/deploy/step_generator.go processIgnoreChanges).
                ignore_changes=["data"],
            ),
        )
        self.scripts[step.step] = scripts
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
                depends_on=[
                    *args.ready,
                    scripts,
                    *after,
                ],
                # The provider only applies the object (skipAwait); the program waits (LiveReader.wait).
                custom_timeouts=pulumi.CustomTimeouts(
                    create=APPLY_TIMEOUT, update=APPLY_TIMEOUT, delete=DELETE_TIMEOUT
                ),
                # The identity is in the name: operational fields never re-run or disturb a step.
                ignore_changes=list(step.ignore_changes),
                # A run that ended Failed is replaced (retried); see workloads.observe.live_state.
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
        namespace = self._args.namespace
        try:
            state = check_step_status(step.kind, status, namespace, step.name, step.logs_command)
        except StepFailedError as err:
            again = make_target("up", pulumi.get_stack())
            raise StopError(f"{err}. Run `{again}` again to retry it{resumes(step)}") from None
        if self._verify and state != "succeeded":
            raise StopError(
                f"{step.kind} {namespace}/{step.name} stopped without completing (state {state}); "
                f"logs: {step.logs_command}"
            )

    def step_outputs(self) -> dict[str, dict[str, Any]]:
        """Per step: object name, artifact URI, logs command, Cloud Console logs link and what its wiring adds
        (train: the final step; convert: the base's commit)."""
        return {
            step.step: {
                "name": step.name,
                "kind": step.kind,
                "outputUri": step.output_uri,
                "artifactUri": step.artifact_uri,
                "logs": step.logs_command,
                **({"consoleLogs": step.console_logs_url} if step.console_logs_url else {}),
                **wiring_of(step).outputs(self.results[step.step]),
            }
            for step in self.steps.values()
        }
