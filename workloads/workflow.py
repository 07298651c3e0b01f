"""Wire the three content-addressed steps to Kubernetes resources: convert -> train -> export.

Each step waits for the previous one's *verified* output: the next object's
``tpu-rl/input`` annotation is an Output that resolves only after the previous step
succeeded and its artifacts were found in GCS. A failure raises, so `pulumi up` stops
and the later steps are never created.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from core.settings import Settings
from infra.config.values import format_duration
from infra.k8s.object import KubernetesObject
from infra.k8s.platform import KubernetesPlatform
from workloads import retry
from workloads.status import JobSetFailedError, check_jobset_status
from workloads.steps import Step, plan_workflow

INPUT_ANNOTATION = "tpu-rl/input"


def _check_artifact(kind: str, uri: str) -> None:
    from google.auth.exceptions import DefaultCredentialsError

    from workloads import artifacts

    check: Callable[[Any, str], None] = getattr(artifacts, f"check_{kind}")
    try:
        check(artifacts.storage_client(), uri)
    except artifacts.ArtifactMissingError as err:
        raise pulumi.RunError(str(err)) from None
    except DefaultCredentialsError:
        raise pulumi.RunError(
            f"cannot verify {uri}: no Google credentials for the artifact check; "
            "run `gcloud auth application-default login` (the gcp provider needs them too)"
        ) from None


class WorkflowRun(pulumi.ComponentResource):
    """convert (batch/v1 Job on cpu-np) -> train (Pathways JobSet) -> export (batch/v1 Job on cpu-np)."""

    hf_model_uri: pulumi.Output[str]
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

        def options(
            step: str, *after: pulumi.Resource, trigger: pulumi.Input[str] | None = None
        ) -> pulumi.ResourceOptions:
            timeout = format_duration(settings.workflow.timeouts[step])
            return pulumi.ResourceOptions(
                replacement_trigger=trigger,
                parent=self,
                provider=provider,
                deleted_with=cluster,
                depends_on=[*platform.ready, *after],
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout, delete="20m"),
                # A changed step is a new object; a step left failed (init error) is re-created.
                replace_on_changes=["*"],
                delete_before_replace=True,
            )

        def with_input(step: Step, verified_input: pulumi.Input[str] | None) -> dict[str, Any]:
            manifest = copy.deepcopy(step.manifest)
            if verified_input is not None:
                manifest["metadata"]["annotations"][INPUT_ANNOTATION] = verified_input
            return manifest

        def job_done(step: Step, kind: str) -> Callable[[Any], str]:
            def done(_status: Any) -> str:
                if verify:
                    _check_artifact(kind, step.artifact_uri)
                return step.artifact_uri

            return done

        convert = KubernetesObject("convert", with_input(plan.convert, None), opts=options("convert"))
        converted = convert.status.apply(job_done(plan.convert, "converted"))

        train_step = plan.train

        def train_done(status: Any) -> str:
            try:
                state = check_jobset_status(status, settings.namespace, train_step.name, train_step.logs_command)
            except JobSetFailedError as err:
                raise pulumi.RunError(str(err)) from None
            if verify:
                if state != "Completed":
                    raise pulumi.RunError(
                        f"JobSet {settings.namespace}/{train_step.name} stopped without completing "
                        f"(terminalState={state or 'none'}); logs: {train_step.logs_command}"
                    )
                _check_artifact("trained", train_step.artifact_uri)
            return train_step.artifact_uri

        # A run that failed in an earlier `up` is replaced (see workloads.retry).
        marker: pulumi.Input[str] = ""
        if live:

            def live_marker(config: str) -> str:
                try:
                    return retry.retry_marker(retry.read_live_jobset(config, settings.namespace, train_step.name))
                except retry.ClusterReadError as err:
                    raise pulumi.RunError(str(err)) from None

            marker = pulumi.Output.secret(kubeconfig).apply(live_marker)
            marker = pulumi.Output.unsecret(marker)
        train_manifest = copy.deepcopy(plan.train.manifest)
        train_manifest["metadata"]["annotations"] = pulumi.Output.all(converted, marker).apply(
            lambda args: {
                **plan.train.manifest["metadata"]["annotations"],
                INPUT_ANNOTATION: args[0],
                **({retry.RETRY_ANNOTATION: args[1]} if args[1] else {}),
            }
        )
        train = KubernetesObject("train", train_manifest, opts=options("train", convert, *tpu_pools, trigger=marker))
        trained = train.status.apply(train_done)

        export = KubernetesObject("export", with_input(plan.export, trained), opts=options("export", train))
        self.hf_model_uri = export.status.apply(job_done(plan.export, "exported"))
        self.register_outputs({"hfModelUri": self.hf_model_uri})

    def step_outputs(self) -> dict[str, dict[str, str]]:
        """Per step: object name, artifact URI, logs command and Cloud Console logs link."""
        return {
            step.step: {
                "name": step.name,
                "artifactUri": step.artifact_uri,
                "logs": step.logs_command,
                "consoleLogs": step.console_logs_url,
            }
            for step in self.steps.values()
        }
