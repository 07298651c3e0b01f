"""Wire the three content-addressed steps to Kubernetes resources: convert -> train -> export.

Each step waits for the previous one's *verified* output: the next object's ``tpu-rl/input``
annotation is an Output that resolves only after the previous step succeeded and its artifacts
were found in GCS. A failure raises, so `pulumi up` stops and the later steps are never created.

Lifecycle (see ``workloads.steps`` and ``workloads.live_state``): a step is replaced only when
its name (its identity) changes or when its live object ended Failed (a retry); operational
fields are ``ignoreChanges``; Pulumi waits longer than the step's own deadline.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from core.settings import Settings
from infra.config.values import format_duration
from infra.k8s import live
from infra.k8s.object import KubernetesObject
from infra.k8s.platform import KubernetesPlatform
from workloads import live_state
from workloads.failures import StepFailedError, check_step_status
from workloads.steps import Step, plan_workflow

INPUT_ANNOTATION = "tpu-rl/input"
DELETE_TIMEOUT = "20m"


def _check_artifact(check: Callable[[Any], Any]) -> Any:
    """Run a GCS check with the program's credentials; missing artifacts and credentials become one line."""
    from google.api_core import exceptions as gcs_errors
    from google.auth.exceptions import DefaultCredentialsError

    from workloads import artifacts

    try:
        return check(artifacts.storage_client())
    except artifacts.ArtifactMissingError as err:
        raise pulumi.RunError(str(err)) from None
    except DefaultCredentialsError:
        raise pulumi.RunError(
            "cannot verify the step's output: no Google credentials for the artifact check; "
            "run `gcloud auth application-default login` (the gcp provider needs them too)"
        ) from None
    except gcs_errors.GoogleAPIError as err:
        raise pulumi.RunError(f"cannot verify the step's output in GCS: {type(err).__name__}: {err}") from None


class LiveReader:
    """Reads the live objects of the steps, bounded; during preview a failure is a warning, not an error."""

    def __init__(self, settings: Settings, kubeconfig: pulumi.Output[str], parent: pulumi.Resource) -> None:
        self.settings = settings
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.parent = parent
        self.preview = pulumi.runtime.is_dry_run()

    def _unreadable(self, what: str, err: live.ClusterReadError) -> None:
        if not self.preview:
            raise pulumi.RunError(f"cannot read {what}: {err}")
        pulumi.log.warn(
            f"preview could not read {what} ({err}); it is shown as unchanged. `pulumi up` reads it again and "
            "retries the step if it ended Failed (a runner outside tpu-rl:authorizedNetworks sees this warning)",
            resource=self.parent,
        )

    def _refuse(self, message: str) -> None:
        """Stop `pulumi up` with `message`; a preview only warns (it changes nothing)."""
        if not self.preview:
            raise pulumi.RunError(message)
        pulumi.log.warn(message, resource=self.parent)

    def marker(self, step: Step) -> pulumi.Output[str | None]:
        """The step's retry marker (None when the cluster cannot be read during preview)."""
        namespace = self.settings.namespace
        path = live.object_path(step.manifest["apiVersion"], step.kind, namespace, step.name)

        def read(config: str) -> str | None:
            try:
                current = live_state.live_step(live.get_json(config, path))
            except live.ClusterReadError as err:
                self._unreadable(f"{step.kind} {namespace}/{step.name}", err)
                return None
            restarts = self.settings.workflow.max_restarts
            kept = live_state.carried_over(current, step.kind, step.deadline_seconds, restarts)
            if kept:
                message = (
                    f"{step.kind} {namespace}/{step.name} failed ({current.reason or 'Failed'}); a retry would keep "
                    f"its {' and '.join(kept)}, because Pulumi carries ignored fields into a replacement. To retry "
                    f"with the configured values, delete the failed run first: `kubectl delete {step.kind.lower()} "
                    f"-n {namespace} {step.name} && pulumi refresh --yes`, then `pulumi up`"
                )
                self._refuse(message)
            if current.state == "failed":
                pulumi.log.info(f"{step.kind} {namespace}/{step.name} ended Failed: `pulumi up` retries it")
            return live_state.retry_marker(current)

        return pulumi.Output.unsecret(self.kubeconfig.apply(read))

    def check_slice_free(self, train: Step) -> pulumi.Output[str]:
        """Fail (warn in preview) when another training run of this cluster still holds the TPU slice."""
        namespace = self.settings.namespace
        path = live.object_path(train.manifest["apiVersion"], "JobSet", namespace)
        selector = f"app.kubernetes.io/instance={self.settings.cluster_name},app.kubernetes.io/component=train"

        def read(config: str) -> str:
            try:
                others = live_state.running_elsewhere(live.list_items(config, path, selector), train.name)
            except live.ClusterReadError as err:
                self._unreadable(f"the training runs in {namespace}", err)
                return ""
            if others:
                message = (
                    f"training run {', '.join(others)} (an earlier configuration) is still running on the TPU slice; "
                    f"{train.name} cannot start until it ends. Wait for it (`kubectl get jobset -n {namespace} -w`) "
                    f"or stop it (`kubectl delete jobset -n {namespace} {others[0]}`), then run `pulumi up` again"
                )
                self._refuse(message)
            return ""

        return pulumi.Output.unsecret(self.kubeconfig.apply(read))


class WorkflowRun(pulumi.ComponentResource):
    """convert (batch/v1 Job on cpu-np) -> train (Pathways JobSet) -> export (batch/v1 Job on cpu-np)."""

    hf_model_uri: pulumi.Output[str]
    final_step: pulumi.Output[int]
    steps: dict[str, Step]

    def __init__(
        self,
        name: str,
        settings: Settings,
        *,
        provider: k8s.Provider,
        cluster: pulumi.Resource,
        platform: KubernetesPlatform,
        kubeconfig: pulumi.Output[str],
        tpu_pools: list[pulumi.Resource],
        live: bool,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("tpu-rl:workflow:WorkflowRun", name, None, opts)
        plan = plan_workflow(settings)
        self.steps = {s.step: s for s in plan.steps}
        verify = live and not pulumi.runtime.is_dry_run()
        reader = LiveReader(settings, kubeconfig, self) if live else None

        def register(
            step: Step, verified_input: pulumi.Input[str] | None, after: list[pulumi.Resource]
        ) -> KubernetesObject:
            marker: pulumi.Input[str | None] = reader.marker(step) if reader else ""
            manifest = copy.deepcopy(step.manifest)
            annotations = manifest["metadata"]["annotations"]
            manifest["metadata"]["annotations"] = pulumi.Output.all(verified_input, marker).apply(
                lambda args: {
                    **annotations,
                    **({INPUT_ANNOTATION: args[0]} if args[0] else {}),
                    **({live_state.RETRY_ANNOTATION: args[1]} if args[1] else {}),
                }
            )
            timeout = format_duration(step.await_seconds)
            return KubernetesObject(
                step.name,
                manifest,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=provider,
                    deleted_with=cluster,
                    depends_on=[*platform.ready, *after],
                    # Pulumi outlives the step's own deadline, so the step's failure is what `up` reports.
                    custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout, delete=DELETE_TIMEOUT),
                    # The identity is in the name: operational fields never re-run or disturb a step.
                    ignore_changes=list(step.ignore_changes),
                    # A run that ended Failed is replaced (retried); see workloads.live_state.
                    replacement_trigger=marker,
                    delete_before_replace=True,
                ),
            )

        def finished(step: Step) -> Callable[[Any], None]:
            def check(status: Any) -> None:
                try:
                    state = check_step_status(step.kind, status, settings.namespace, step.name, step.logs_command)
                except StepFailedError as err:
                    raise pulumi.RunError(str(err)) from None
                if verify and state != "succeeded":
                    raise pulumi.RunError(
                        f"{step.kind} {settings.namespace}/{step.name} stopped without completing "
                        f"(state {state}); logs: {step.logs_command}"
                    )

            return check

        convert = register(plan.convert, None, [])

        def converted(status: Any) -> str:
            finished(plan.convert)(status)
            if verify:
                from workloads.artifacts import check_converted

                _check_artifact(lambda client: check_converted(client, plan.convert.artifact_uri))
            return plan.convert.artifact_uri

        convert_done = convert.status.apply(converted)

        train_after: list[pulumi.Resource] = [convert, *tpu_pools]
        slice_free: pulumi.Input[str] = ""
        if reader is not None:
            slice_free = reader.check_slice_free(plan.train)
        train_input = pulumi.Output.all(convert_done, slice_free).apply(lambda args: args[0])
        train = register(plan.train, train_input, train_after)

        def trained(status: Any) -> dict[str, Any]:
            finished(plan.train)(status)
            expected = settings.training.final_step
            if not verify:
                return {"step": expected, "uri": f"{plan.train.artifact_uri}{expected}/model_params/", "summary": None}
            from workloads.artifacts import final_checkpoint, short_run_warning

            found = _check_artifact(lambda client: final_checkpoint(client, plan.train.artifact_uri))
            prefill = int(settings.training.knobs["max_prefill_predict_length"])
            warning = short_run_warning(found, expected, prefill)
            if warning:
                pulumi.log.warn(warning, resource=self)
            return {"step": found.step, "uri": found.uri, "summary": self._summary(plan.train, settings)}

        train_done = train.status.apply(trained)
        self.final_step = train_done.apply(lambda found: found["step"])
        self.final_checkpoint_uri = train_done.apply(lambda found: found["uri"])
        self.summary = train_done.apply(lambda found: found["summary"])

        export_input = train_done.apply(lambda _found: plan.train.artifact_uri)
        export = register(plan.export, export_input, [train])

        def exported(status: Any) -> str:
            finished(plan.export)(status)
            if verify:
                from workloads.artifacts import check_exported

                _check_artifact(lambda client: check_exported(client, plan.export.artifact_uri))
            return plan.export.artifact_uri

        self.hf_model_uri = export.status.apply(exported)
        self.register_outputs({"hfModelUri": self.hf_model_uri, "finalStep": self.final_step})

    def _summary(self, train: Step, settings: Settings) -> dict[str, Any] | None:
        """Before/after accuracy, final reward and chip-hours of a finished run (None if they cannot be read)."""
        from workloads.artifacts import storage_client
        from workloads.run_data import gather

        try:
            return gather(storage_client(), train.output_uri).summary(settings.total_chips)
        except Exception as err:  # noqa: BLE001 (the summary is a convenience: it never fails `up`)
            pulumi.log.warn(
                f"no run summary for {train.name} ({type(err).__name__}); `make report` reads it later", resource=self
            )
            return None

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
        return outputs
