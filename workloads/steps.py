"""The workflow as three content-addressed steps (plain data, no Pulumi).

A step's identity is a short hash of everything that determines its output: image,
model repository and revision, argv, upstream output URI (and for training the
Pathways images and the slice). The hash is in the object name and in the output
path ``gs://<bucket>/<model>/<step>/<hash>/``, so an unchanged config plans the same
objects, a changed knob re-runs only the affected steps into new paths, and a re-run
of a failed training resumes from its own checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from core.settings import Settings
from workloads.commands import (
    convert_argv,
    export_argv,
    script,
    train_argv,
    train_script,
)
from workloads.manifests import WAIT_FOR_TERMINAL, WORKLOAD_CONTAINER, cpu_job, pathways_jobset

HASH_CHARS = 10
OUTPUT_PLACEHOLDER = "<output>"
# Longest suffix JobSet adds to a pod name: -<replicatedJob>-<job index>-<pod index>-<5 random>.
MAX_JOBSET_NAME = 63 - len("-pathways-head-0-0-abcde")


def step_hash(payload: dict[str, Any]) -> str:
    """A short, stable hash of a JSON-able payload."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:HASH_CHARS]


@dataclass(frozen=True)
class Step:
    """One workflow step, ready to be wired to a Kubernetes resource."""

    step: str
    step_id: str
    name: str
    output_uri: str
    artifact_uri: str
    """What the next step reads (and what the artifact check looks for)."""
    input_uri: str | None
    argv: list[str]
    manifest: dict[str, Any]
    logs_command: str
    console_logs_url: str


@dataclass(frozen=True)
class Workflow:
    convert: Step
    train: Step
    export: Step

    @property
    def steps(self) -> tuple[Step, Step, Step]:
        return (self.convert, self.train, self.export)


def _identity(settings: Settings, step: str, payload: dict[str, Any]) -> tuple[str, str, str]:
    """(hash, object name, output URI) for a step; the argv in ``payload`` uses the placeholder path."""
    digest = step_hash({"step": step, **payload})
    model = settings.model.spec.name
    name = f"{model}-{step}-{digest}"
    return digest, name, f"gs://{settings.bucket_name}/{model}/{step}/{digest}/"


def _with_output(argv: list[str], output_uri: str) -> list[str]:
    return [a.replace(OUTPUT_PLACEHOLDER, output_uri) for a in argv]


def console_logs_url(settings: Settings, pod_prefix: str, container: str | None = None) -> str:
    """A Cloud Logging query for the step's pods."""
    query = (
        'resource.type="k8s_container"\n'
        f'resource.labels.project_id="{settings.project}"\n'
        f'resource.labels.cluster_name="{settings.cluster_name}"\n'
        f'resource.labels.namespace_name="{settings.namespace}"\n'
        f'resource.labels.pod_name:"{pod_prefix}"'
    )
    if container:
        query += f'\nresource.labels.container_name="{container}"'
    return (
        "https://console.cloud.google.com/logs/query;query="
        + urllib.parse.quote(query, safe="")
        + f"?project={settings.project}"
    )


def _model_identity(settings: Settings) -> dict[str, Any]:
    return {"repo": settings.model.spec.hf_repo, "revision": settings.model.revision}


def _cpu_step(
    settings: Settings, step: str, argv: list[str], input_uri: str | None, artifact: str, scratch_gib: int
) -> Step:
    """A CPU-only step (convert, export): a ``batch/v1`` Job on cpu-np. ``argv`` holds the output placeholder."""
    payload: dict[str, Any] = {"image": settings.images.maxtext, "model": _model_identity(settings), "argv": argv}
    if input_uri is not None:
        payload["input"] = input_uri
    digest, name, out = _identity(settings, step, payload)
    argv = _with_output(argv, out)
    return Step(
        step=step,
        step_id=digest,
        name=name,
        output_uri=out,
        artifact_uri=out + artifact,
        input_uri=input_uri,
        argv=argv,
        manifest=cpu_job(
            settings,
            name=name,
            step=step,
            step_id=digest,
            command=["/bin/bash", "-c", script(argv=argv)],
            scratch_gib=scratch_gib,
            # A Job left failed by an earlier `up` is replaced on the next one.
            annotations={"pulumi.com/replaceUnready": "true"},
        ),
        logs_command=f"kubectl logs -n {settings.namespace} job/{name} --all-containers --tail=200 -f",
        console_logs_url=console_logs_url(settings, name),
    )


def _train_step(settings: Settings, input_uri: str) -> Step:
    """GRPO through Pathways on the TPU slice: a JobSet awaited until its terminal state."""
    argv = train_argv(settings, input_uri, OUTPUT_PLACEHOLDER)
    digest, name, out = _identity(
        settings,
        "train",
        {
            "image": settings.images.maxtext,
            "pathways": [settings.images.pathways_server, settings.images.pathways_proxy],
            "slice": [settings.slice.machine_type, settings.slice.topology, settings.tpu.slices],
            "model": _model_identity(settings),
            "optimizer": settings.training.optimizer,
            "input": input_uri,
            "argv": argv,
        },
    )
    if len(name) > MAX_JOBSET_NAME:
        raise ValueError(f"JobSet name {name} is longer than {MAX_JOBSET_NAME} characters")
    argv = _with_output(argv, out)
    head_job = f"{name}-pathways-head-0"
    return Step(
        step="train",
        step_id=digest,
        name=name,
        output_uri=out,
        artifact_uri=f"{out}rl/checkpoints/actor/{settings.training.final_step}/model_params/",
        input_uri=input_uri,
        argv=argv,
        manifest=pathways_jobset(
            settings,
            name=name,
            step_id=digest,
            command=["/bin/bash", "-c", train_script(settings, argv)],
            scratch_uri=f"gs://{settings.bucket_name}/pathways/",
            annotations={"pulumi.com/waitFor": WAIT_FOR_TERMINAL},
        ),
        logs_command=(
            f"kubectl logs -n {settings.namespace} -l job-name={head_job} -c {WORKLOAD_CONTAINER} --tail=200 -f"
        ),
        console_logs_url=console_logs_url(settings, head_job, WORKLOAD_CONTAINER),
    )


def plan_workflow(settings: Settings) -> Workflow:
    """The three steps from validated settings, each identified by the hash of what determines its output."""
    model = settings.model.spec
    convert = _cpu_step(
        settings,
        "convert",
        convert_argv(settings, OUTPUT_PLACEHOLDER),
        None,
        "0/items/",
        scratch_gib=model.weights_gib * 2 + 20,
    )
    train = _train_step(settings, convert.artifact_uri)
    export = _cpu_step(
        settings,
        "export",
        export_argv(settings, train.artifact_uri, OUTPUT_PLACEHOLDER),
        train.artifact_uri,
        "",
        scratch_gib=model.weights_gib + 20,
    )
    return Workflow(convert, train, export)
