"""The whole stack: config validated, then the GCP platform (``infra/``), then the workflow
(``workloads/``), then the stack's outputs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from core.config import placeholder_problems
from core.config.projects import problem as shared_project_problem
from core.config.projects import stack_configs
from core.config.values import OFFLINE_SECRETS
from core.errors import BAD_INPUT, TpuRlError
from core.estimate import estimate_for
from core.images import (
    image_outputs,
    pin_images,
    recorded_pins,
    to_resolve,
)
from core.names import head_ksa
from core.printed_commands import make_target, pulumi_config_set
from core.settings import Settings
from core.steps import STEPS
from core.version import VERSION, in_state, runs_again, why_again
from infra.gcp.naming import Names, names_for
from infra.k8s.kueue import kueue_objects
from infra.k8s.manifests import platform_labels
from infra.k8s.platform import ClusterReads, DestroyGuard, KubernetesPlatform, PlatformArgs
from infra.stop import StopError, log_info, log_warn, stop, stop_all
from program.config import Accept, accepted, settings_from_runtime
from program.site import Site, cloud, existing, mirrors, needs
from program.world import OFFLINE, CheckCapacity, ResolveDigest, World
from workloads.preflight import COMMIT, BaseModel
from workloads.reader import Hub, LiveReader, reader_args
from workloads.specs.commands import slice_warnings
from workloads.specs.step_inputs import step_inputs
from workloads.specs.step_specs import Workflow, plan_workflow
from workloads.workflow import WorkflowArgs, WorkflowRun


def main(world: World = OFFLINE, *, preflight: bool = True) -> Settings:
    """Register every resource of the stack.

    ``world``: what the run reads beyond its configuration (``program.world``; ``live_world()`` in `pulumi up`):
    before anything, the images' digests and the project's capacity (``tpu-rl:workflow.capacityCheck``); then the
    cluster and the bucket (retry detection, the waits, artifact checks). The offline plan reads none of it.
    ``preflight``: before anything, refuse example placeholders and a project another stack file of the checkout
    names too unless both accept it (``core.config.projects``), and check the Hugging Face tokens with the world's
    Hub (the latter when ``tpu-rl:workflow.preflight`` is on).
    """
    try:
        accept = accepted()  # `make up ACCEPT=...`: a word it does not know stops the program before anything
        settings = settings_from_runtime()
        # The steps, and what the controllers derive from them, are checked before anything is registered.
        plan = plan_workflow(settings) if settings.workflow.enabled else None
    except TpuRlError as err:
        raise stop(err) from None
    for line in slice_warnings(settings.tpu.slices):
        log_warn(line)
    names = names_for(settings)
    mirrored = mirrors(settings)
    pinned = settings.model.revision if COMMIT.fullmatch(settings.model.revision) else ""
    checked = _Checked(settings, plan, BaseModel(pinned, None), frozenset())
    if preflight:
        checked = _preflight_phase(checked, world)
    settings, plan = checked.settings, checked.plan
    if plan is not None:
        _runs_again(settings, plan, accept, world.state.steps)
    if settings.existing is None:
        site = cloud(settings, names, mirrored, checked.reuse).site()
    else:
        site = existing(settings, names, world)
    reads = ClusterReads(site.kubeconfig, world.cluster, world.state.releases) if world.cluster else None
    platform = _kubernetes(settings, names, site, plan, reads)
    # Registered once the platform is, before any step: a protected stack is guarded whatever happens to the steps.
    DestroyGuard(GUARD, settings.protect, [*site.parts, platform])
    run: WorkflowRun | None = None
    if plan is not None:
        run = _workflow(settings, plan, site, platform, checked.base, world, accept=accept)
    _export_platform(settings, site)
    _step_guards(settings, plan, run)
    return settings


def _runs_again(settings: Settings, plan: Workflow, accept: frozenset[Accept], steps_in_state: str | None) -> None:
    """Say which steps the state holds that this `up` runs again (``core.version``: `make up` hands the state's version
    and step names over, ``steps_in_state``); stop before anything when a newer tpu-rl renames a protected stack's step
    on the TPU slice (``holds_tpu``: training), unless ``ACCEPT=rerun`` (a day of TPU time is not spent again by an
    upgrade nobody meant to start)."""
    state = in_state(steps_in_state)
    again = runs_again(state, {step.step: step.name for step in plan.steps}) if state else ()
    if state is None or not again:
        return
    why = why_again(state, again)
    line = f"this `up` runs again: {', '.join(again)} ({why}); a finished run's output stays where it is"
    upgraded = state.version != VERSION and why.startswith("the state was written")
    on_tpu = any(STEPS[step].holds_tpu for step in again if step in STEPS)
    if settings.protect and upgraded and on_tpu and Accept.RERUN not in accept:
        again_command = make_target("up", settings.stack, f"ACCEPT={Accept.RERUN}")
        raise StopError(f"{line}: `{again_command}` to run them again", BAD_INPUT)
    log_warn(line)


STACK_FILES = Path(__file__).resolve().parents[1]
"""Where the program finds the checkout's stack files (the project's folder, where Pulumi runs it): the preflight
compares this stack's ``gcp:project`` with theirs (``core.config.projects``)."""

GUARD = "tpu-rl-protect"
"""The platform's destroy guard; the steps' are ``step_guard(index)``."""


def step_guard(index: int) -> str:
    """The name of the destroy guard of the plan's step ``index`` (0-based)."""
    return f"{GUARD}-step-{index + 1}"


def scripts_guard(index: int) -> str:
    """The name of the destroy guard of the plan's step ``index``'s ConfigMap of scripts (0-based)."""
    return f"{GUARD}-scripts-{index + 1}"


@dataclasses.dataclass(frozen=True)
class _Checked:
    """What the checks before any resource leave: the settings and the plan (with the images pinned), the base
    model the preflight read, and what the capacity check found left by an earlier destroy (imported)."""

    settings: Settings
    plan: Workflow | None
    base: BaseModel
    """What the preflight reads, when it runs."""
    reuse: frozenset[str]


def _preflight_phase(checked: _Checked, world: World) -> _Checked:
    """The preflight phase, before any resource: the placeholders, a shared project and the tokens (one line each),
    then what the world says: the model's access on the Hub (``_preflight``), the images' digests in their registries
    (``_pinned_images``) and the capacity (``_capacity``)."""
    settings, plan, base, reuse = checked.settings, checked.plan, checked.base, checked.reuse
    problems = placeholder_problems(settings) + _token_problems(settings)
    shared = shared_project_problem(settings.stack, settings, stack_configs(STACK_FILES, settings.stack))
    problems += [shared] if shared else []
    if problems:
        raise StopError("\n".join(f"preflight: {problem}" for problem in problems), BAD_INPUT)  # one line each
    if world.hub is not None and settings.workflow.enabled and settings.workflow.preflight:
        base = _preflight(settings, world.hub)
    if world.registry is not None and plan is not None:  # the images are the steps': no workflow, nothing runs them
        settings, plan = _pinned_images(settings, plan, world.registry, world.state.pins)
    # The capacity check reads what creating the stack's pools would take: an existing cluster's slice is there.
    if world.capacity is not None and settings.workflow.capacity_check and settings.existing is None:
        reuse = _capacity(settings, world.capacity, world.state.keys)
    return _Checked(settings, plan, base, reuse)


def _kubernetes(
    settings: Settings, names: Names, site: Site, plan: Workflow | None, reads: ClusterReads | None
) -> KubernetesPlatform:
    """The Kubernetes platform (``infra/k8s``): the namespace, the controllers, the step accounts and tokens;
    ``reads``: how it reads the cluster (None: it does not)."""
    # A step account's grants (its bucket prefixes, its Workload Identity binding) are made before its Kubernetes
    # service account (``PlatformArgs.workload_grants``); the step waits for them to take effect itself, at its first
    # use of each (``workloads/container/mark_folder.py``), not the program. The node accounts' wait is the pools'
    # (``GkeCluster.nodes_access``), the Secrets key's the cluster's: their first users are not the stack's programs.
    token = pulumi.Config().get_secret("hfToken") if settings.hf_token_set else None
    write_token = pulumi.Config().get_secret("hfWriteToken") if settings.publish.repo else None
    labels = platform_labels(settings.cluster_name)
    return KubernetesPlatform(
        "k8s",
        PlatformArgs(
            protect=settings.protect,
            labels=labels,
            namespace=settings.namespace,
            kube_context=settings.kube_context,
            scratch_disk_type=settings.cpu_pool.disk_type,
            jobset_version=settings.workflow.jobset_version,
            kueue=kueue_objects(settings, labels),
            local_queue=settings.kueue.queue,
            accounts=names.ksas,
            provider=site.provider,
            cluster=site.cluster,
            step_sa_emails=site.step_emails,
            workload_grants=site.grants,
            hf_token=token,
            hf_write_token=write_token,
            reads=reads,
            first_jobset=plan.steps[0].manifest if plan is not None else None,
            head_account=head_ksa(settings.cluster_name) if plan is not None else None,
            existing=needs(settings) if settings.existing is not None else None,
        ),
    )


def _workflow(
    settings: Settings,
    plan: Workflow,
    site: Site,
    platform: KubernetesPlatform,
    base: BaseModel,
    world: World,
    *,
    accept: frozenset[Accept] = frozenset(),
) -> WorkflowRun:
    """The workflow's steps (``workloads/``) and their outputs, read and waited for through ``world``'s cluster, bucket
    and Hub when it has them; ``accept``: what `make up ACCEPT=...` lets `up` go on past."""
    reads = reader_args(settings, accept_maintenance=Accept.MAINTENANCE in accept)
    reader = None
    if world.cluster is not None and world.bucket is not None and world.hub is not None:
        ready = platform.namespace.id
        reader = LiveReader(reads, site.kubeconfig, ready, connect=world.cluster, bucket=world.bucket, hub=world.hub)
    run = WorkflowRun(
        "workflow",
        WorkflowArgs(
            namespace=settings.namespace,
            inputs=step_inputs(settings, plan, _config_diff() if settings.publish.repo else (), base.license),
            plan=plan,
            provider=site.provider,
            cluster=site.cluster,
            ready=platform.ready,
            tpu_pools=site.tpu_pools,
            reader=reader,
            base_commit=base.commit or None,
        ),
    )
    pulumi.export("steps", run.step_outputs())
    pulumi.export("hfModelUri", run.hf_model_uri)
    if run.published is not None:
        pulumi.export("hubRepoUrl", run.published.apply(lambda found: found["url"]))
        pulumi.export("hubRevision", run.published.apply(lambda found: found["branch"]))
        pulumi.export("hubCommit", run.published.apply(lambda found: found["commit"]))
    return run


def _export_platform(settings: Settings, site: Site) -> None:
    """The platform's outputs: the cluster, the bucket, the pools, the slice, the images, the estimate."""
    location = settings.region
    pulumi.export("clusterName", site.cluster_name)
    pulumi.export("clusterLocation", location)
    pulumi.export("clusterIdentifier", settings.cluster_identifier)
    pulumi.export("bucketUrl", site.bucket_url)
    pulumi.export("hubCache", settings.hub_cache)
    pulumi.export("nodePools", site.pools)
    pulumi.export(
        "tpuSlice",
        {
            "machineType": settings.slice.machine_type,
            "topology": settings.slice.topology,
            "chips": settings.slice.chips,
            "hosts": settings.slice.hosts,
            "slices": settings.tpu.slices,
            "capacity": settings.tpu.capacity,
        },
    )
    pulumi.export("images", image_outputs(settings.images.upstream or settings.images, settings.images))
    pulumi.export("estimate", estimate_for(settings).to_output())
    pulumi.export("kubeconfig", site.kubeconfig)
    pulumi.export("getCredentialsCommand", settings.get_credentials_command)
    pulumi.export("version", VERSION)


def _step_guards(settings: Settings, plan: Workflow | None, run: WorkflowRun | None) -> None:
    """A guard per step, on the step's object, registered as soon as it is created (before the program waits for
    it). They are numbered in the plan's order, as many as the catalogue has steps (those past the plan guard
    nothing): turning a step on or off moves a guard to another object and never deletes one, which a protected stack
    refuses. Each step's ConfigMap of scripts is created before its JobSet (which waits for the steps before it): a
    guard of its own keeps it when an `up` ends between the two."""
    steps = list(plan.steps) if run is not None and plan is not None else []
    objects = [run.objects[step.step] for step in steps] if run is not None else []
    scripts = [run.scripts[step.step] for step in steps] if run is not None else []
    for index in range(len(STEPS)):
        DestroyGuard(step_guard(index), settings.protect, objects[index : index + 1])
        DestroyGuard(scripts_guard(index), settings.protect, scripts[index : index + 1])


def _pinned_images(
    settings: Settings, plan: Workflow | None, resolve: ResolveDigest, pins_in_state: str | None
) -> tuple[Settings, Workflow | None]:
    """Each image the configuration names by tag, pinned to the digest its registry gives the tag now
    (``infra.gcp.registry``), before anything is registered: the steps run that digest, whatever the tag points to
    later, and their names and output paths hash it (``resolve``: the world's registry). The digest the last `up`
    pinned a tag to stays (``make up`` hands the state's pins over, ``pins_in_state``: ``core.images.recorded_pins``): a
    tag that moves upstream renames no finished or running step; a new tag in the configuration is read again, a new
    image, new steps. Run by `pulumi up` and `pulumi preview`; the offline plan reads no registry and shows the images
    as configured. Every image that cannot be read is one line."""
    digests, problems = {}, []
    # Read where the image is published (a mirror of the stack's may not exist yet: this `up` creates it); a mirror
    # serves the same manifest, so the same digest. A tag the last `up` pinned keeps its digest (``recorded_pins``).
    tagged = to_resolve(settings.images.upstream or settings.images)
    recorded = recorded_pins(pins_in_state)
    for key, image in tagged.items():
        if image in recorded:
            digests[key] = recorded[image]
            continue
        try:
            digests[key] = resolve(image, key=f"images.{key}")
        except TpuRlError as err:
            problems.append((f"images: {err}", err.exit_code))
    if problems:
        raise stop_all(problems)  # one line each
    if not digests:
        return settings, plan
    for key, digest in digests.items():
        log_info(f"images: tpu-rl:images.{key} ({tagged[key]}) is {digest}")
    pinned = dataclasses.replace(settings, images=pin_images(settings.images, digests))
    try:
        return pinned, plan_workflow(pinned) if plan is not None else None
    except TpuRlError as err:
        raise stop(err) from None


def _capacity(settings: Settings, check: CheckCapacity, held_keys: str | None) -> frozenset[str]:
    """Fail before any resource when the slice cannot be had (reservation, quotas, APIs, the Secrets key):
    ``check`` (infra.gcp.capacity in a real run). Returns the ids of what an earlier destroy left that this `up` imports
    (a KMS key ring and key of the stack's names)."""
    findings = check(settings, held_keys=held_keys)
    for finding in findings:
        if finding.level == "unknown":
            log_warn(f"capacity check: {finding.text}")
        elif finding.level == "note":
            log_info(f"capacity check: {finding.text}")
    problems = [f.text for f in findings if f.level == "problem"]
    if problems:
        skip = " (tpu-rl:workflow.capacityCheck: false skips this check)"
        raise StopError("\n".join(f"capacity check: {problem}{skip}" for problem in problems))  # one line each
    return frozenset(f.reuse for f in findings if f.reuse)


def _token_problems(settings: Settings) -> list[str]:
    """The write token may not be the read token (no network: checked with the preflight off too)."""
    if not settings.publish.repo:
        return []
    read, write = (runtime_config.get_config(f"tpu-rl:{key}") for key in ("hfToken", "hfWriteToken"))
    if write and write not in OFFLINE_SECRETS and write == read:
        return [
            "tpu-rl:hfWriteToken is the read token (tpu-rl:hfToken): publishing takes a token of its own, which "
            "only the publish step gets; create a write token and set it with "
            f"`{pulumi_config_set(settings.stack, 'tpu-rl:hfWriteToken', secret=True)}`"
        ]
    return []


def _config_diff() -> list[dict[str, Any]]:
    """The stack's settings that differ from the tutorial's (the model card's table)."""
    from core.config.diff import config_diff
    from program.config import raw_config

    return config_diff(*raw_config())


def _checked_token(token: str, key: str, variable: str) -> str:
    """The Hub's ``token`` the preflight checks: the stack's own in `pulumi up`; the offline plan never decrypts, so
    its Hub holds the one of the environment variable ``variable`` (``program.world.environment_hub``), and none
    stops the preflight with the variable to export."""
    if not token or token in OFFLINE_SECRETS:
        raise StopError(
            f"preflight: the offline plan does not decrypt tpu-rl:{key} (or it is not set yet); export "
            f"{variable} with the token to check it (`pulumi up` checks the stack's own)",
            BAD_INPUT,
        )
    return token


def _preflight(settings: Settings, hub: Hub) -> BaseModel:
    """Fail before any resource if the token cannot read the model (gated licence not accepted, bad token)."""

    from workloads.preflight import check_model_access

    model = settings.model
    token = _checked_token(hub.read_token, "hfToken", "HF_TOKEN")
    try:
        base = check_model_access(model.spec.hf_repo, model.revision, token, endpoint=hub.endpoint)
    except TpuRlError as err:
        raise stop(err, "preflight: ") from None
    commit = base.commit
    log_info(f"preflight: {model.spec.hf_repo}@{model.revision} is readable (commit {commit or 'unknown'})")
    _dataset_preflight(settings, token, hub.endpoint)
    if settings.publish.repo:
        _publish_preflight(settings, hub)
    return base


def _dataset_preflight(settings: Settings, token: str, endpoint: str | None) -> None:
    """Fail before any resource if the dataset's files cannot be staged at ``tpu-rl:training.datasetRevision`` (no
    such revision, a pattern that matches nothing, terms not accepted): the training pod would find out only after
    its slice was up."""
    from core.knobs import DATASETS
    from workloads.preflight import check_dataset_access
    from workloads.specs.commands import staged_dataset

    staged = staged_dataset(DATASETS[settings.training.dataset], "")[1]
    if staged is None:  # loaded by name: nothing staged
        return
    repo, patterns = staged
    revision = settings.training.dataset_revision
    try:
        commit = check_dataset_access(repo, revision, tuple(patterns), token, endpoint=endpoint)
    except TpuRlError as err:
        raise stop(err, "preflight: ") from None
    log_info(f"preflight: the dataset {repo}@{revision} is readable (commit {commit or 'unknown'})")


def _publish_preflight(settings: Settings, hub: Hub) -> None:
    """Fail before any resource if the write token cannot publish to tpu-rl:publish.repo (a read token, no
    write role in the namespace, an existing public repository for a private run)."""
    from workloads.preflight import check_publish_access

    publish = settings.publish
    assert publish.repo is not None  # only called with a repository
    token = _checked_token(hub.write_token, "hfWriteToken", "HF_WRITE_TOKEN")
    try:
        found = check_publish_access(publish.repo, publish.private, token, endpoint=hub.endpoint)
    except TpuRlError as err:
        raise stop(err, "preflight: ") from None
    log_info(f"preflight: tpu-rl:hfWriteToken can publish to {publish.repo} ({found})")
