"""The workflow as content-addressed steps (plain data, no Pulumi): a catalogue of step specifications
(``SPECS``), each a builder of its ``Step`` from the settings and the steps before it.

A step's identity is a short hash of the object it sends to the cluster (every field except
the *operational* ones listed in ``OPERATIONAL_PATHS``) and of where it runs (project, region,
cluster). The hash is in the object's name, in its Pulumi resource name and in its output path
``gs://<bucket>/<model>/<step>/<hash>/``, so:

- unchanged config plans the same objects and `pulumi up` does nothing;
- a change that alters what a step runs gives it a new name and a new output path: the step
  (and every step downstream, whose input path changed) runs again, nothing is overwritten;
- a change to an operational field (a deadline, JobSet restarts) keeps the name and is ignored
  for the existing object (``ignoreChanges``): a finished or running step is never touched;
- who a step runs as (its Kubernetes service account, ``ACCOUNT_PATH``: a CPU step's, the training head's) is
  hashed by the step's name alone and ignored on an existing object, like an operational field;
- a step's script and the programs it runs are the data of its own ConfigMap (``Step.scripts``, named
  ``<step name>-scripts``, immutable), mounted into its container: the identity hashes that data with the
  object, so a changed script is a new step with a new ConfigMap, and no container's argv carries a script.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from core.config.values import error
from core.layout import CONVERTED, actor_checkpoints, compile_cache, hub_cache, step_output
from core.names import HF_WRITE_SECRET, PUBLISH_ENV, QUEUE_LABEL, RETRY_ANNOTATION
from core.records import RECORD
from core.settings import Settings
from core.steps import STEPS, Output, StepName, scratch_gib, template_tokens
from workloads.specs import derived
from workloads.specs.behaviour import behaviour
from workloads.specs.commands import (
    CARD_DIR,
    PUBLISHED,
    RUN_SCRIPT,
    convert_argv,
    convert_script,
    export_argv,
    export_script,
    maxtext_check,
    program_script,
    publish_script,
    step_files,
    train_argv,
    train_config,
)
from workloads.specs.evaluation import EVALUATE_WORK, HELD_OUT, SYSTEM_PROMPT
from workloads.specs.step_logs import console_logs_url, logs_command
from workloads.specs.step_manifests import (
    CONFIG_MAP_MAX_BYTES,
    HEAD_JOB,
    SKIP_AWAIT,
    WORKLOAD_CONTAINER,
    cpu_jobset,
    pathways_jobset,
    scripts_config_map,
    scripts_name,
)
from workloads.specs.train_script import DRILL_ENV, SLICE_WAIT_ENV, STALL_ENV, train_script

HASH_CHARS = 10
# Placeholders while the hash is computed: shell-safe (scripts quote them like the real values) and
# never produced by a validated config value.
NAME = "@tpu-rl.name@"
STEP_ID = "@tpu-rl.step-id@"
OUTPUT = "gs://@tpu-rl.output@/"
HUB_CACHE = "gs://@tpu-rl.hub-cache@/"
"""The Hub cache the conversion writes (``Settings.hub_cache_written``: a shared one where the stack is its writer,
else the stack's own)."""
SHARED_CACHE = "gs://@tpu-rl.shared-cache@/"
"""The Hub cache the conversion reads first (``Settings.hub_cache``: a shared one, else the stack's own again).
Both are hashed as the stack's own cache and filled in after the hash, so neither ``tpu-rl:model.hubCache`` nor
``tpu-rl:model.hubCacheWriter`` names a step: where the base's files are kept is the stack's, not what a step computes
(every file is hashed against the Hub's value before use), so moving the cache re-runs nothing. A step's ConfigMap of
scripts keeps the folders it was created with (``workloads.workflow``, ``ignoreChanges`` on its data); a step created
later (a new identity) takes the new ones."""
OPERATIONAL_PATHS = ("spec.failurePolicy.maxRestarts", "spec.replicatedJobs[0].template.spec.activeDeadlineSeconds")
"""Fields that bound a run but do not change what it computes: not part of the identity, and ignored
on an existing object (ignoreChanges) so changing them never re-runs or disturbs a step. The first
replicated Job is the one with the deadline: the Pathways head, or the CPU step's only Job. Training also has
its stall bound (``stall_path``)."""
ACCOUNT_PATH = "spec.replicatedJobs[0].template.spec.template.spec.serviceAccountName"
"""A CPU step's Kubernetes service account: who it runs as, not what it computes. The identity hashes it as
``hashed_account`` whatever its name, and an existing object keeps the one it was created with (``ignoreChanges``:
JobSet refuses a change to its pods' service account, v0.10.1 ``jobset_webhook.go`` ``ValidateUpdate``); a new
object (a new identity, a retry) takes the current name."""
INPUT_ANNOTATION = "tpu-rl/input"
"""The verified output of the step before (an Output: the object waits for that verification)."""
PROGRAM_ANNOTATIONS = (INPUT_ANNOTATION, RETRY_ANNOTATION)
"""Annotations the program sets from live reads and earlier steps: set when an object is created (a
replacement takes the program's inputs), ignored afterwards (``ignoreChanges``), so a preview that
cannot read the cluster, or whose earlier step is being retried, shows no change for them."""
PATCH_FORCE = {"pulumi.com/patchForce": "true"}
"""When a create adopts an object that already exists (``upsertExistingObjects`` after a killed `up`),
pulumi-kubernetes applies the manifest with a new field manager and no force (``await.go``
``Creation``, ``patchForce``): a changed ``tpu-rl/retry-of`` annotation would then conflict with the
first create's. The objects are the program's alone, so it takes their fields over."""
AWAIT_GRACE_SECONDS = 15 * 60
"""How much longer `pulumi up` waits than a step's own deadlines, so the step's own failure (its reason and
log command) is what it reports, not its own bound."""


def step_hash(payload: Any) -> str:
    """A short, stable hash of a JSON-able payload."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:HASH_CHARS]


NOT_COMPILED = ("num_batches", "checkpoint_period", "load_checkpoint_only_once")
"""Training knobs left out of the compilation cache's key: how many batches a run trains, how often it saves (a
loop's count and a host-side period; the learning-rate schedule has its own knob, which is in the key) and whether
the actor is read from the checkpoint or copied from the reference (the same arrays on the same mesh either way:
MaxText 0.2.5 ``create_models_and_meshes`` gives the copy the reference's mesh, which the second read builds from the
same config and devices)."""


def compile_cache_key(settings: Settings) -> str:
    """The key of training's compilation cache (``core.layout.compile_cache``), a short hash of what the compiled
    programs are made from: MaxText's model, the three images (the compilers: MaxText's JAX and vLLM, the Pathways
    servers), the slice (TPU version, machine type, topology, slices: the mesh), the optimizer, every training knob
    but ``NOT_COMPILED`` and ``tpu-rl:training.extraArgs``. Not in it: the model's revision (the same architecture
    compiles the same), the dataset, the paths, the deadlines, the cluster. A key that keeps too much is a cold
    cache, never a stale entry; Pathways names its own entries by hashes too (``<hash>_<hash>.binarypb``), so the
    key partitions the cache by what its entries may not see. The images are the settings' as the step runs them:
    ``pulumi up`` pins a tag to its digest first (``program.stack._pinned_images``), so a moved tag is another key.
    Cache content never changes a step's name: the manifest holds only the folder."""
    training = settings.training
    shape = settings.slice
    images = settings.images
    payload = {
        "model": settings.model.spec.maxtext_name,
        "images": [images.maxtext, images.pathways_server, images.pathways_proxy],
        "slice": [shape.version, shape.machine_type, shape.topology, settings.tpu.slices],
        "optimizer": training.optimizer,
        "knobs": {key: value for key, value in training.knobs.items() if key not in NOT_COMPILED},
        "extraArgs": dict(training.extra_args),
    }
    return step_hash(payload)


MEMORY_FIX = "raise tpu-rl:workflow.stepMemoryGib (and tpu-rl:cpuPool.machineType if the node no longer fits it)"
"""What raises a CPU step's memory when its container was OOMKilled."""


@dataclass(frozen=True)
class Step:
    """One workflow step, ready to be wired to a Kubernetes resource."""

    step: str
    step_id: str
    name: str
    """JobSet name and Pulumi resource name: ``<model>-<step>-<hash>``."""
    output_uri: str
    artifact_uri: str
    """What the next step reads (and what the artifact check looks for)."""
    input_uri: str | None
    manifest: dict[str, Any]
    scripts: dict[str, Any]
    """Its ConfigMap of scripts (``<name>-scripts``, immutable): its bash script and the programs it runs, mounted
    into its container (``workloads.specs.step_manifests.scripts_config_map``); created before the JobSet, deleted
    after it."""
    ignore_changes: tuple[str, ...]
    await_seconds: int
    """How long `pulumi up` waits for it to end: every attempt's deadline (activeDeadlineSeconds) plus a grace."""
    logs_command: str
    console_logs_url: str
    output: Output
    """What it leaves at ``artifact_uri`` (how it is verified)."""
    container: str
    """Its own container: the one whose logs it shows and whose memory an OOM names first."""
    memory_fix: str
    """What raises that container's memory when the OOM killer ended it."""
    retry_note: str = ""
    """What a retry of it does beyond running it again (training resumes from its last checkpoint)."""
    kind: str = "JobSet"
    """Every step is a JobSet (``jobset.x-k8s.io/v1alpha2``)."""

    @property
    def script(self) -> str:
        """The bash script its container runs (``RUN_SCRIPT`` of its ConfigMap)."""
        return str(self.scripts["data"][RUN_SCRIPT])


@dataclass(frozen=True)
class Workflow:
    """The planned steps in their order, each after the one it reads."""

    steps: tuple[Step, ...]

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def get(self, name: str) -> Step | None:
        """The step named ``name`` (``Step.step``), None when the stack does not run it."""
        return next((step for step in self.steps if step.step == name), None)

    def __getitem__(self, name: str) -> Step:
        found = self.get(name)
        if found is None:
            raise KeyError(f"the workflow has no {name} step")
        return found

    # The steps every workflow has, by name (a later step needs no accessor: ``workflow["<name>"]``).
    @property
    def convert(self) -> Step:
        return self["convert"]

    @property
    def train(self) -> Step:
        return self["train"]

    @property
    def export(self) -> Step:
        return self["export"]

    @property
    def publish(self) -> Step | None:
        """The upload of the export to the Hub (``tpu-rl:publish.repo``), or None."""
        return self.get("publish")


def _without(manifest: dict[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
    """A copy of ``manifest`` without the fields at ``paths`` (dotted, ``name[i]`` for list items)."""
    out = copy.deepcopy(manifest)
    for path in paths:
        cursor: Any = out
        parts = path.replace("[", ".[").split(".")
        for part in parts[:-1]:
            cursor = cursor[int(part[1:-1])] if part.startswith("[") else cursor[part]
        cursor.pop(parts[-1], None)
    return out


def stall_path(manifest: dict[str, Any], name: str = STALL_ENV) -> str:
    """The training head's stall bound (``tpu-rl:workflow.stallTimeout``), an operational field: the value of
    the workload container's ``TPU_RL_STALL_SECONDS``; with ``name`` ``DRILL_ENV``, whether the run does the restart
    drill (``tpu-rl:workflow.restartDrill``: a measurement, not what the run computes); with ``SLICE_WAIT_ENV``, how
    long an attempt waits for its slice (``tpu-rl:kueue.recoveryTimeout``: a bound, like the stall's)."""
    pod = "spec.replicatedJobs[0].template.spec.template.spec"
    containers = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    index = next(i for i, c in enumerate(containers) if c["name"] == WORKLOAD_CONTAINER)
    env = next(i for i, e in enumerate(containers[index]["env"]) if e["name"] == name)
    return f"{pod}.containers[{index}].env[{env}].value"


def ignored(operational: tuple[str, ...]) -> tuple[str, ...]:
    """``ignoreChanges`` of a step: its operational fields, the program's annotations and the Kueue queue
    (which queue admits a step does not change what it computes, and Kueue refuses to move a running one:
    ``validateUpdateForQueueName``, "field is immutable")."""
    return (
        *operational,
        *(f'metadata.annotations["{a}"]' for a in PROGRAM_ANNOTATIONS),
        f'metadata.labels["{QUEUE_LABEL}"]',
    )


def hashed_account(step: str) -> str:
    """A CPU step's service account as its identity hashes it: ``tpu-rl-<step>``, the name every stack gave it
    before each account took its Google account's name (``core.names.step_ksa``, ``<clusterName>-<step>``). That
    name adds nothing the hash lacks (the cluster and the step are in it), and hashing the old one kept every
    step's identity: the rename re-ran no step (docs/upgrades.md "Upgrading tpu-rl")."""
    return f"tpu-rl-{step}"


def identity(
    settings: Settings,
    manifest: dict[str, Any],
    operational: tuple[str, ...] = OPERATIONAL_PATHS,
    step: str | None = None,
    files: Mapping[str, str] | None = None,
) -> str:
    """The hash of a step: its object (placeholders in; operational fields, annotations and the Kueue
    queue out; the service account of ``step``'s pods, if it names one, as ``hashed_account``), the files of its
    ConfigMap of scripts (``files``: what its container runs, each program without its comments and docstrings), the
    cluster it runs on and the bucket it writes to."""
    body = _without(manifest, operational)
    pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    if step is not None and "serviceAccountName" in pod:
        pod["serviceAccountName"] = hashed_account(step)
    labels = {k: v for k, v in body["metadata"].get("labels", {}).items() if k != QUEUE_LABEL}
    body["metadata"] = {**{k: v for k, v in body["metadata"].items() if k != "annotations"}, "labels": labels}
    payload = {"cluster": settings.cluster_identifier, "bucket": settings.bucket_name, "object": body}
    if files is not None:  # a program as what it does (``behaviour``): its comments and docstrings rename no step
        payload["scripts"] = {name: behaviour(text) if name.endswith(".py") else text for name, text in files.items()}
    return step_hash(payload)


def _fill(value: Any, name: str, step_id: str, output: str, caches: tuple[str, str]) -> Any:
    """A copy of a manifest with the placeholders replaced in every key and string (they never appear in
    user-supplied text); ``caches``: the Hub cache written and the one read first."""
    pairs = ((NAME, name), (STEP_ID, step_id), (OUTPUT, output), (HUB_CACHE, caches[0]), (SHARED_CACHE, caches[1]))
    return _replaced(value, pairs)


def _replaced(value: Any, pairs: tuple[tuple[str, str], ...]) -> Any:
    """``value`` copied as JSON would carry it (a tuple as a list), with each placeholder of ``pairs`` replaced, in
    order, in every string and key; a value JSON cannot carry is a bug of a builder (``TypeError``)."""
    if isinstance(value, str):
        for placeholder, real in pairs:
            value = value.replace(placeholder, real)
        return value
    if isinstance(value, dict):
        return {_replaced(key, pairs): _replaced(item, pairs) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replaced(item, pairs) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"a manifest holds a {type(value).__name__}, which JSON cannot carry")


def _address(
    settings: Settings,
    step: str,
    manifest: dict[str, Any],
    script: str,
    operational: tuple[str, ...] = OPERATIONAL_PATHS,
    data: dict[str, str] | None = None,
) -> tuple[str, str, str, dict[str, Any], dict[str, Any]]:
    """(hash, name, output URI, filled manifest, filled ConfigMap of scripts) of a manifest and its ``script`` (with
    the ConfigMap's ``data`` files: training's overrides) built with placeholders."""
    files = step_files(script, data)
    model = settings.model.spec.name
    # Hashed as the stack's own cache (bucket and model are in the identity already): the same name whichever
    # folder tpu-rl:model.hubCache names, and the name of a stack that leaves that key out.
    own_cache = hub_cache(settings.bucket_name, model)
    hashed = {k: v.replace(HUB_CACHE, own_cache).replace(SHARED_CACHE, own_cache) for k, v in files.items()}
    digest = identity(settings, manifest, operational, step, hashed)
    name = f"{model}-{step}-{digest}"
    output = step_output(settings.bucket_name, model, step, digest)
    caches = (settings.hub_cache_written, settings.hub_cache)
    filled = _fill(manifest, name, digest, output, caches)
    config_map = scripts_config_map(settings, step, scripts_name(NAME), STEP_ID, files)
    scripts = _fill(config_map, name, digest, output, caches)
    _creatable(settings, step, filled)
    _fits(step, scripts)
    return digest, name, output, filled, scripts


def config_map_bytes(config_map: dict[str, Any]) -> int:
    """What Kubernetes counts of a ConfigMap against its limit: every key and value of ``data``, in bytes."""
    return sum(len(key) + len(value.encode()) for key, value in config_map["data"].items())


def _fits(step: str, scripts: dict[str, Any]) -> None:
    """Refuse a step whose ConfigMap of scripts the API server would refuse (``CONFIG_MAP_MAX_BYTES``): only
    ``tpu-rl:training.extraArgs`` lengthens a script by more than a few names."""
    size = config_map_bytes(scripts)
    if size > CONFIG_MAP_MAX_BYTES:
        raise error(
            "tpu-rl:training.extraArgs",
            "(its values)",
            f"the {step} step's scripts would be {size} bytes, over a ConfigMap's {CONFIG_MAP_MAX_BYTES}; "
            "set fewer or shorter extraArgs",
        )


def _creatable(settings: Settings, step: str, manifest: dict[str, Any]) -> None:
    """Refuse a step whose JobSet, or an object the controllers would derive from it (its Jobs, pods, Service,
    Kueue Workload: ``workloads.specs.derived``), Kubernetes or JobSet's webhook would refuse. Every name they
    derive starts with the step's name, ``<tpu-rl:model.name>-<step>-<hash>``; the other values a stack can set
    (the queue, the cluster name, the slice count) are bounded where they are read. Which ClusterQueue admits the
    step refuses nothing: its name labels the pods only when it is a DNS-1123 label (``derived.derive``), and such a
    name is always a valid label value."""
    version = settings.workflow.jobset_version
    found = derived.problems(manifest, version)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise error(
            "tpu-rl:model.name",
            settings.model.spec.name,
            f"the {step} step's JobSet {manifest['metadata']['name']} could not run on JobSet {version}: "
            f"{found[0]}{more}; a model's name must be short enough for every name derived from it",
        )


def _cpu_step(
    settings: Settings,
    step: StepName,
    script: str,
    input_uri: str | None,
    artifact: str,
    memory_fix: str = MEMORY_FIX,
    **options: Any,
) -> Step:
    """A CPU-only step (convert, export, publish, any other of the catalogue's): a single-pod JobSet on cpu-np that
    runs ``script`` (from its ConfigMap of scripts), with the scratch its entry asks for (``options``: the
    publication's, see ``cpu_jobset``), its output ``artifact`` (a name under its output folder, or ``""`` for the
    folder) verified by its kind. A step whose entry holds the Hub write token (``write_token``) reads that token
    instead of the read one."""
    if STEPS[step].write_token:
        options["secret"] = HF_WRITE_SECRET
    manifest = cpu_jobset(
        settings,
        name=NAME,
        step=step,
        step_id=STEP_ID,
        scripts=scripts_name(NAME),
        scratch_gib=scratch_gib(settings.model.spec, step),
        annotations={**SKIP_AWAIT, **PATCH_FORCE},
        **options,
    )
    digest, name, out, manifest, scripts = _address(settings, step, manifest, script)
    deadline = settings.workflow.timeouts[step]
    job = f"{name}-{step}-0"
    return Step(
        step=step,
        step_id=digest,
        name=name,
        output_uri=out,
        artifact_uri=out + artifact,
        input_uri=input_uri,
        manifest=manifest,
        scripts=scripts,
        ignore_changes=ignored((*OPERATIONAL_PATHS, ACCOUNT_PATH)),
        await_seconds=deadline + AWAIT_GRACE_SECONDS,
        logs_command=logs_command(settings, job, step),
        console_logs_url=console_logs_url(settings, job, step),
        output=STEPS[step].output,
        container=step,
        memory_fix=memory_fix,
    )


def _convert_step(settings: Settings, _before: Mapping[str, Step]) -> Step:
    """Hugging Face -> MaxText on cpu-np, of the commit it resolves ``tpu-rl:model.revision`` to."""
    argv = convert_argv(settings, OUTPUT)
    command = convert_script(settings, argv, OUTPUT, HUB_CACHE, SHARED_CACHE)
    return _cpu_step(settings, "convert", command, None, CONVERTED)


def _train_step(settings: Settings, before: Mapping[str, Step]) -> Step:
    """GRPO through Pathways on the TPU slice, from the conversion's checkpoint."""
    convert = before["convert"]
    input_uri, convert_uri = convert.artifact_uri, convert.output_uri
    argv = train_argv(settings, input_uri, OUTPUT)
    manifest = pathways_jobset(
        settings,
        name=NAME,
        step_id=STEP_ID,
        scripts=scripts_name(NAME),
        scratch_uri=compile_cache(settings.bucket_name, settings.model.spec.name, compile_cache_key(settings)),
        annotations={**SKIP_AWAIT, **PATCH_FORCE},
    )
    operational = (
        *OPERATIONAL_PATHS,
        stall_path(manifest),
        stall_path(manifest, DRILL_ENV),
        stall_path(manifest, SLICE_WAIT_ENV),
    )
    script = train_script(settings, argv, OUTPUT, convert_uri)
    digest, name, out, manifest, scripts = _address(
        settings, "train", manifest, script, operational, train_config(argv)
    )
    head_job = f"{name}-{HEAD_JOB}-0"
    deadline = settings.workflow.timeouts["train"]
    return Step(
        step="train",
        step_id=digest,
        name=name,
        output_uri=out,
        artifact_uri=actor_checkpoints(out),
        input_uri=input_uri,
        manifest=manifest,
        scripts=scripts,
        # Who the head runs as, like a CPU step's account (ACCOUNT_PATH): hashed by its step, kept on an existing one.
        ignore_changes=ignored((*operational, ACCOUNT_PATH)),
        # Every attempt: the first, a restart per maxRestarts, and the restart drill's, which none of them counts.
        await_seconds=(1 + settings.workflow.max_restarts + settings.workflow.restart_drill)
        * (deadline + AWAIT_GRACE_SECONDS),
        logs_command=logs_command(settings, head_job, WORKLOAD_CONTAINER),
        console_logs_url=console_logs_url(settings, head_job, WORKLOAD_CONTAINER),
        output=STEPS["train"].output,
        container=WORKLOAD_CONTAINER,
        memory_fix="the Pathways head's limits are xpk's (core/pathways.py HEAD_RESOURCES)",
        retry_note="training resumes from its last checkpoint",
    )


PUBLISH_MEMORY_GIB = 32
"""The publication's memory: it streams files to the Hub (Xet's chunk buffers), it holds no model."""
BRANCH_PREFIX = "tpu-rl-"


def branch_of(step_id: str) -> str:
    """The Hub branch a publish step uploads to: named by the step's hash, so a changed run gets a new
    branch and nothing it published before is overwritten."""
    return BRANCH_PREFIX + step_id


def card_name(step_name: str) -> str:
    """The ConfigMap holding a publish step's model card."""
    return f"{step_name}-card"


def _export_step(settings: Settings, before: Mapping[str, Step]) -> Step:
    """MaxText -> Hugging Face on cpu-np, of the newest complete checkpoint of training, made the whole base
    model at the converted commit."""
    model = settings.model.spec
    convert, train = before["convert"], before["train"]
    argv = export_argv(settings, OUTPUT)
    check = maxtext_check(settings.images.maxtext, settings.images.maxtext_check)
    command = export_script(argv, train.artifact_uri, OUTPUT, model.hf_repo, convert.output_uri, check)
    # It reads the checkpoint and the objects the conversion hashed (GCS), nothing from the Hub: no token, and the
    # Hub switched off (huggingface_hub refuses every request, ``HF_HUB_OFFLINE``), transformers' tokenizer included.
    offline = ({"name": "HF_HUB_OFFLINE", "value": "1"},)
    return _cpu_step(settings, "export", command, train.artifact_uri, "", secret=None, env=offline)


def _publish_step(settings: Settings, before: Mapping[str, Step]) -> Step:
    """The verified export and its card, uploaded to ``tpu-rl:publish.repo`` on ``tpu-rl-<hash>``."""
    export = before["export"]
    publish = settings.publish
    repo_env, branch_env, private_env = PUBLISH_ENV
    env = (
        {"name": repo_env, "value": publish.repo},
        {"name": branch_env, "value": branch_of(STEP_ID)},
        {"name": private_env, "value": "true" if publish.private else "false"},
    )
    return _cpu_step(
        settings,
        "publish",
        publish_script(export.artifact_uri, OUTPUT),
        export.artifact_uri,
        PUBLISHED,
        f"the publication's {PUBLISH_MEMORY_GIB} GiB are fixed (workloads/specs/step_specs.py PUBLISH_MEMORY_GIB): it "
        "streams the export, so running out of memory is a bug of the upload to report",
        memory_gib=PUBLISH_MEMORY_GIB,
        env=env,
        config_map=(card_name(NAME), CARD_DIR),
    )


def _evaluate_step(settings: Settings, before: Mapping[str, Step]) -> Step:
    """The verified export loaded with transformers on cpu-np (``workloads/container/evaluate_export.py``), prompted as
    training prompts (the data template in the tokenizer's chat template), graded on ``HELD_OUT``: a step record."""
    export = before["export"]
    knobs = settings.training.knobs
    tokens = template_tokens(settings.training.extra_args)  # the configuration checks the answer markers
    spec = {
        "system": SYSTEM_PROMPT.format(**tokens),
        "answerStart": tokens["solution_start"],
        "answerEnd": tokens["solution_end"],
        # As many new tokens as training generates (the config rules keep the prefill below the target length).
        "maxNewTokens": int(knobs["max_target_length"]) - int(knobs["max_prefill_predict_length"]),
        "questions": [{"question": question, "answer": answer} for question, answer in HELD_OUT],
    }
    words = (export.artifact_uri, EVALUATE_WORK, OUTPUT + RECORD, json.dumps(spec, ensure_ascii=False))
    command = program_script("evaluate_export.py", *words, output_uri=OUTPUT, reads=(export.artifact_uri,))
    offline = ({"name": "HF_HUB_OFFLINE", "value": "1"},)  # it reads the export from GCS, nothing from the Hub
    return _cpu_step(settings, "evaluate", command, export.artifact_uri, RECORD, secret=None, env=offline)


@dataclass(frozen=True)
class StepSpec:
    """One entry of the step catalogue: the step's name and its builder (its facts, among them whether a stack
    runs it, are its entry in ``core.steps.STEPS``)."""

    name: StepName
    """The step's name (``Step.step``): in its objects' names, its output paths and its config keys
    (``tpu-rl:workflow.timeouts.<name>``)."""
    build: Callable[[Settings, Mapping[str, Step]], Step]
    """Its ``Step`` from the settings and the steps planned before it, by name (what it reads)."""


SPECS: tuple[StepSpec, ...] = (
    StepSpec("convert", _convert_step),
    StepSpec("train", _train_step),
    StepSpec("export", _export_step),
    StepSpec("evaluate", _evaluate_step),
    StepSpec("publish", _publish_step),
)
"""Every step's builder in the order the steps run (``core.steps.STEPS``'s): each reads only steps before it."""


def plan_workflow(settings: Settings, catalogue: tuple[StepSpec, ...] = SPECS) -> Workflow:
    """The steps of the catalogue the settings run (``Settings.workflow.steps``), each named by the hash of what
    it runs: convert, train, export and each optional step that is on (publish with ``tpu-rl:publish.repo``)."""
    planned: dict[str, Step] = {}
    for spec in catalogue:
        if spec.name in settings.workflow.steps:
            planned[spec.name] = spec.build(settings, planned)
    return Workflow(tuple(planned.values()))
