"""Cross-field rules and derived values: typed field values -> ``Settings``.

Each rule reports the key a user would change, with the other value it conflicts with.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from core.config.defaults import DEFAULT_PODS_READY, DEFAULT_RESTARTS, DEFAULT_UNSCHEDULABLE, RECOVERY_SECONDS
from core.config.finish import check_actor_copy, check_cpu_disk, check_cpu_pool, check_meshes, check_steps_finish
from core.config.resume import check_resume_exact
from core.config.values import UNREADABLE, Problems, UnreadableError, Values, canonical_cidr, error
from core.images import mirrored, mirrors_for
from core.inputs import parse_json
from core.knobs import TRAINING_KNOBS
from core.machines import HYPERDISK_FAMILIES, PD_FAMILIES, boot_disk_type, machine_family, machine_shape
from core.models import MODELS, Model, step_memory_gib
from core.names import LOCAL_QUEUE, PROJECT
from core.settings import (
    GkeSettings,
    ImageSettings,
    KueueSettings,
    ModelSettings,
    PoolSettings,
    PublishSettings,
    Settings,
    TpuSettings,
    TrainingSettings,
    WorkflowSettings,
)
from core.steps import STEPS
from core.tpu import CATALOGUE, FLEX_START_MIN_GKE, Capacity, SliceShape, TpuVersionName, resolve_slice

MAX_REGISTRIES = 20
MAX_HOLD_DAYS = 30
"""GKE's longest ``NO_UPGRADES`` maintenance exclusion."""
MAX_AUTHORIZED_NETWORKS = 50
"""GKE's limit of authorized networks for a cluster with a public endpoint."""

IMAGE_NAMES = ("maxtext", "pathwaysServer", "pathwaysProxy")


def _k(path: str) -> str:
    return f"{PROJECT}:{path}"


def _config_list(
    key: str, value: Any, *, items: str, example: str, purpose: str, limit: int, counted: str, too_many: str
) -> list[Any]:
    """A non-empty JSON list (a stack file's YAML list, or the CLI's JSON text) of at most ``limit`` items."""
    if isinstance(value, str):
        if value[:1] != "[":
            raise error(key, value, f"a list of {items}, e.g. {example}")
        try:
            value = parse_json(value, "a config value")
        except ValueError:
            raise error(key, value, f"malformed JSON; expected a list of {items}") from None
    if not isinstance(value, list) or not value:
        raise error(key, value, f"a non-empty list of {items} {purpose}")
    if len(value) > limit:
        raise error(key, f"{len(value)} {counted}", too_many)
    return value


def read_networks(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of unique canonical IPv4 CIDRs, at most GKE's limit."""
    networks = _config_list(
        key,
        value,
        items="CIDRs",
        example='["203.0.113.0/24"]',
        purpose="that may reach the control plane",
        limit=MAX_AUTHORIZED_NETWORKS,
        counted="networks",
        too_many=f"GKE allows at most {MAX_AUTHORIZED_NETWORKS} authorized networks",
    )
    problems = Problems()
    seen: dict[str, int] = {}
    for index, item in enumerate(networks):
        cidr = problems.run(canonical_cidr, f"{key}[{index}]", item)
        if cidr is UNREADABLE:
            continue
        if cidr in seen:
            problems.add(error(f"{key}[{index}]", item, f"duplicate of {key}[{seen[cidr]}]"))
        seen.setdefault(cidr, index)
    problems.check()
    return tuple(networks)


def read_registries(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of unique registry paths (host and repository path)."""
    from core.config.formats import REGISTRY

    registries = _config_list(
        key,
        value,
        items="registry paths",
        example='["us-docker.pkg.dev/cloud-tpu-images"]',
        purpose="the images may come from",
        limit=MAX_REGISTRIES,
        counted="registries",
        too_many=f"at most {MAX_REGISTRIES}",
    )
    problems = Problems()
    for index, item in enumerate(registries):
        if problems.run(REGISTRY, f"{key}[{index}]", item) is not UNREADABLE and item in registries[:index]:
            problems.add(error(f"{key}[{index}]", item, f"duplicate of {key}[{registries.index(item)}]"))
    problems.check()
    return tuple(registries)


def read_hold(key: str, value: str) -> tuple[str, str] | None:
    """``START/END`` as two real UTC dates, END after START and at most GKE's 30 days later."""
    if not value:
        return None
    start, end = value.split("/")
    try:
        first, last = datetime.date.fromisoformat(start), datetime.date.fromisoformat(end)
    except ValueError:
        raise error(key, value, "START and END must be real dates YYYY-MM-DD") from None
    if not first < last <= first + datetime.timedelta(days=MAX_HOLD_DAYS):
        raise error(
            key, value, f"END must be after START and at most {MAX_HOLD_DAYS} days later (GKE's limit for NO_UPGRADES)"
        )
    return start, end


def _secrets_key(value: str, region: str) -> str | None:
    """The key must live where the cluster does: GKE refuses a key of another location."""
    if not value:
        return None
    if value != "create":
        location = value.split("/")[3]
        if location != region:
            raise error(
                _k("gke.secretsEncryptionKey"),
                value,
                f"the key must be in the cluster's location {region} (gcp:region), not {location}",
            )
    return value


def _images(v: Values) -> ImageSettings:
    registries = v[_k("images.registries")]
    problems = Problems()
    images = {name: problems.run(lambda n: v[_k(f"images.{n}")], name) for name in IMAGE_NAMES}
    for name, image in images.items():
        if image is not UNREADABLE and not any(image.startswith(f"{registry}/") for registry in registries):
            problems.add(
                error(
                    _k(f"images.{name}"),
                    image,
                    f"not from an allowed registry ({', '.join(registries)}); add its registry to "
                    "tpu-rl:images.registries if you trust it",
                )
            )
    problems.check()
    if UNREADABLE in images.values():
        raise UnreadableError("images")
    configured = ImageSettings(images["maxtext"], images["pathwaysServer"], images["pathwaysProxy"], registries)
    if v[_k("images.mirror")] is not True:
        return configured
    # Through the stack's own remote repositories (``core.images.mirrors_for``): step names see where nodes pull.
    mirrors = mirrors_for(configured, v["gcp:project"], v["gcp:region"], v[_k("clusterName")])
    return mirrored(configured, mirrors)


def build_settings(values: dict[str, Any], stack: str, problems: Problems) -> Settings:
    """Apply the cross-field rules to typed field values and assemble ``Settings``. Every rule's problem goes to
    ``problems`` (a rule that needs a value which failed is skipped: that value's problem is there already);
    with any problem the result is ``UNREADABLE`` and the caller raises them all."""
    v = values if isinstance(values, Values) else Values(values)
    run = problems.run
    run(_zone_in_region, v)
    bucket = run(_bucket, v)
    tpu_and_shape = run(_tpu, v)
    tpu, shape = (UNREADABLE, UNREADABLE) if tpu_and_shape is UNREADABLE else tpu_and_shape
    gke = run(_gke, v)
    run(_flex_start, tpu, v, gke)
    system_pool = run(_pool, v, "systemPool")
    cpu_pool = run(_pool, v, "cpuPool")
    model = run(lambda: MODELS[v[_k("model.name")]])
    training = run(_training, v)
    workflow = run(_workflow, v, tpu, model)
    if run(lambda: v[_k("workflow.enabled")]) is True:
        run(_token_required, v)
        run(check_cpu_pool, cpu_pool, model, run(lambda w: w.step_memory_gib, workflow))
        run(check_cpu_disk, cpu_pool, model)
        run(lambda t, s, u: check_meshes(t.knobs, s.chips, u.slices), training, shape, tpu)
        run(lambda t, s, u: check_actor_copy(t, s.chips, u.slices), training, shape, tpu)
        run(lambda t, w: check_steps_finish(t, w.steps), training, workflow)
    publish = run(_publish, v)
    run(_own_queue, v)
    kueue = run(_kueue, v, tpu, cpu_pool)
    run(check_resume_exact, training, workflow, kueue)
    images = run(_images, v)
    run(_state_backend, v, bucket)
    shared_cache = run(_hub_cache, v, bucket)
    if problems.lines:
        return UNREADABLE
    return Settings(
        stack=stack,
        project=v["gcp:project"],
        region=v["gcp:region"],
        zone=v["gcp:zone"],
        cluster_name=v[_k("clusterName")],
        bucket_name=bucket,
        authorized_networks=v[_k("authorizedNetworks")],
        tpu=tpu,
        slice=shape,
        system_pool=system_pool,
        cpu_pool=cpu_pool,
        gke=gke,
        protect=v[_k("protect")],
        force_destroy=v[_k("forceDestroy")],
        bucket_versioning=v[_k("bucketVersioning")],
        namespace=v[_k("namespace")],
        hf_token_set=v["hfTokenSet"],
        model=ModelSettings(model, v[_k("model.revision")], *shared_cache),
        images=images,
        training=training,
        workflow=workflow,
        kueue=kueue,
        labels={"app": PROJECT, "stack": label_value(stack), "cluster": v[_k("clusterName")], "managed-by": "pulumi"},
        publish=publish,
        hf_write_token_set=v["hfWriteTokenSet"],
    )


def _zone_in_region(v: Values) -> None:
    region, zone = v["gcp:region"], v["gcp:zone"]
    if zone.rsplit("-", 1)[0] != region:
        raise error("gcp:zone", zone, f"must be a zone of gcp:region {region} (e.g. {region}-b)")


def _bucket(v: Values) -> str:
    bucket: str | None = v[_k("bucketName")]
    if bucket is not None:
        return bucket
    from core.config.formats import BUCKET_NAME

    bucket = f"{v['gcp:project']}-{v[_k('clusterName')]}"
    if not BUCKET_NAME.matches(bucket):
        raise error(
            _k("bucketName"),
            None,
            f"required: the default {bucket} (gcp:project-tpu-rl:clusterName) is not a valid bucket name; "
            "set one with `pulumi config set tpu-rl:bucketName NAME`",
        )
    return bucket


def _state_backend(v: Values, bucket: str) -> None:
    """The state lives in a bucket of its own: the stack's bucket is emptied by a destroy with ``forceDestroy``,
    and its readers (the steps' identities) would read the state; a shared Hub cache is read by other stacks."""
    backend: str | None = v[_k("stateBackend")]
    held = (backend or "").removeprefix("gs://").partition("/")[0] if (backend or "").startswith("gs://") else ""
    if held and held == bucket:
        raise error(
            _k("stateBackend"),
            backend,
            "names the stack's artifacts bucket, which a destroy may empty and the steps read: keep the state in a "
            "bucket of its own (leave the key unset: `make stack` records gs://<gcp:project>-pulumi-state-<stack>)",
        )
    cache = v[_k("model.hubCache")] or ""
    if held and held == cache.removeprefix("gs://").partition("/")[0]:
        raise error(
            _k("stateBackend"),
            backend,
            "names the bucket of the shared Hub cache (tpu-rl:model.hubCache), which other stacks read: keep the state "
            "in a bucket of its own",
        )


def _hub_cache(v: Values, bucket: str) -> tuple[str, str]:
    """The shared Hub cache and its one writer. It lives in a bucket of its own: the stack's bucket is emptied by a
    destroy with ``forceDestroy`` (and deleted with the stack), which would take every other stack's cache with it.
    One stack writes it (``tpu-rl:model.hubCacheWriter``, the same in every stack sharing it); the others get
    read-only grants on it (``infra.gcp.access.hub_cache_grants``)."""
    folder: str = v[_k("model.hubCache")]
    writer: str = v[_k("model.hubCacheWriter")]
    if folder and folder.removeprefix("gs://").partition("/")[0] == bucket:
        raise error(
            _k("model.hubCache"),
            folder,
            "is in the stack's own bucket, which a destroy empties: leave it empty (the stack's own cache) or name a "
            "bucket the stacks share",
        )
    if folder and not writer:
        raise error(
            _k("model.hubCacheWriter"),
            writer,
            "required with tpu-rl:model.hubCache: the one stack whose conversion writes the shared cache (the others "
            "only read it); set it in every stack that shares it: `pulumi config set tpu-rl:model.hubCacheWriter "
            "STACK`",
        )
    if writer and not folder:
        raise error(
            _k("model.hubCacheWriter"),
            writer,
            "names the writer of a shared Hub cache, and tpu-rl:model.hubCache names none: set both, or neither",
        )
    return folder, writer


def _gke(v: Values) -> GkeSettings:
    problems = Problems()
    exclusion = v[_k("gke.maintenanceExclusion")]
    hold = problems.run(read_hold, _k("gke.holdUpgrades"), v[_k("gke.holdUpgrades")])
    key = problems.run(_secrets_key, v[_k("gke.secretsEncryptionKey")], v["gcp:region"])
    problems.check()
    return GkeSettings(
        release_channel=v[_k("gke.releaseChannel")],
        version_prefix=v[_k("gke.versionPrefix")] or None,
        maintenance_exclusion=None if exclusion == "none" else exclusion,
        maintenance_window=v[_k("gke.maintenanceWindow")],
        hold_upgrades=hold,
        secrets_key=key,
    )


def _workflow(v: Values, tpu: TpuSettings, model: Model) -> WorkflowSettings:
    enabled = v[_k("workflow.enabled")]
    restarts = v[_k("workflow.maxRestarts")]
    unschedulable = v[_k("workflow.unschedulableTimeout")]
    memory = v[_k("workflow.stepMemoryGib")]
    return WorkflowSettings(
        enabled=enabled,
        preflight=v[_k("workflow.preflight")],
        capacity_check=v[_k("workflow.capacityCheck")],
        verify_export=v[_k("workflow.verifyExport")],
        max_restarts=DEFAULT_RESTARTS[tpu.capacity] if restarts is None else restarts,
        timeouts={step: v[_k(f"workflow.timeouts.{step}")] for step in STEPS},
        jobset_version=v[_k("workflow.jobsetVersion")],
        unschedulable_timeout=DEFAULT_UNSCHEDULABLE[tpu.capacity] if unschedulable is None else unschedulable,
        step_memory_gib=step_memory_gib(model) if memory is None else memory,
        stall_timeout=v[_k("workflow.stallTimeout")],
        restart_drill=v[_k("workflow.restartDrill")],
        steps=tuple(s.name for s in STEPS.values() if s.switch is None or v[s.switch]) if enabled else (),
    )


def _token_required(v: Values) -> None:
    if not v["hfTokenSet"]:
        raise error(
            _k("hfToken"),
            None,
            "required while tpu-rl:workflow.enabled is true; set it with "
            "`pulumi config set --secret tpu-rl:hfToken` (a Hugging Face read token)",
        )


def _publish(v: Values) -> PublishSettings:
    """The publication: with the workflow on (off, there is no export to publish), a repository needs its own
    write token (a write token without a repository is unused: no Secret holds it)."""
    repo = v[_k("publish.repo")] or None
    if repo is None or not v[_k("workflow.enabled")]:
        return PublishSettings()
    if not v[_k("workflow.verifyExport")]:
        raise error(
            _k("publish.repo"),
            repo,
            "needs tpu-rl:workflow.verifyExport true: only an export compared with the base model is published",
        )
    if not v["hfWriteTokenSet"]:
        raise error(
            _k("hfWriteToken"),
            None,
            "required with tpu-rl:publish.repo; set it with `pulumi config set --secret tpu-rl:hfWriteToken` "
            "(a Hugging Face write token for the repository's namespace, not the read token)",
        )
    return PublishSettings(repo=repo, private=v[_k("publish.private")])


def _tpu(v: Values) -> tuple[TpuSettings, SliceShape]:
    problems = Problems()
    machine_and_topology = problems.run(_machine_topology, v)
    reservation = problems.run(_reservation, v)
    problems.check()
    if machine_and_topology is UNREADABLE or reservation is UNREADABLE:
        raise UnreadableError("tpu")
    version, machine_name, topology = machine_and_topology
    settings = TpuSettings(version, machine_name, topology, v[_k("tpu.slices")], _capacity(v), reservation)
    return settings, resolve_slice(version, machine_name, topology)


def _machine_topology(v: Values) -> tuple[TpuVersionName, str, str]:
    version = CATALOGUE[v[_k("tpu.version")]]
    machine_name = v[_k("tpu.machineType")] or version.default_machine_type
    machine = version.machine(machine_name)
    if machine is None:
        raise error(
            _k("tpu.machineType"),
            machine_name,
            f"TPU {version.name} machine types are {', '.join(m.name for m in version.machine_types)}",
        )
    topology = v[_k("tpu.topology")]
    if machine.multi_host_capable:
        topology = topology or machine.default_topology
        if topology not in machine.multi_host_topologies:
            hint = (
                f"{topology} is a single-host slice and GKE rejects a topology on single-host pools; "
                if topology == machine.single_host_topology
                else ""
            )
            raise error(
                _k("tpu.topology"),
                topology,
                f"{hint}valid topologies of {machine.name} are {', '.join(machine.multi_host_topologies)}",
            )
    else:
        if topology not in (None, machine.single_host_topology):
            raise error(
                _k("tpu.topology"),
                topology,
                f"{machine.name} is single-host: it forms only {machine.single_host_topology}; omit the topology",
            )
        topology = machine.single_host_topology
    return version.name, machine_name, topology


def _capacity(v: Values) -> Capacity:
    """The capacity mode, parsed into its member (the schema's ``OneOf`` has checked it is one)."""
    return Capacity(v[_k("tpu.capacity")])


def _reservation(v: Values) -> str | None:
    capacity = _capacity(v)
    reservation = v[_k("tpu.reservation")]
    if capacity == Capacity.RESERVATION and reservation is None:
        raise error(
            _k("tpu.reservation"), None, "required with capacity reservation (the name of a specific reservation)"
        )
    if capacity != Capacity.RESERVATION and reservation is not None:
        raise error(_k("tpu.reservation"), reservation, f"only allowed with capacity reservation, not {capacity}")
    if reservation is not None and not reservation.startswith("projects/"):
        reservation = f"projects/{v['gcp:project']}/reservations/{reservation}"
    return reservation


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"[0-9]+", text))


def _flex_start(tpu: TpuSettings, v: Values, gke: GkeSettings) -> None:
    if tpu.capacity != Capacity.FLEX_START:
        return
    problems = Problems()
    problems.run(_flex_start_zone, tpu, v)
    problems.run(_flex_start_version, gke)
    problems.check()


def _flex_start_zone(tpu: TpuSettings, v: Values) -> None:
    zone = v["gcp:zone"]
    zones = CATALOGUE[tpu.version].flex_start_zones
    if zones is not None and zone not in zones:
        raise error(
            "gcp:zone",
            zone,
            f"TPU {tpu.version} flex-start is offered in {', '.join(zones)} only "
            "(GKE docs, 2026-11); choose one of them or another capacity mode",
        )


def _flex_start_version(gke: GkeSettings) -> None:
    if gke.version_prefix:
        prefix = _version_tuple(gke.version_prefix)
        minimum = _version_tuple(FLEX_START_MIN_GKE)
        if prefix[: len(prefix)] < minimum[: len(prefix)]:
            raise error(
                _k("gke.versionPrefix"), gke.version_prefix, f"TPU flex-start needs GKE {FLEX_START_MIN_GKE} or later"
            )


def _pool(v: Values, name: str) -> PoolSettings:
    problems = Problems()
    problems.run(_pool_size, v, name)
    disk = problems.run(_pool_disk, v, name)
    problems.check()
    return PoolSettings(
        v[_k(f"{name}.machineType")],
        v[_k(f"{name}.minNodes")],
        v[_k(f"{name}.maxNodes")],
        v[_k(f"{name}.diskSizeGb")],
        disk,
        v[_k(f"{name}.bootDiskImage")] if name == "cpuPool" else "",
    )


def _pool_size(v: Values, name: str) -> None:
    minimum, maximum = v[_k(f"{name}.minNodes")], v[_k(f"{name}.maxNodes")]
    if maximum < minimum:
        raise error(_k(f"{name}.maxNodes"), maximum, f"must be at least minNodes ({minimum})")


def _pool_disk(v: Values, name: str) -> str:
    machine = v[_k(f"{name}.machineType")]
    disk = boot_disk_type(machine)
    if disk is None:
        raise error(
            _k(f"{name}.machineType"),
            machine,
            f"unknown machine family {machine_family(machine)!r}: known families with PD boot disks are "
            f"{', '.join(PD_FAMILIES)}; with Hyperdisk only {', '.join(HYPERDISK_FAMILIES)}",
        )
    return disk


def _training(v: Values) -> TrainingSettings:
    # `get` never raises: a rule skips only when a knob it reads is itself invalid (already reported).
    knobs = Values({knob.key: v.get(_k(f"training.{knob.field}")) for knob in TRAINING_KNOBS})
    problems = Problems()
    for rule in (_micro_batches, _prefill, _fractions):
        problems.run(rule, knobs)
    problems.check()
    if any(value is UNREADABLE for value in knobs.values()):
        raise UnreadableError("training")
    return TrainingSettings(
        dict(knobs),
        v[_k("training.optimizer")],
        v[_k("training.dataset")],
        v[_k("training.extraArgs")],
        v[_k("training.datasetRevision")],
    )


def _micro_batches(knobs: dict[str, Any]) -> None:
    batch, micro = int(knobs["batch_size"]), int(knobs["train_micro_batch_size"])
    if batch % micro:
        raise error(_k("training.trainMicroBatchSize"), micro, f"must divide batchSize ({batch})")


def _prefill(knobs: dict[str, Any]) -> None:
    if int(knobs["max_prefill_predict_length"]) >= int(knobs["max_target_length"]):
        raise error(
            _k("training.maxPrefillPredictLength"),
            knobs["max_prefill_predict_length"],
            f"must be below maxTargetLength ({knobs['max_target_length']})",
        )


def _fractions(knobs: dict[str, Any]) -> None:
    trainer, sampler = float(knobs["trainer_devices_fraction"]), float(knobs["sampler_devices_fraction"])
    if trainer <= 0:
        raise error(_k("training.trainerDevicesFraction"), trainer, "must be above 0")
    if sampler <= 0 or trainer + sampler > 1.0 + 1e-9:
        raise error(
            _k("training.samplerDevicesFraction"),
            sampler,
            f"must be above 0, and trainer and sampler fractions sum to at most 1 (trainer is {trainer})",
        )


def _kueue(v: Values, tpu: TpuSettings, cpu_pool: PoolSettings) -> KueueSettings:
    """Kueue of our own (the default), a LocalQueue managed elsewhere, or none."""
    install, queue = v[_k("kueue.enabled")], v[_k("kueue.queue")]
    _sized_pool(install, cpu_pool)
    ready = v[_k("kueue.podsReadyTimeout")]
    ready = DEFAULT_PODS_READY[tpu.capacity] if ready is None else ready
    recovery = v[_k("kueue.recoveryTimeout")]
    return KueueSettings(
        install=install,
        queue=LOCAL_QUEUE if install else (queue or None),
        version=v[_k("kueue.version")],
        pods_ready_timeout=ready,
        admission_timeout=v[_k("kueue.admissionTimeout")],
        recovery_timeout=ready + RECOVERY_SECONDS if recovery is None else recovery,
    )


def _own_queue(v: Values) -> None:
    """A queue managed elsewhere, or Kueue of our own: not both (checked apart from ``_kueue``, which needs the
    pools)."""
    queue = v[_k("kueue.queue")]
    if v[_k("kueue.enabled")] and queue:
        raise error(
            _k("kueue.queue"),
            queue,
            "names a LocalQueue managed elsewhere, but tpu-rl:kueue.enabled is true (tpu-rl installs its own "
            f"queue, {LOCAL_QUEUE}); set tpu-rl:kueue.enabled false to use {queue}, or remove tpu-rl:kueue.queue",
        )


def _sized_pool(install: bool, cpu_pool: PoolSettings) -> None:
    if install and machine_shape(cpu_pool.machine_type) is None:
        raise error(
            _k("cpuPool.machineType"),
            cpu_pool.machine_type,
            "has no known size, and Kueue's cpu and memory quota is the pool's size; use a predefined machine "
            "type such as n4-standard-64, or set tpu-rl:kueue.enabled false",
        )


def label_value(text: str) -> str:
    """A GCP label value: lowercase letters, digits, underscores and hyphens, at most 63."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
